"""The non-graph bars: BM25 and dense + BM25 fusion over the whole corpus."""

from __future__ import annotations

import pytest
import torch

from georag.rerank.registry import make_reranker
from georag.retrieval.bm25 import BM25Index
from georag.retrievers.lexical import minmax, rrf_scores
from tests.retrievers import entity_cases as cases


def test_rrf_sums_reciprocal_ranks():
    a = torch.tensor([[3.0, 2.0, 1.0]])
    b = torch.tensor([[1.0, 3.0, 2.0]])
    expected = torch.tensor([[1 / 61 + 1 / 63, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62]])
    torch.testing.assert_close(rrf_scores(a, b, k=60), expected)


def test_minmax_maps_rows_to_the_unit_interval():
    out = minmax(torch.tensor([[2.0, 4.0, 3.0], [1.0, 1.0, 1.0]]))
    torch.testing.assert_close(out, torch.tensor([[0.0, 1.0, 0.5], [0.0, 0.0, 0.0]]))


def test_bm25_scores_are_the_indexs():
    c = cases.corpus()
    q = cases.queries()
    scores = make_reranker("bm25").fit(c).scores(q)
    texts = [f"{t} {x}" for t, x in zip(c.titles, c.texts)]
    found, rows = BM25Index.build(texts).search(list(q.texts), 7)
    torch.testing.assert_close(scores.gather(1, rows), found)


@pytest.mark.parametrize("fusion", ["rrf", "linear"])
def test_hybrid_scores_every_row(fusion):
    c = cases.corpus()
    result = make_reranker("hybrid", fusion=fusion).fit(c).retrieve(cases.queries(), top_k=2)
    assert result.scores.shape == (3, 7) and (result.keep.sum(dim=1) == 2).all()


def test_bad_options_name_the_field():
    with pytest.raises(ValueError, match="fusion"):
        make_reranker("hybrid", fusion="max")
    with pytest.raises(ValueError, match="alpha"):
        make_reranker("hybrid", alpha=2.0)
