"""Maniscope against a straightforward per-query networkx reference of the paper's method."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.batch import CandidateBatch
from georag.eval.references import networkx_maniscope
from georag.eval.synthetic import random_batch, top_pool
from georag.rerank.geometric.maniscope import Maniscope, ManiscopeConfig


def make_batch(rng, b, m, d, **options):
    return random_batch(rng, b, m, d, **options)


def reference(batch: CandidateBatch, cfg: ManiscopeConfig) -> list[dict[int, float]]:
    """Seed 001 per query: k-NN graph in networkx, Dijkstra from the top-1 candidate."""
    out = []
    for b in range(batch.batch_size):
        pool, emb = top_pool(batch, b, cfg.top_m)
        scores = networkx_maniscope(batch.query[b].numpy(), emb, k=cfg.k, alpha=cfg.alpha)
        out.append({int(pool[i]): float(s) for i, s in enumerate(scores)})
    return out


def assert_same_ranking(result, batch, refs, atol):
    for b, ref in enumerate(refs):
        kept = torch.nonzero(result.keep[b]).flatten().tolist()
        assert sorted(kept) == sorted(ref)
        ours = sorted(kept, key=lambda i: -float(result.scores[b, i]))
        theirs = sorted(ref, key=lambda i: -ref[i])
        assert ours == theirs
        got = result.scores[b, theirs].double().numpy()
        np.testing.assert_allclose(got, [ref[i] for i in theirs], rtol=0, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_networkx(dtype):
    rng = np.random.default_rng(0)
    batch = make_batch(rng, 8, 100, 16, dtype=dtype, padded=[(1, 40), (2, 7)])
    cfg = ManiscopeConfig()
    result = Maniscope(cfg)(batch)
    refs = reference(batch, cfg)
    if dtype == torch.float64:
        assert_same_ranking(result, batch, refs, atol=1e-12)
    else:
        for b, ref in enumerate(refs):
            got = result.scores[b, list(ref)].double().numpy()
            np.testing.assert_allclose(got, list(ref.values()), rtol=0, atol=1e-5)


def test_top_m_restricts_the_pool():
    rng = np.random.default_rng(1)
    batch = make_batch(rng, 4, 60, 8)
    cfg = ManiscopeConfig(k=3, alpha=0.3, top_m=20)
    result = Maniscope(cfg)(batch)
    assert (result.keep.sum(1) == 20).all()
    assert_same_ranking(result, batch, reference(batch, cfg), atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(2, 30),
    k=st.integers(1, 6),
    alpha=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_hypothesis_against_networkx(m, k, alpha, seed):
    rng = np.random.default_rng(seed)
    k = min(k, m - 1)
    batch = make_batch(rng, 3, m, 5, padded=[(2, max(1, m // 2))])
    cfg = ManiscopeConfig(k=k, alpha=alpha)
    result = Maniscope(cfg)(batch)
    for b, ref in enumerate(reference(batch, cfg)):
        got = result.scores[b, list(ref)].numpy()
        np.testing.assert_allclose(got, list(ref.values()), rtol=0, atol=1e-12)


def test_defaults():
    cfg = ManiscopeConfig()
    assert (cfg.k, cfg.alpha, cfg.top_m, cfg.mutual) == (5, 0.5, 100, False)


def test_edge_cases():
    rng = np.random.default_rng(2)
    batch = make_batch(rng, 4, 8, 5, padded=[(0, 1), (1, 0), (2, 4)])
    result = Maniscope(ManiscopeConfig(k=5))(batch)
    assert result.keep.sum(1).tolist() == [1, 0, 4, 8]
    # A lone candidate has no neighbours: it is its own anchor, d = 0, sim_geo = 1.
    q, c = batch.query[0], batch.cands[0, 0]
    cos = float(q @ c / q.norm() / c.norm())
    assert result.scores[0, 0].item() == pytest.approx(0.5 * cos + 0.5, abs=1e-12)
    assert torch.isinf(result.scores[1]).all()
    # 4 real candidates <= k: complete graph on them.
    ref = reference(batch, ManiscopeConfig(k=3))[2]
    np.testing.assert_allclose(result.scores[2, list(ref)].numpy(), list(ref.values()), atol=1e-12)


def test_unreachable_candidates_score_zero_geodesic():
    # Two far-apart clusters: no k-NN edge joins them, the anchor cannot reach the other.
    rng = np.random.default_rng(3)
    a = np.array([1.0, 0.0, 0.0]) + 0.01 * rng.normal(size=(4, 3))
    b = np.array([0.0, 0.0, 1.0]) + 0.01 * rng.normal(size=(4, 3))
    cands = torch.tensor(np.concatenate([a, b]))[None]
    query = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    batch = CandidateBatch(
        query=query,
        cands=cands,
        scores=(cands @ query.T).squeeze(2),
        mask=torch.ones(1, 8, dtype=torch.bool),
        query_ids=["q"],
        doc_ids=[[str(i) for i in range(8)]],
    )
    result = Maniscope(ManiscopeConfig(k=2, alpha=0.0))(batch)
    assert (result.scores[0, 4:] == 0).all() and (result.scores[0, :4] > 0.9).all()


def test_bad_input():
    rng = np.random.default_rng(4)
    batch = make_batch(rng, 2, 5, 4)
    with pytest.raises(ValueError, match=r"k=5 needs at least k \+ 1 = 6 candidate slots, got M=5"):
        Maniscope()(batch)
    single = batch.slice(0, 2)
    single = CandidateBatch(
        query=single.query,
        cands=single.cands[:, :1],
        scores=single.scores[:, :1],
        mask=single.mask[:, :1],
        query_ids=single.query_ids,
        doc_ids=[row[:1] for row in single.doc_ids],
    )
    with pytest.raises(ValueError, match=r"M >= 2"):
        Maniscope(ManiscopeConfig(k=1))(single)
    with pytest.raises(ValueError, match="k must be positive"):
        ManiscopeConfig(k=0)
    with pytest.raises(ValueError, match="alpha"):
        ManiscopeConfig(alpha=2.0)
    cands = batch.cands.clone()
    cands[1, 3] = 0.0
    zero = CandidateBatch(**{**batch.__dict__, "cands": cands})
    with pytest.raises(ValueError, match="zero vectors"):
        Maniscope(ManiscopeConfig(k=2))(zero)


def test_deterministic_and_pure():
    rng = np.random.default_rng(5)
    batch = make_batch(rng, 5, 100, 16, dtype=torch.float32)
    before = batch.cands.clone()
    first, second = Maniscope()(batch), Maniscope()(batch)
    assert torch.equal(first.scores, second.scores) and torch.equal(first.keep, second.keep)
    assert torch.equal(before, batch.cands)
