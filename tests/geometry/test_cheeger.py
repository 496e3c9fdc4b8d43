"""Local Cheeger ratios against brute force (networkx cut_size), pruning rule exactness."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.cheeger import local_cheeger_ratio, prune_edges, pruning_scores, sweep_order


def _random_graph(rng: np.random.Generator, n: int, p: float, dtype) -> torch.Tensor:
    w = rng.uniform(0.1, 1.0, (n, n)) * (rng.random((n, n)) < p)
    w = np.triu(w, 1)
    # distinct weights except deliberate ties: round to force some ties
    w = np.round(w, 1)
    return torch.tensor(w + w.T, dtype=dtype)


def _brute_force(w: np.ndarray, volume: np.ndarray, k: int, strength=None):
    """Per node: the sweep sets built by hand, cut by networkx, min of cut / volume."""
    n = w.shape[0]
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from(
        (i, j, w[i, j]) for i in range(n) for j in range(i + 1, n) if w[i, j] > 0
    )
    extra = np.zeros(n) if strength is None else strength - w.sum(1)
    out = []
    for v in range(n):
        nbrs = sorted(g[v], key=lambda u: (-w[v, u], u))
        best = math.inf
        for size in range(1, min(k, len(nbrs) + 1) + 1):
            s = [v] + nbrs[: size - 1]
            cut = nx.cut_size(g, s, weight="weight") + extra[s].sum()
            best = min(best, cut / volume[s].sum())
        out.append(best)
    return np.array(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("k", [1, 2, 4, 20])
def test_matches_brute_force(dtype, k):
    rng = np.random.default_rng(k)
    graphs = [_random_graph(rng, 9, 0.4, dtype) for _ in range(3)]
    w = torch.stack(graphs)
    volume = torch.tensor(rng.uniform(0.2, 3.0, (3, 9)), dtype=dtype)
    ratio, best = local_cheeger_ratio(w, volume, sweep_size=k)
    assert ratio.dtype == dtype and best.shape == (3, 9)
    for b in range(3):
        ref = _brute_force(w[b].double().numpy(), volume[b].double().numpy(), k)
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        np.testing.assert_allclose(ratio[b].double().numpy(), ref, rtol=tol, atol=tol)


def test_enclosing_strength_counts_edges_that_leave():
    rng = np.random.default_rng(0)
    w = _random_graph(rng, 8, 0.5, torch.float64)
    volume = torch.tensor(rng.uniform(0.5, 2.0, 8))
    strength = w.sum(1) + torch.tensor(rng.uniform(0, 2, 8))
    ratio, _ = local_cheeger_ratio(w[None], volume[None], sweep_size=3, strength=strength[None])
    ref = _brute_force(w.numpy(), volume.numpy(), 3, strength.numpy())
    np.testing.assert_allclose(ratio[0].numpy(), ref, rtol=1e-12)
    with pytest.raises(ValueError, match="at least each node's row sum"):
        local_cheeger_ratio(w[None], volume[None], sweep_size=3, strength=(w.sum(1) - 1)[None])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 7), seed=st.integers(0, 10_000), k=st.integers(1, 7))
def test_sweep_is_an_upper_bound_of_the_exact_local_constant(n, seed, k):
    """The sweep minimum is >= the minimum over *all* sets containing v of size <= k,
    and equals brute force on its own sets."""
    rng = np.random.default_rng(seed)
    w = _random_graph(rng, n, 0.6, torch.float64)
    volume = torch.tensor(rng.uniform(0.2, 2.0, n))
    ratio, _ = local_cheeger_ratio(w[None], volume[None], sweep_size=k)
    wn = w.numpy()
    np.testing.assert_allclose(
        ratio[0].numpy(), _brute_force(wn, volume.numpy(), k), rtol=1e-12, atol=1e-12
    )
    for v in range(n):
        others = [u for u in range(n) if u != v]
        exact = min(
            (wn[list(s)].sum() - wn[np.ix_(list(s), list(s))].sum()) / volume[list(s)].sum().item()
            for size in range(1, min(k, n) + 1)
            for s in ({v, *c} for c in itertools.combinations(others, size - 1))
        )
        assert ratio[0, v].item() >= exact - 1e-12


def test_mask_equals_the_induced_subgraph():
    rng = np.random.default_rng(3)
    w = _random_graph(rng, 10, 0.5, torch.float64)
    volume = torch.tensor(rng.uniform(0.5, 2.0, 10))
    keep = torch.tensor([True] * 6 + [False] * 4)
    ratio, best = local_cheeger_ratio(w[None], volume[None], sweep_size=4, mask=keep[None])
    sub, _ = local_cheeger_ratio(w[:6, :6][None], volume[:6][None], sweep_size=4)
    torch.testing.assert_close(ratio[0, :6], sub[0])
    assert (ratio[0, 6:] == 0).all() and (best[0, 6:] == 0).all()


def test_star_hub_has_the_largest_ratio():
    n = 8
    w = torch.zeros(1, n, n)
    w[0, 0, 1:] = w[0, 1:, 0] = 1.0
    volume = torch.ones(1, n)
    ratio, _ = local_cheeger_ratio(w, volume, sweep_size=1)
    assert ratio[0, 0] == 7.0 and (ratio[0, 1:] == 1.0).all()


def test_sweep_order_ties_and_padding():
    w = torch.tensor([[[0, 1, 1, 0.5], [1, 0, 0, 0], [1, 0, 0, 0], [0.5, 0, 0, 0.0]]])
    order, valid = sweep_order(w, sweep_size=6)
    assert order[0, 0, :4].tolist() == [0, 1, 2, 3]
    assert valid[0, 0].tolist() == [True] * 4 + [False] * 2
    assert valid[0, 1].tolist() == [True, True] + [False] * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prune_removes_exactly_the_edges_its_rule_names(dtype):
    rng = np.random.default_rng(7)
    w = torch.stack([_random_graph(rng, 12, 0.4, dtype) for _ in range(2)])
    volume = torch.tensor(rng.uniform(0.2, 3.0, (2, 12)), dtype=dtype)
    ratio, _ = local_cheeger_ratio(w, volume, sweep_size=3)
    scores = pruning_scores(w, ratio)
    pruned, removed = prune_edges(w, scores, threshold=0.7)
    for b in range(2):
        for i in range(12):
            for j in range(12):
                diff = abs(
                    math.log(ratio[b, i].item() + 1e-6) - math.log(ratio[b, j].item() + 1e-6)
                )
                named = w[b, i, j].item() > 0 and diff > 0.7 + 1e-5
                kept = w[b, i, j].item() > 0 and diff < 0.7 - 1e-5
                if named:
                    assert removed[b, i, j] and pruned[b, i, j] == 0
                if kept:
                    assert not removed[b, i, j] and pruned[b, i, j] == w[b, i, j]
    assert torch.equal(removed, removed.transpose(1, 2))
    assert torch.equal(pruned + w * removed, w)
    _, none = prune_edges(w, scores, threshold=math.inf)
    assert not none.any()


def test_everything_pruned_leaves_an_empty_graph():
    w = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    scores = torch.full_like(w, 5.0)
    pruned, removed = prune_edges(w, scores, threshold=0.0)
    assert (pruned == 0).all() and removed.sum() == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(weights=torch.zeros(3, 3)), r"shape \(B, N, N\)"),
        (dict(weights=-torch.ones(1, 3, 3)), "non-negative"),
        (dict(weights=torch.triu(torch.ones(1, 3, 3), 1)), "symmetric"),
        (dict(weights=torch.full((1, 3, 3), float("nan"))), "non-finite"),
        (dict(volume=torch.zeros(1, 3)), "positive"),
        (dict(volume=torch.ones(1, 4)), "volume must have shape"),
        (dict(sweep_size=0), "sweep_size"),
        (dict(mask=torch.ones(1, 3)), "mask must be a bool"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(weights=torch.ones(1, 3, 3), volume=torch.ones(1, 3), sweep_size=2)
    args.update(kwargs)
    weights, volume = args.pop("weights"), args.pop("volume")
    with pytest.raises(ValueError, match=match):
        local_cheeger_ratio(weights, volume, **args)
