"""The compiled uncertified Sinkhorn flow (georag.geometry.ricci.compiled) against the
tensor path of ``ricci_flow``: the same fixed points where both solve tightly, the same
flags, shapes and edge cases, and no NaN on adversarial graphs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from graph_cases import adversarial_graphs
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.eval.synthetic import random_graphs
from georag.geometry.ricci import RicciConvergenceWarning, compiled, ricci_flow

UNCERTIFIED = dict(method="sinkhorn", accuracy=None)


def glued_graphs(seed: int, n: int, pieces: int, isolated: int, weighted: bool):
    """``pieces`` random components side by side plus ``isolated`` isolated nodes."""
    rng = np.random.default_rng(seed)
    size = pieces * n + isolated
    lengths = np.zeros((1, size, size))
    for p in range(pieces):
        part, _ = random_graphs(rng, 1, n, density=(0.3, 0.9), weighted=weighted)
        lengths[0, p * n : (p + 1) * n, p * n : (p + 1) * n] = part[0]
    order = rng.permutation(size)
    lengths = lengths[:, order][:, :, order]
    return torch.tensor(lengths), torch.tensor(lengths > 0)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 9),
    pieces=st.integers(1, 3),
    isolated=st.integers(0, 2),
    weighted=st.booleans(),
    restrict=st.booleans(),
)
def test_compiled_and_tensor_flows_reach_the_same_fixed_points(
    seed, n, pieces, isolated, weighted, restrict
):
    # solved tightly, the two schedules (per problem here, per graph there) reach the
    # same entropic plans: lengths and curvature agree at every step
    lengths, adjacency = glued_graphs(seed, n, pieces, isolated, weighted)
    options = dict(
        UNCERTIFIED,
        iterations=4,
        epsilon=0.5,
        tol=1e-12,
        max_iter=20_000,
        restrict=restrict,
        history=True,
        transport_dtype=torch.float64,
    )
    fast = ricci_flow(lengths, adjacency, backend="compiled", **options)
    slow = ricci_flow(lengths, adjacency, backend="tensor", **options)
    assert torch.equal(fast.adjacency, slow.adjacency)
    assert torch.equal(fast.iterations, slow.iterations)
    assert torch.equal(fast.converged, slow.converged)
    assert fast.history_lengths.shape == slow.history_lengths.shape
    torch.testing.assert_close(fast.history_lengths, slow.history_lengths, rtol=0, atol=1e-8)
    torch.testing.assert_close(fast.history_curvature, slow.history_curvature, rtol=0, atol=1e-8)


def test_the_filter_setting_stays_close_to_the_tensor_path():
    # at the filter's loose tol each path stops on its own schedule: close, not equal
    rng = np.random.default_rng(3)
    lengths, adjacency = random_graphs(rng, 8, 21, density=(0.4, 0.7), weighted=False)
    lengths, adjacency = torch.tensor(lengths).float(), torch.tensor(adjacency)
    options = dict(UNCERTIFIED, iterations=20, epsilon=0.1, max_iter=50, tol=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RicciConvergenceWarning)
        fast = ricci_flow(lengths, adjacency, backend="compiled", **options)
        slow = ricci_flow(lengths, adjacency, backend="tensor", **options)
    assert fast.lengths.dtype == torch.float32
    torch.testing.assert_close(fast.lengths, slow.lengths, rtol=0, atol=0.15)
    # one graph alone gives the same bits as in its batch
    alone = ricci_flow(lengths[2:3], adjacency[2:3], backend="compiled", **options)
    assert torch.equal(alone.lengths[0], fast.lengths[2])


def test_auto_runs_the_compiled_flow_on_cpu_for_the_uncertified_setting():
    rng = np.random.default_rng(0)
    lengths, adjacency = (torch.tensor(x) for x in random_graphs(rng, 2, 12, weighted=True))
    auto = ricci_flow(lengths, adjacency, **UNCERTIFIED, tol=1e-6, max_iter=5000)
    compiled = ricci_flow(
        lengths, adjacency, **UNCERTIFIED, tol=1e-6, max_iter=5000, backend="compiled"
    )
    assert torch.equal(auto.lengths, compiled.lengths)
    certified = ricci_flow(lengths, adjacency, method="sinkhorn", iterations=2)
    tensor = ricci_flow(lengths, adjacency, method="sinkhorn", iterations=2, backend="tensor")
    assert torch.equal(certified.lengths, tensor.lengths)  # certified: the tensor path


def test_compiled_flags_a_missed_tolerance_and_warns_once():
    rng = np.random.default_rng(1)
    lengths, adjacency = (torch.tensor(x) for x in random_graphs(rng, 3, 15, weighted=True))
    with pytest.warns(RicciConvergenceWarning) as caught:
        res = ricci_flow(
            lengths, adjacency, **UNCERTIFIED, max_iter=1, tol=1e-9, backend="compiled"
        )
    assert len(caught) == 1 and caught[0].filename == __file__
    assert not res.converged.any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = ricci_flow(
            lengths, adjacency, **UNCERTIFIED, max_iter=5000, tol=1e-6, backend="compiled"
        )
    assert ok.converged.all()


def test_a_flat_graph_stops_at_once_and_its_history_is_frozen():
    n = 6
    adjacency = ~torch.eye(n, dtype=torch.bool)[None]
    lengths = adjacency.double()
    res = ricci_flow(
        lengths, adjacency, **UNCERTIFIED, iterations=5, history=True, backend="compiled"
    )
    ref = ricci_flow(
        lengths, adjacency, **UNCERTIFIED, iterations=5, history=True, backend="tensor"
    )
    assert res.iterations.tolist() == ref.iterations.tolist() == [1]
    assert res.history_lengths.shape == ref.history_lengths.shape == (2, 1, n, n)
    torch.testing.assert_close(res.lengths, lengths)


def test_edgeless_graphs_and_zero_iterations():
    adjacency = torch.zeros(2, 4, 4, dtype=torch.bool)
    res = ricci_flow(adjacency.double(), adjacency, **UNCERTIFIED, backend="compiled")
    ref = ricci_flow(adjacency.double(), adjacency, **UNCERTIFIED, backend="tensor")
    assert res.iterations.tolist() == ref.iterations.tolist()
    assert not res.lengths.any() and not res.curvature.any()
    rng = np.random.default_rng(2)
    lengths, adjacency = (torch.tensor(x) for x in random_graphs(rng, 2, 8, weighted=True))
    still = ricci_flow(lengths, adjacency, **UNCERTIFIED, iterations=0, backend="compiled")
    assert still.iterations.tolist() == [0, 0]
    kept = still.adjacency
    torch.testing.assert_close(still.lengths, lengths * kept)


def test_a_non_finite_transport_falls_back_to_the_tensor_path(monkeypatch):
    rng = np.random.default_rng(4)
    lengths, adjacency = (torch.tensor(x) for x in random_graphs(rng, 2, 10, weighted=True))
    real = compiled.flow_batch

    def failing(*args):
        out = real(*args)
        out[-1][:] = False  # "finite": as if a transport had overflowed
        return out

    monkeypatch.setattr(compiled, "flow_batch", failing)
    options = dict(UNCERTIFIED, tol=1e-6, max_iter=5000)
    res = ricci_flow(lengths, adjacency, **options)
    ref = ricci_flow(lengths, adjacency, **options, backend="tensor")
    assert torch.equal(res.lengths, ref.lengths)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(backend="fast"), "backend must be one of"),
        (dict(backend="compiled", method="exact"), "backend='compiled' runs"),
        (dict(backend="compiled", method="sinkhorn"), "backend='compiled' runs"),
        (dict(backend="compiled", nbr_topk=2, **UNCERTIFIED), "backend='compiled' runs"),
    ],
)
def test_bad_backends_are_rejected(kwargs, match):
    adjacency = ~torch.eye(4, dtype=torch.bool)[None]
    with pytest.raises(ValueError, match=match):
        ricci_flow(adjacency.double(), adjacency, **kwargs)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(3, 14),
    pieces=st.integers(1, 3),
    isolated=st.integers(0, 2),
    zero_share=st.sampled_from([0.0, 0.3]),
    double=st.booleans(),
)
def test_no_nan_on_components_isolated_nodes_and_extreme_lengths(
    seed, n, pieces, isolated, zero_share, double
):
    # lengths log-uniform in [1e-17, 1e3], some exactly zero
    lengths, adjacency = adversarial_graphs(
        seed, n, pieces=pieces, isolated=isolated, zero_share=zero_share
    )
    dtype = torch.float64 if double else torch.float32
    lengths, adjacency = torch.tensor(lengths, dtype=dtype), torch.tensor(adjacency)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RicciConvergenceWarning)
        res = ricci_flow(lengths, adjacency, **UNCERTIFIED, iterations=10, backend="auto")
    assert torch.isfinite(res.lengths).all() and torch.isfinite(res.curvature).all()
    assert (res.lengths >= 0).all()
    assert not res.lengths[~res.adjacency].any()
