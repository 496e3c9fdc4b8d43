import math

import pytest
import torch

from georag.retrieval.bm25 import BM25Index

DOCS = [
    "the cat sat on the mat",
    "dogs chase cats and cats run",
    "stock market crash",
    "a yoga mat and a cat mat",
]


def lucene_bm25(query: list[str], docs: list[list[str]], k1=1.2, b=0.75) -> list[float]:
    """Lucene (>= 8) BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), no (k1 + 1) factor."""
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    scores = []
    for doc in docs:
        total = 0.0
        for term in set(query):
            df = sum(term in d for d in docs)
            if df == 0:
                continue
            tf = doc.count(term)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            total += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(total)
    return scores


def test_scores_match_textbook_formula():
    index = BM25Index.build(DOCS, tokenizer="whitespace")
    scores, indices = index.search(["cat mat"], 4)
    expected = lucene_bm25(["cat", "mat"], [d.split() for d in DOCS])
    got = [0.0] * 4
    for s, j in zip(scores[0].tolist(), indices[0].tolist()):
        got[j] = s
    assert got == pytest.approx(expected, rel=1e-5)
    assert indices[0, 0].item() == 3


def test_unknown_tokens_score_zero_and_save_load(tmp_path):
    index = BM25Index.build(DOCS)
    scores, _ = index.search(["zzzz qqqq", ""], 2)
    assert torch.all(scores == 0)
    index.save(tmp_path / "bm25")
    index.save(tmp_path / "bm25")  # replacing an existing index works
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded.num_docs == 4
    for q in (["cat mat"], ["market"]):
        assert torch.equal(loaded.search(q, 3)[1], index.search(q, 3)[1])


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Index.build([])
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        BM25Index.build(DOCS, tokenizer="nope")
    with pytest.raises(ValueError, match="not a georag-bm25 folder"):
        BM25Index.load(tmp_path)


def test_scores_of_every_document_equal_the_searched_ones():
    texts = ["the cat sat on the mat", "a dog barked at the cat", "birds sing", "mat and rug"]
    index = BM25Index.build(texts)
    queries = ["cat on a mat", "zebra", "rug birds"]
    full = index.scores(queries)
    top, rows = index.search(queries, 4)
    assert full.shape == (3, 4) and not full[1].any()
    torch.testing.assert_close(full.gather(1, rows), top)
