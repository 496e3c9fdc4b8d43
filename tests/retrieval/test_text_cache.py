"""The per-text embedding cache: each text encoded once, across calls, instances and shards."""

from __future__ import annotations

import collections
import functools
import pickle

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.retrieval.cache import content_hash
from georag.retrieval.text_cache import TextEmbeddingCache, text_key


class CountingEncoder:
    """Deterministic stand-in for a sentence encoder that records what it was asked."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: list[str]) -> torch.Tensor:
        self.seen += texts
        return torch.tensor([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts])


def test_each_text_is_encoded_once_across_calls_and_processes(tmp_path):
    enc = CountingEncoder()
    cache = TextEmbeddingCache("model-a", tmp_path, shard_size=2)
    first = cache.encode(["a", "bb", "a", "ccc"], enc)
    assert enc.seen == ["a", "bb", "ccc"] and first.shape == (4, 3)
    assert torch.equal(first[0], first[2])
    assert len(list(cache.folder.glob("*.npz"))) == 2  # shards of 2 texts, written as they go
    again = TextEmbeddingCache("model-a", tmp_path).encode(["ccc", "dddd", "a"], enc)
    assert enc.seen[3:] == ["dddd"]  # a fresh instance reads the shards from disk
    assert torch.equal(again[0], first[3]) and torch.equal(again[2], first[0])
    other = CountingEncoder()
    TextEmbeddingCache("model-b", tmp_path).encode(["a"], other)
    assert other.seen == ["a"]  # another model key shares nothing


def test_memory_only_add_and_bad_shards(tmp_path):
    enc = CountingEncoder()
    memory = TextEmbeddingCache("m", tmp_path, persist=False)
    memory.add(["x", "y"], torch.ones(2, 3))
    assert torch.equal(memory.encode(["y", "z"], enc)[0], torch.ones(3)) and enc.seen == ["z"]
    assert not (tmp_path / memory.folder.name).exists()
    with pytest.raises(ValueError, match="embeddings"):
        memory.add(["x"], torch.ones(2, 3))
    disk = TextEmbeddingCache("m", tmp_path)
    disk.folder.mkdir(parents=True)
    (disk.folder / "broken.npz").write_bytes(b"not a zip")
    assert disk.encode(["q"], enc).shape == (1, 3) and enc.seen[-1] == "q"


def test_a_bounded_cache_keeps_the_most_recently_used(tmp_path):
    enc = CountingEncoder()
    cache = TextEmbeddingCache("m", tmp_path, persist=False, max_rows=3)
    assert cache.encode(["a", "b", "c", "d"], enc).shape == (4, 3)  # a batch wider than the bound
    assert len(cache._rows) == 3 and enc.seen == ["a", "b", "c", "d"]
    cache.encode(["b"], enc)  # b is now the most recent; c the least
    cache.encode(["e"], enc)
    assert list(cache._rows) == [content_hash([t]) for t in ("d", "b", "e")]
    want = CountingEncoder()(["c"])
    assert torch.equal(cache.encode(["c"], enc), want) and enc.seen[-1] == "c"  # encoded again
    with pytest.raises(ValueError, match="max_rows"):
        TextEmbeddingCache("m", tmp_path, max_rows=0)


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.lists(st.sampled_from("abcdefghij"), max_size=7), min_size=1, max_size=12),
    bound=st.integers(1, 5),
)
def test_bounded_rows_match_a_reference_lru(calls, bound):
    """Rows reused after evictions, calls wider than the bound, repeated texts: every answer
    is the encoder's, and the cache holds what a plain LRU over the same calls holds."""
    enc, truth = CountingEncoder(), CountingEncoder()
    cache = TextEmbeddingCache("m", persist=False, max_rows=bound)
    lru: collections.OrderedDict[str, None] = collections.OrderedDict()
    for texts in calls:
        asked = len(enc.seen)
        out = cache.encode(texts, enc)
        if texts:
            assert torch.equal(out, truth(texts))
        for text in texts:  # the reference: touch what is cached, then add the rest
            if text in lru:
                lru.move_to_end(text)
        missing = [t for t in dict.fromkeys(texts) if t not in lru]
        assert enc.seen[asked:] == missing
        for text in missing:
            lru[text] = None
            while len(lru) > bound:
                lru.popitem(last=False)
        assert list(cache._rows) == [content_hash([t]) for t in lru]
    assert text_key("ab") == content_hash(["ab"])


def test_the_keys_of_recent_texts_are_remembered_not_hashed_again(monkeypatch):
    from georag.retrieval import text_cache

    hashed = []

    def counting(text: str) -> str:
        hashed.append(text)
        return text_key(text)

    remembered = functools.lru_cache(maxsize=2)(counting)
    monkeypatch.setattr(text_cache, "_remembered_key", remembered)
    cache = TextEmbeddingCache("m", persist=False)
    enc = lambda texts: torch.ones(len(texts), 2)  # noqa: E731
    cache.encode(["a", "b"], enc)
    cache.encode(["b", "a"], enc)
    assert hashed == ["a", "b"]
    cache.encode(["c", "a"], enc)  # "c" pushes out "b", the least recently used
    cache.encode(["b"], enc)
    assert hashed == ["a", "b", "c", "b"]
    assert list(cache._rows) == [text_key(t) for t in "abc"]
    assert pickle.loads(pickle.dumps(cache))._rows == cache._rows
