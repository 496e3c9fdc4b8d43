"""DiffusionReranker against a per-query networkx reference of the Diffusion-aided RAG method."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from georag.batch import CandidateBatch
from georag.eval.references import networkx_diffusion
from georag.eval.synthetic import random_batch, top_pool
from georag.rerank.geometric.diffusion import DiffusionConfig, DiffusionReranker


def make_batch(rng, b, m, d, **options):
    return random_batch(rng, b, m, d, unit=True, shuffle=True, **options)


def reference(batch: CandidateBatch, cfg: DiffusionConfig) -> list[dict[int, float]]:
    """Seed 002 per query with networkx: complete graph, pagerank, top-K."""
    out = []
    for b in range(batch.batch_size):
        pool, emb = top_pool(batch, b, cfg.top_m)
        ranks = networkx_diffusion(
            emb, batch.scores[b].numpy()[pool], damping=cfg.damping, top_k=cfg.top_k
        )
        out.append({int(pool[i]): r for i, r in ranks.items()})
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("top_m,top_k", [(50, 20), (10, 4)])
def test_matches_networkx(dtype, top_m, top_k):
    rng = np.random.default_rng(0)
    batch = make_batch(rng, 6, 60, 12, dtype=dtype, padded=[(1, 30), (2, 8)])
    cfg = DiffusionConfig(top_m=top_m, top_k=top_k)
    result = DiffusionReranker(cfg)(batch)
    assert result.scores.dtype == dtype
    for b, ref in enumerate(reference(batch, cfg)):
        kept = torch.nonzero(result.keep[b]).flatten().tolist()
        assert sorted(kept) == sorted(ref)
        got = result.scores[b, list(ref)].double().numpy()
        np.testing.assert_allclose(got, list(ref.values()), rtol=0, atol=1e-6)
        assert torch.isinf(result.scores[b, ~result.keep[b]]).all()


def test_defaults_and_negative_scores():
    cfg = DiffusionConfig()
    assert (cfg.top_m, cfg.top_k, cfg.damping) == (50, 20, 0.85)
    rng = np.random.default_rng(1)
    batch = make_batch(rng, 3, 70, 8)
    shifted = CandidateBatch(**{**batch.__dict__, "scores": batch.scores - 5.0})
    result = DiffusionReranker()(shifted)
    assert (result.keep.sum(1) == 20).all()
    for b, ref in enumerate(reference(shifted, cfg)):
        np.testing.assert_allclose(
            result.scores[b, list(ref)].numpy(), list(ref.values()), rtol=0, atol=1e-9
        )


def test_edge_cases():
    rng = np.random.default_rng(2)
    batch = make_batch(rng, 4, 6, 5, padded=[(1, 1), (2, 0)])
    # Equal non-positive scores leave the shifted personalization all zero: uniform.
    scores = batch.scores.clone()
    scores[3] = -1.0
    batch = CandidateBatch(**{**batch.__dict__, "scores": scores})
    result = DiffusionReranker(DiffusionConfig(top_k=3))(batch)
    assert result.keep.sum(1).tolist() == [3, 1, 0, 3]
    one = result.scores[1, batch.mask[1]]
    assert torch.allclose(one, torch.ones(1, dtype=one.dtype))
    assert torch.isinf(result.scores[2]).all()
    ref = reference(batch, DiffusionConfig(top_k=3))[3]
    np.testing.assert_allclose(result.scores[3, list(ref)].numpy(), list(ref.values()), atol=1e-9)
    with pytest.raises(ValueError, match="top_k"):
        DiffusionConfig(top_k=0)
    with pytest.raises(ValueError, match="damping"):
        DiffusionConfig(damping=-0.1)
    cands = batch.cands.clone()
    cands[0, 0] = 0.0
    zero = CandidateBatch(**{**batch.__dict__, "cands": cands})
    with pytest.raises(ValueError, match="zero vectors"):
        DiffusionReranker()(zero)


def test_deterministic_and_pure():
    rng = np.random.default_rng(3)
    batch = make_batch(rng, 5, 50, 16, dtype=torch.float32)
    before = batch.cands.clone(), batch.scores.clone()
    first, second = DiffusionReranker()(batch), DiffusionReranker()(batch)
    assert torch.equal(first.scores, second.scores) and torch.equal(first.keep, second.keep)
    assert torch.equal(before[0], batch.cands) and torch.equal(before[1], batch.scores)
