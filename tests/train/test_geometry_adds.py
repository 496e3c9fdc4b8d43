"""The geometry-adds protocol: pool tensors, features, heads at zero, one fold end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from georag.batch import CandidateBatch
from georag.rerank.adapter import AdapterConfig, LearnedAdapter
from georag.rerank.residual_heads import (
    FeatureHead,
    FeatureHeadConfig,
    GraphSmoothing,
    GraphSmoothingConfig,
)
from train.geometry_adds import (
    GEO_FEATURES,
    NON_GEOMETRIC,
    Settings,
    Stack,
    _stack_from,
    pool_data,
    predict,
    run_fold,
    seen_queries,
)
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


def _features(data, seed=0):
    g = torch.Generator().manual_seed(seed)
    names = ("bm25", "prior", "rank", "raw_cosine", *GEO_FEATURES)
    data.features = {n: torch.randn(data.mask.shape, generator=g) for n in names}
    return data


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


def test_one_fold_gives_every_row():
    fit, report = _pool(2, 40, "t"), _pool(3, 10, "r")
    fit_data, report_data = _features(pool_data(fit)), _features(pool_data(report), 1)
    settings = Settings(epochs=1, patience=1, batch_size=16, drop_heads=False)
    out = run_fold(fit_data, report_data, settings, log=lambda text: None)
    assert set(NON_GEOMETRIC) <= set(out["scores"])
    assert {"map + smoothing", "map+bm25 + geo head", "ltr+geo"} <= set(out["scores"])
    assert all(s.shape == report.batch.mask.shape for s in out["scores"].values())
    assert all(torch.isfinite(s[report.batch.mask]).all() for s in out["scores"].values())
    assert out["notes"]["map"]["side"] in ("both", "query")


def test_seen_queries():
    fit, report = _pool(4, 5, "t"), _pool(5, 5, "r")
    known = {d for judged in fit.qrels.values() for d in judged}
    want = {q for q, judged in report.qrels.items() if set(judged) & known}
    assert seen_queries(report, fit) == want
