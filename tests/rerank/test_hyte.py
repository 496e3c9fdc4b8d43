"""HyTE-H hybrid scoring (eq. 10-12), its config, and the CandidateBatch reranker."""

from __future__ import annotations

import pytest
import torch

from georag.batch import CandidateBatch
from georag.geometry.hyperbolic import add_time, hybrid_scores, lorentz_inner
from georag.models.hyte import HyTEEncoder
from georag.rerank.base import PoolReranker
from georag.rerank.geometric.hyte import HyTEConfig, HyTEReranker


def _inputs(dtype, b=3, m=6, d=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    query = add_time(torch.randn(b, d, generator=gen, dtype=torch.float64) * 0.5).to(dtype)
    cands = add_time(torch.randn(b, m, d, generator=gen, dtype=torch.float64) * 0.5).to(dtype)
    bm25 = (torch.rand(b, m, generator=gen, dtype=torch.float64) * 10).to(dtype)
    return bm25, query, cands


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 0.7, 1.0])
def test_hybrid_scores_formula(dtype, alpha):
    bm25, query, cands = _inputs(dtype)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 4:] = False
    out = hybrid_scores(bm25, query, cands, mask, alpha=alpha)
    assert out.dtype == dtype
    for i in range(3):  # a plain per-query reference
        real = mask[i]
        lexical = bm25[i, real] / bm25[i, real].max()
        inner = torch.stack([lorentz_inner(c, query[i]) for c in cands[i, real]])
        ref = alpha * lexical + (1 - alpha) / (1 + torch.exp(-(inner + 2.0)))
        torch.testing.assert_close(out[i, real], ref)
        assert torch.isneginf(out[i, ~real]).all()


def test_alpha_extremes_give_pure_orders():
    bm25, query, cands = _inputs(torch.float64, seed=1)
    mask = torch.ones(3, 6, dtype=torch.bool)
    lexical = hybrid_scores(bm25, query, cands, mask, alpha=1.0)
    assert torch.equal(lexical.argsort(1), bm25.argsort(1))
    lorentz = hybrid_scores(bm25, query, cands, mask, alpha=0.0)
    inner = lorentz_inner(cands, query.unsqueeze(1))
    assert torch.equal(lorentz.argsort(1), inner.argsort(1))
    assert ((lorentz > 0) & (lorentz < 1)).all()


def test_queries_without_lexical_match_and_bad_shapes():
    bm25, query, cands = _inputs(torch.float32)
    bm25[0] = 0.0
    mask = torch.ones(3, 6, dtype=torch.bool)
    out = hybrid_scores(bm25, query, cands, mask, alpha=0.5)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[0], 0.5 * torch.sigmoid(lorentz_inner(cands[0], query[0]) + 2))
    with pytest.raises(ValueError, match="disagree"):
        hybrid_scores(bm25, query[:, :4], cands, mask, alpha=0.5)
    with pytest.raises(ValueError, match="must have shape"):
        hybrid_scores(bm25[:, :5], query, cands, mask, alpha=0.5)


def test_config_defaults_follow_the_paper():
    assert HyTEConfig().top_m == 50 and HyTEConfig().offset == 2.0 and HyTEConfig().k == 1.0
    with pytest.raises(ValueError, match="alpha must be in"):
        HyTEConfig(alpha=-0.1)
    with pytest.raises(ValueError, match="top_m"):
        HyTEConfig(top_m=0)


@pytest.fixture(scope="module")
def reranker() -> HyTEReranker:
    return HyTEReranker(HyTEConfig(alpha=0.4))


def test_reranker_on_a_candidate_batch(reranker):
    assert isinstance(reranker, PoolReranker) and reranker.name == "hyte_rescore"
    queries = ["dogs and cats", "tree embeddings"]
    cands = [
        ["cats are pets", "dogs bark", "stock markets", ""],
        ["hyperbolic trees", "taxonomies", "dogs", "pets"],
    ]
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    scores = torch.tensor([[3.0, 2.0, 0.5, 0.0], [1.0, 4.0, 0.1, 0.2]])
    batch = CandidateBatch(
        query=torch.zeros(2, 8),
        cands=torch.zeros(2, 4, 8),
        scores=scores.clone(),
        mask=mask,
        query_ids=["q1", "q2"],
        doc_ids=[["a", "b", "c", ""], ["d", "e", "f", "g"]],
        query_texts=queries,
        cand_texts=cands,
    )
    result = reranker(batch)
    enc: HyTEEncoder = reranker.encoder
    q = enc.encode(queries)
    for i in range(2):
        real = mask[i].nonzero().flatten().tolist()
        points = enc.encode([cands[i][j] for j in real])
        lexical = scores[i, real] / scores[i, real].max()
        ref = 0.4 * lexical + 0.6 * torch.sigmoid(lorentz_inner(points, q[i]) + 2.0)
        torch.testing.assert_close(result.scores[i, real], ref)
    assert torch.isneginf(result.scores[0, 3]) and torch.equal(result.keep, mask)
    assert torch.equal(batch.scores, scores)  # input untouched
    no_texts = CandidateBatch(
        query=batch.query,
        cands=batch.cands,
        scores=scores,
        mask=mask,
        query_ids=batch.query_ids,
        doc_ids=batch.doc_ids,
    )
    with pytest.raises(ValueError, match="needs query_texts and cand_texts"):
        reranker(no_texts)
    # top_m: only the best top_m candidates by first-stage score are rescored and kept
    top2 = HyTEReranker(HyTEConfig(alpha=0.4, top_m=2), encoder=enc)(batch)
    expect = torch.tensor([[True, True, False, False], [True, True, False, False]])
    assert torch.equal(top2.keep, expect)
    # the hybrid's lexical part is normalized over the kept ones: same order as the full run
    kept = top2.keep
    assert torch.allclose(top2.scores[kept], result.scores[kept])


