import pytest
from hypothesis import given
from hypothesis import strategies as st

from georag.data.chunking import chunk_documents


def test_windows_and_mapping():
    words = " ".join(f"w{i}" for i in range(10))
    chunks = chunk_documents({"a": words, "b": "short text", "c": ""}, window=4, overlap=1)
    assert chunks.texts[:3] == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert chunks.doc_ids == ["a", "a", "a", "b", "c"]
    assert chunks.chunk_ids == ["a#0", "a#1", "a#2", "b#0", "c#0"]
    assert chunks.texts[3:] == ["short text", ""]


@pytest.mark.parametrize("window, overlap", [(0, 0), (5, 5), (5, -1)])
def test_bad_settings(window, overlap):
    with pytest.raises(ValueError, match="window|overlap"):
        chunk_documents({"a": "x"}, window=window, overlap=overlap)


@given(n=st.integers(0, 60), window=st.integers(1, 12), data=st.data())
def test_every_word_covered_in_order(n, window, data):
    overlap = data.draw(st.integers(0, window - 1))
    words = [f"w{i}" for i in range(n)]
    chunks = chunk_documents({"d": " ".join(words)}, window=window, overlap=overlap)
    covered = [w for text in chunks.texts for w in text.split()]
    assert sorted(set(covered), key=words.index) == words
    assert all(len(t.split()) <= window for t in chunks.texts)
    if overlap:
        for left, right in zip(chunks.texts, chunks.texts[1:]):
            assert left.split()[-overlap:] == right.split()[:overlap]
