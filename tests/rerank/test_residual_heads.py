"""Residual heads and the non-geometric baselines: zero at start, gradients, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.eval.synthetic import random_batch
from georag.rerank.baselines.adapter import (
    AdapterConfig,
    LearnedAdapter,
    adapter_scores,
    mapped_cosine,
)
from georag.rerank.baselines.doc_prior import relevant_elsewhere
from georag.rerank.baselines.rocchio import rocchio_scores
from georag.rerank.heads.residual_heads import (
    FeatureHead,
    FeatureHeadConfig,
    GraphSmoothing,
    GraphSmoothingConfig,
    feature_scores,
    smoothing_scores,
)
from georag.rerank.registry import make_method

FEATURES = ("f0", "f1", "f2")


def _batch(dtype=torch.float64, seed=0):
    return random_batch(
        np.random.default_rng(seed), 4, 25, 8, dtype=dtype, padded=[(1, 15), (3, 2)], unit=True
    )


def _features(batch, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        n: torch.randn(batch.mask.shape, generator=g, dtype=batch.scores.dtype)
        for n in (*FEATURES, "bm25")
    }


def _trained_adapter(features, side, dtype):
    """An adapter away from its start (a stand-in for a trained baseline)."""
    adapter = LearnedAdapter(AdapterConfig(side=side, features=features, dim=8)).to(dtype)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        adapter.embed.weight.add_(0.3 * torch.randn(8, 8, generator=g, dtype=dtype))
        adapter.feature_weights.copy_(torch.linspace(0.2, 0.5, len(features), dtype=dtype))
    return adapter


def _ltr_scores(batch, feats):
    pytest.importorskip("lightgbm")
    from georag.rerank.baselines.ltr import LambdaRank, LambdaRankConfig

    names = ("f0", "f1")
    model = LambdaRank(LambdaRankConfig(features=names, rounds=5, min_data_in_leaf=2))
    x = torch.stack([feats[n] for n in names], -1)
    gains = (feats["f0"] > 0.5).float()
    model.fit(x, batch.mask, gains)
    return model(batch, feats).scores


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("base", ["map", "map_query", "map+bm25", "ltr"])
@pytest.mark.parametrize("head", ["smoothing", "features"])
def test_untrained_head_is_its_baseline(dtype, base, head):
    batch = _batch(dtype)
    feats = _features(batch)
    mask = batch.mask
    if base == "ltr":
        scores, cands = _ltr_scores(batch, feats).to(dtype), batch.cands
    else:
        features = ("bm25",) if base == "map+bm25" else ()
        side = "query" if base == "map_query" else "both"
        adapter = _trained_adapter(features, side, dtype)
        with torch.no_grad():
            scores = adapter.score(batch, feats)[0]
            cands = adapter.map_docs(batch.cands)
    if head == "smoothing":
        module = GraphSmoothing(GraphSmoothingConfig(k=4)).to(dtype)
        with torch.no_grad():
            got = module.residual(scores, cands, mask)
    else:
        module = FeatureHead(FeatureHeadConfig(features=FEATURES)).to(dtype)
        with torch.no_grad():
            got = module.residual(scores, mask, feats)
    assert (got - scores)[mask].abs().max() <= 1e-6


def test_untrained_adapter_is_the_cosine():
    batch = _batch()
    adapter = LearnedAdapter(AdapterConfig(features=("bm25",), dim=8)).double()
    got = adapter.score(batch, _features(batch))[0]
    torch.testing.assert_close(got[batch.mask], batch.scores[batch.mask], atol=1e-12, rtol=0)


def test_rocchio_at_alpha_zero_is_the_cosine():
    batch = _batch()
    got = rocchio_scores(batch.query, batch.cands, batch.mask, batch.scores, 0.0, 5)
    want = mapped_cosine(batch.query, batch.cands, batch.mask)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_rocchio_moves_towards_the_feedback():
    batch = _batch()
    near = rocchio_scores(batch.query, batch.cands, batch.mask, batch.scores, 1.0, 1)
    top = batch.scores.masked_fill(~batch.mask, -torch.inf).argmax(1)
    gain = (near - batch.scores).gather(1, top[:, None])
    assert (gain > 0).all()  # the feedback document gets closer to the moved query


def _check(fn, *inputs):
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)


def test_smoothing_gradients():
    batch = _batch()
    mask = batch.mask
    beta = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    temp = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    scores = batch.scores.clone().requires_grad_()
    cands = batch.cands.clone().requires_grad_()
    _check(lambda s, c, b, t: smoothing_scores(s, c, mask, b, t, 4), scores, cands, beta, temp)


def test_feature_head_and_adapter_gradients():
    batch = _batch()
    mask = batch.mask
    feats = torch.stack(list(_features(batch).values()), -1).requires_grad_()
    w = torch.tensor([0.3, -0.2, 0.1, 0.5], dtype=torch.float64, requires_grad=True)
    scores = batch.scores.clone().requires_grad_()
    _check(lambda s, f, w: feature_scores(s, f, mask, w), scores, feats, w)
    query = batch.query.clone().requires_grad_()
    cands = batch.cands.clone().requires_grad_()
    _check(lambda q, c, f, w: adapter_scores(q, c, mask, f, w), query, cands, feats, w)
    alpha = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    _check(lambda q, c, a: rocchio_scores(q, c, mask, batch.scores, a, 3), query, cands, alpha)


def test_smoothing_is_a_weighted_neighbour_average():
    batch = _batch()
    got = smoothing_scores(batch.scores, batch.cands, batch.mask, 1.0, 1e-4, 1)
    unit = torch.nn.functional.normalize(batch.cands, dim=2)
    for b in range(batch.batch_size):
        real = batch.mask[b].nonzero().squeeze(1)
        gram = unit[b, real] @ unit[b, real].T
        gram.fill_diagonal_(-torch.inf)
        want = batch.scores[b, real][gram.argmax(1)]  # k = 1, temperature -> 0: the nearest
        torch.testing.assert_close(got[b, real], want, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "method,options",
    [
        ("feature_head", {"features": ("ppr",)}),
        ("learned_adapter", {"features": ("bm25",), "dim": 8}),
        ("prior", {}),
        ("ltr", {"features": ("bm25",)}),
    ],
)
def test_a_missing_feature_is_one_line_naming_it(method, options):
    batch = _batch(torch.float32)
    method_ = make_method(method, options)
    call = method_.score if hasattr(method_, "score") else method_
    with pytest.raises(ValueError, match=r"^features: .* needs") as error:
        call(batch)
    assert "\n" not in str(error.value)


def test_prior_leaves_a_query_own_labels_out():
    qrels = {"a": {"d1": 1, "d2": 0}, "b": {"d1": 2, "d3": 1}}
    got = relevant_elsewhere(["a", "b", "c"], [["d1", "d3"], ["d1", "d3"], ["d2", ""]], qrels)
    assert got.tolist() == [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 3),
    m=st.integers(2, 8),
    k=st.integers(1, 6),
    beta=st.floats(0.0, 1.0),
    temperature=st.floats(1e-3, 10.0),
    seed=st.integers(0, 2**16),
    duplicate=st.booleans(),
)
def test_smoothing_stays_a_convex_mix_of_real_scores(b, m, k, beta, temperature, seed, duplicate):
    g = torch.Generator().manual_seed(seed)
    cands = torch.randn(b, m, 4, generator=g, dtype=torch.float64)
    if duplicate:  # identical embeddings: every similarity ties
        cands = cands[:, :1].expand(-1, m, -1).clone()
    scores = torch.randn(b, m, generator=g, dtype=torch.float64)
    mask = torch.rand(b, m, generator=g) < 0.8
    got = smoothing_scores(scores, cands, mask, beta, temperature, k)
    assert torch.isfinite(got[mask]).all()
    low = scores.masked_fill(~mask, torch.inf).min(1, keepdim=True).values
    high = scores.masked_fill(~mask, -torch.inf).max(1, keepdim=True).values
    assert ((got >= low - 1e-12) & (got <= high + 1e-12))[mask].all()
    zero = smoothing_scores(scores, cands, mask, 0.0, temperature, k)
    assert torch.equal(zero[mask], scores[mask])


def test_lambdarank_learns_a_separating_feature():
    pytest.importorskip("lightgbm")
    from georag.rerank.baselines.ltr import LambdaRank, LambdaRankConfig

    g = torch.Generator().manual_seed(0)
    mask = torch.ones(40, 20, dtype=torch.bool)
    gains = (torch.rand(40, 20, generator=g) < 0.2).float()
    x = torch.stack([gains + 0.3 * torch.randn(40, 20, generator=g), torch.randn(40, 20)], -1)
    model = LambdaRank(LambdaRankConfig(features=("signal", "noise"), rounds=30)).fit(
        x, mask, gains
    )
    scores = model.predict(x, mask)
    top = scores.argmax(1)
    assert gains.gather(1, top[:, None]).mean() > 0.9  # the top candidate is relevant
    with pytest.raises(ValueError, match=r"^features: expected shape"):
        model.predict(x[..., :1], mask)


def test_lambdarank_repeats_bit_for_bit_on_identical_inputs():
    """deterministic=True, one thread: two fits on equal copies of the same inputs (early
    stopping on held-out queries) stop at the same round and score identically."""
    pytest.importorskip("lightgbm")
    from georag.rerank.baselines.ltr import LambdaRank, LambdaRankConfig

    g = torch.Generator().manual_seed(1)
    mask = torch.rand(60, 30, generator=g) < 0.9
    gains = (torch.rand(60, 30, generator=g) < 0.2).float() * mask
    x = torch.stack([gains + torch.randn(60, 30, generator=g), torch.randn(60, 30)], -1)
    config = LambdaRankConfig(features=("signal", "noise"), rounds=200, early_stopping=10)

    def fit(x):
        val = (x[40:], mask[40:], gains[40:])
        return LambdaRank(config).fit(x[:40], mask[:40], gains[:40], val=val)

    first, second = fit(x), fit(x.clone())
    assert 0 < first.booster.best_iteration < 200  # early stopping chose the round
    assert first.booster.best_iteration == second.booster.best_iteration
    assert torch.equal(first.predict(x, mask), second.predict(x, mask))


def test_rank_feature():
    from georag.rerank.baselines.ltr import rank_feature

    scores = torch.tensor([[0.1, 0.9, 0.5, 7.0]])
    mask = torch.tensor([[True, True, True, False]])
    want = 1.0 / torch.log2(2.0 + torch.tensor([[2.0, 0.0, 1.0, 0.0]]))
    torch.testing.assert_close(rank_feature(scores, mask), torch.where(mask, want, 0.0))