def test_retriever_is_bm25_top_m_then_lorentz(tmp_path):
    """``hyte`` as the paper runs it: BM25 top-M over the corpus, then the hybrid score; the
    same ranking as the persistent Lorentz index searched directly."""
    from georag.batch import Corpus, QueryBatch
    from georag.rerank.registry import is_retriever, make_reranker
    from georag.retrieval.lorentz_index import LorentzIndex

    docs = {
        f"d{i}": text
        for i, text in enumerate(
            [
                "cats are small pets",
                "dogs bark at night",
                "stock markets fell",
                "hyperbolic trees",
                "taxonomies are trees",
                "pets need food",
                "night skies and stars",
                "markets and trade",
            ]
        )
    }
    corpus = Corpus(
        list(docs),
        [""] * len(docs),
        list(docs.values()),
        torch.zeros(len(docs), 4),
        cache_dir=str(tmp_path),
    )
    method = make_reranker("hyte", top_m=3)
    assert is_retriever(method) and method.name == "hyte"
    method.fit(corpus)
    queries = QueryBatch(["q0", "q1"], ["pets at night", "trees"], torch.zeros(2, 4))
    result = method.retrieve(queries, top_k=10)
    assert (result.keep.sum(1) <= 3).all() and result.scores.shape == (2, len(method.row_ids))
    index = LorentzIndex.load(next((tmp_path / "lorentz").iterdir()))
    scores, rows = index.search(queries.texts, k=3, top_m=3)
    got = result.scores.topk(3)
    finite = torch.isfinite(scores)
    assert torch.equal(got.indices[finite], rows[finite])
    torch.testing.assert_close(got.values[finite], scores[finite])
    again = make_reranker("hyte", top_m=3).fit(corpus)  # loads the cached index
    assert torch.equal(again.retrieve(queries, top_k=10).scores, result.scores)


def test_document_points_are_cached_and_dropped_when_weights_change(reranker):
    texts = ["hyperbolic trees", "taxonomies", "hyperbolic trees"]
    reranker.clear_points()
    fresh = reranker.encoder.encode(texts)
    first = reranker.document_points(texts)
    torch.testing.assert_close(first, fresh, rtol=0, atol=0)
    assert len(reranker._points) == 2  # one entry per distinct text
    calls = []
    encode = reranker.encoder.encode
    reranker.encoder.encode = lambda t: calls.append(list(t)) or encode(t)
    try:
        torch.testing.assert_close(reranker.document_points(texts[::-1]), first.flip(0))
        assert calls == []  # all seen: nothing encoded
        reranker.document_points(["dogs", "taxonomies"])
        assert calls == [["dogs"]]  # only the new text
        with torch.no_grad():
            reranker.encoder.projection.w2.weight.mul_(2.0)  # in-place update: new state
        try:
            moved = reranker.document_points(texts[:1])
            assert calls[-1] == texts[:1]
            torch.testing.assert_close(moved, encode(texts[:1]))
            assert not torch.allclose(moved, first[:1])
        finally:
            with torch.no_grad():
                reranker.encoder.projection.w2.weight.div_(2.0)
    finally:
        reranker.encoder.encode = encode
    reranker.clear_points()


def test_retriever_skips_empty_documents(tmp_path):
    """cranfield holds empty documents: they have no BM25 term, so they are not indexed
    (they were a crash); a corpus of only empty documents is a one-line error."""
    from georag.batch import Corpus, QueryBatch
    from georag.rerank.registry import make_reranker

    texts = ["cats are small pets", "", "dogs bark at night", "   "]
    corpus = Corpus([f"d{i}" for i in range(4)], [""] * 4, texts, torch.zeros(4, 4))
    method = make_reranker("hyte").fit(corpus)
    assert sorted(set(method.row_ids)) == ["d0", "d2"]
    result = method.retrieve(QueryBatch(["q"], ["pets"], torch.zeros(1, 4)), top_k=5)
    assert result.keep.any()
    empty = Corpus(["a", "b"], ["", ""], ["", " "], torch.zeros(2, 4))
    with pytest.raises(ValueError, match="corpus: every document is empty"):
        make_reranker("hyte").fit(empty)
