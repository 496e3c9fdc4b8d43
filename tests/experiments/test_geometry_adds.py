"""The geometry-adds protocol: pool tensors, features, heads at zero, the phrase-graph PPR
(PhrasePPR's mass at the pool, its residual at zero), one fold end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import georag.experiments.geometry_adds as geometry_adds
from georag.batch import CandidateBatch, Corpus, QueryBatch
from georag.experiments.adds_features import (
    GEO_FEATURES,
    PhraseCorpus,
    add_features,
    pool_data,
    seen_queries,
)
from georag.experiments.geometry_adds import (
    NON_GEOMETRIC,
    Settings,
    Stack,
    _stack_from,
    predict,
    run_fold,
)
from georag.rerank.baselines.adapter import AdapterConfig, LearnedAdapter
from georag.rerank.heads.residual_heads import (
    FeatureHead,
    FeatureHeadConfig,
    GraphSmoothing,
    GraphSmoothingConfig,
)
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.phrase_graph import build_phrase_graph
from georag.retrievers.phrase_ppr import PhrasePPR, PhrasePPRConfig
from train.pools import Pool


def _pool(seed: int, queries: int, prefix: str) -> Pool:
    """Queries over one table of 60 documents (a document has one embedding everywhere)."""
    rng = np.random.default_rng(seed)
    table = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(60, 8))).float(), dim=1)
    picks = torch.from_numpy(np.stack([rng.choice(60, 24, replace=False) for _ in range(queries)]))
    cands = table[picks]
    query = torch.nn.functional.normalize(
        cands[:, :3].mean(1) + 0.3 * torch.randn(queries, 8), dim=1
    )
    mask = torch.ones(queries, 24, dtype=torch.bool)
    mask[0, 18:] = False
    scores = torch.where(mask, torch.einsum("bmd,bd->bm", cands, query), 0.0)
    docs = [[f"d{int(i)}" if keep else "" for i, keep in zip(r, k)] for r, k in zip(picks, mask)]
    ids = [f"{prefix}{i}" for i in range(queries)]
    batch = CandidateBatch(query, cands, scores, mask, ids, docs)
    qrels = {q: {row[int(rng.integers(5))]: 1} for q, row in zip(ids, docs, strict=True)}
    return Pool.from_batch(batch, qrels)


WORDS = [f"w{i}" for i in range(40)]


def _texts(rng, count: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, 6)) for _ in range(count)]


def _features(data, seed=0):
    """Random features, and the phrase graph of 60 random documents ``d0``..``d59``."""
    g = torch.Generator().manual_seed(seed)
    names = ("bm25", "prior", "rank", "raw_cosine", *GEO_FEATURES)
    data.features = {n: torch.randn(data.mask.shape, generator=g) for n in names}
    rng = np.random.default_rng(seed)
    graph = build_phrase_graph([f"d{i}" for i in range(60)], [""] * 60, _texts(rng, 60))
    data.phrases = PhraseCorpus.of(graph)
    data.corpus_rows = torch.tensor(
        [[int(d[1:]) if d else -1 for d in row] for row in data.pool.batch.doc_ids]
    )
    data.texts = _texts(rng, data.pool.batch.batch_size)
    return data


@pytest.mark.parametrize("top_m", [30, 12])
def test_phrase_ppr_feature_is_phrase_pprs_mass_at_the_pool(top_m):
    """The feature equals PhrasePPR's (raw-cosine seeds) at the pool's documents, over the
    pool's largest (the whole corpus as the pool: PhrasePPR's feature itself)."""
    rng = np.random.default_rng(7)
    n, b = 30, 5
    ids, texts = [f"d{i}" for i in range(n)], _texts(rng, n)
    emb = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(n, 8))).float(), dim=1)
    query = torch.nn.functional.normalize(emb[:b] + 0.5 * torch.randn(b, 8), dim=1)
    queries = QueryBatch([f"q{i}" for i in range(b)], _texts(rng, b), query)
    scorer = PhrasePPR(PhrasePPRConfig()).fit(Corpus(ids, [""] * n, texts, emb))
    raw = scorer.base_scores(queries)
    want = scorer.feature(queries, raw)
    top = raw.topk(top_m, dim=1).indices
    batch = CandidateBatch(
        query,
        emb[top],
        raw.gather(1, top),
        torch.ones(b, top_m, dtype=torch.bool),
        queries.ids,
        [[ids[i] for i in row] for row in top.tolist()],
    )
    pool = Pool.from_batch(batch, {q: {row[0]: 1} for q, row in zip(queries.ids, batch.doc_ids)})
    data = pool_data(pool)
    add_features(
        data,
        bm25=BM25Index.build(texts),
        phrases=PhraseCorpus.of(scorer.graph),
        corpus_rows={d: i for i, d in enumerate(ids)},
        query_texts=dict(zip(queries.ids, queries.texts)),
        fit=pool,
    )
    at = want.gather(1, top)
    torch.testing.assert_close(data.features["phrase_ppr"], at / at.amax(dim=1, keepdim=True))
    assert (want.gather(1, top) > 0).any()


def test_pool_data_holds_each_document_once():
    pool = _pool(0, 6, "q")
    data = pool_data(pool)
    mask = pool.batch.mask
    torch.testing.assert_close(data.table[data.index][mask], pool.batch.cands[mask])
    assert data.table.shape[0] == len({d for row in pool.batch.doc_ids for d in row if d})


@pytest.mark.parametrize("features", [(), ("bm25",)])
def test_untrained_heads_in_the_stack_equal_the_baseline(features):
    data = _features(pool_data(_pool(1, 6, "q")))
    base = Stack(LearnedAdapter(AdapterConfig(dim=8, features=features)))
    with torch.no_grad():
        base.adapter.embed.weight.add_(0.2 * torch.randn(8, 8))
        base.adapter.feature_weights.fill_(0.3)
    want = predict(base, data)
    heads = [
        GraphSmoothing(GraphSmoothingConfig(k=5)),
        FeatureHead(FeatureHeadConfig(features=GEO_FEATURES)),
    ]
    for head in heads:
        got = predict(_stack_from(base, head), data)
        assert (got - want)[data.mask].abs().max() <= 1e-6


def _fold():
    fit, report = _pool(2, 40, "t"), _pool(3, 10, "r")
    return _features(pool_data(fit)), _features(pool_data(report), 1)


def test_one_fold_gives_every_row():
    fit_data, report_data = _fold()
    report = report_data.pool
    settings = Settings(epochs=1, patience=1, batch_size=16, drop_heads=False)
    out = run_fold(fit_data, report_data, settings, log=lambda text: None)
    assert set(NON_GEOMETRIC) <= set(out["scores"])
    assert {"map + smoothing", "map+bm25 + geo head", "ltr+geo"} <= set(out["scores"])
    assert {"map+bm25 + phrase-PPR", "ltr+geo - phrase_ppr"} <= set(out["scores"])
    assert out["notes"]["map+bm25 + phrase-PPR"]["passage_weight"] in (0.05, 0.3, 1.0)
    assert all(s.shape == report.batch.mask.shape for s in out["scores"].values())
    assert all(torch.isfinite(s[report.batch.mask]).all() for s in out["scores"].values())
    assert out["notes"]["map"]["side"] in ("both", "query")


def test_seen_queries():
    fit, report = _pool(4, 5, "t"), _pool(5, 5, "r")
    known = {d for judged in fit.qrels.values() for d in judged}
    want = {q for q, judged in report.qrels.items() if set(judged) & known}
    assert seen_queries(report, fit) == want


def test_phrase_ppr_row_at_weight_zero_is_map_bm25(monkeypatch):
    monkeypatch.setattr(geometry_adds, "PPR_WEIGHTS", (0.0,))
    fit_data, report_data = _fold()
    settings = Settings(epochs=1, patience=1, batch_size=16, drop_heads=False)
    out = run_fold(fit_data, report_data, settings, log=lambda text: None)["scores"]
    mask = report_data.mask
    assert (out["map+bm25 + phrase-PPR"] - out["map+bm25"])[mask].abs().max() <= 1e-6
