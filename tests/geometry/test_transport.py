"""Batched Sinkhorn against POT (exact emd2 and POT's own sinkhorn)."""

from __future__ import annotations

import numpy as np
import ot
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.transport import (
    emd,
    max_cost_over_epsilon,
    sinkhorn,
    sinkhorn_shared_cost,
    sinkhorn_shared_cost_scaled,
    transport_bounds,
)

DTYPES = (torch.float32, torch.float64)


def _problems(batch: int, n: int, m: int, seed: int, dtype: torch.dtype, sparse: bool = False):
    gen = torch.Generator().manual_seed(seed)
    a = torch.rand(batch, n, generator=gen, dtype=torch.float64)
    b = torch.rand(batch, m, generator=gen, dtype=torch.float64)
    if sparse:
        a = a * (torch.rand(batch, n, generator=gen, dtype=torch.float64) < 0.6)
        b = b * (torch.rand(batch, m, generator=gen, dtype=torch.float64) < 0.6)
        a[:, 0] += 0.1
        b[:, 0] += 0.1
    a, b = a / a.sum(1, keepdim=True), b / b.sum(1, keepdim=True)
    cost = torch.rand(batch, n, m, generator=gen, dtype=torch.float64) * 2
    return a.to(dtype), b.to(dtype), cost.to(dtype)


def _emd(a, b, cost) -> np.ndarray:
    return np.array(
        [
            ot.emd2(a[k].double().numpy(), b[k].double().numpy(), cost[k].double().numpy())
            for k in range(a.shape[0])
        ]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinkhorn_log_domain_matches_pot_sinkhorn(dtype):
    a64, b64, cost64 = _problems(6, 7, 5, seed=0, dtype=torch.float64)
    a, b, cost = a64.to(dtype), b64.to(dtype), cost64.to(dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-9
    out = sinkhorn(a, b, cost, epsilon=0.2, max_iter=5000, tol=tol)
    assert out.converged.all() and out.cost.dtype == dtype
    for k in range(6):
        plan = ot.sinkhorn(
            a64[k].numpy(), b64[k].numpy(), cost64[k].numpy(), 0.2, stopThr=1e-11, numItermax=20000
        )
        expected = float((plan * cost64[k].numpy()).sum())
        assert abs(float(out.cost[k]) - expected) < (1e-5 if dtype == torch.float32 else 1e-8)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinkhorn_small_epsilon_does_not_underflow_and_approaches_emd(dtype):
    a, b, cost = _problems(5, 4, 4, seed=1, dtype=dtype, sparse=True)
    cost = cost * 500  # cost / epsilon up to 1000: the kernel exp(-C / eps) would underflow
    out = sinkhorn(a, b, cost, epsilon=1.0, max_iter=5000, tol=1e-3)
    assert torch.isfinite(out.cost).all() and torch.isfinite(out.f[a > 0]).all()
    assert (out.error < 0.05).all()
    exact = _emd(a, b, cost)
    slack = 1.0 * np.log(16) + 1000 * float(out.error.max())
    assert (np.abs(out.cost.double().numpy() - exact) <= slack).all()


def test_sinkhorn_broadcasts_one_cost_over_a_group():
    a, b, cost = _problems(4, 5, 5, seed=2, dtype=torch.float64)
    shared = cost[:1].unsqueeze(1)  # (1, 1, n, m) over a (1, 4, n) batch
    out = sinkhorn(a.unsqueeze(0), b.unsqueeze(0), shared, epsilon=0.05, tol=1e-9, max_iter=10000)
    each = sinkhorn(a, b, cost[:1].expand(4, 5, 5), epsilon=0.05, tol=1e-9, max_iter=10000)
    torch.testing.assert_close(out.cost[0], each.cost)


@pytest.mark.parametrize("dtype", DTYPES)
def test_shared_cost_solver_matches_log_domain(dtype):
    gen = torch.Generator().manual_seed(3)
    a = torch.rand(3, 8, 6, generator=gen, dtype=dtype)
    b = torch.rand(3, 8, 6, generator=gen, dtype=dtype)
    a, b = a / a.sum(-1, keepdim=True), b / b.sum(-1, keepdim=True)
    cost = torch.rand(3, 6, 6, generator=gen, dtype=dtype)
    eps = torch.tensor([0.05, 0.1, 0.2], dtype=dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-8
    fast = sinkhorn_shared_cost(a, b, cost, epsilon=eps, max_iter=3000, tol=tol)
    slow = sinkhorn(a, b, cost.unsqueeze(1), epsilon=eps.view(3, 1), max_iter=3000, tol=tol)
    assert fast.converged.all() and slow.converged.all()
    torch.testing.assert_close(fast.cost, slow.cost, atol=1e-4, rtol=1e-4)


def test_shared_cost_solver_warm_start_needs_fewer_iterations():
    a, b, cost = _problems(8, 6, 6, seed=4, dtype=torch.float64)
    a, b, cost = a.unsqueeze(0), b.unsqueeze(0), cost[:1]
    cold = sinkhorn_shared_cost(a, b, cost, epsilon=0.05, max_iter=5000, tol=1e-8)
    warm = sinkhorn_shared_cost(
        a, b, cost, epsilon=0.05, max_iter=5000, tol=1e-8, init=(cold.f, cold.g)
    )
    assert cold.converged.all() and warm.converged.all()
    assert warm.iterations < cold.iterations
    torch.testing.assert_close(warm.cost, cold.cost)


def test_shared_cost_groups_do_not_depend_on_their_batch():
    # each group leaves the iteration at the first check where it converged, so it gets
    # the iterations it would get alone: same plan and cost as solved on its own
    a, b, cost = _problems(15, 7, 7, seed=8, dtype=torch.float64, sparse=True)
    a, b = a.view(3, 5, 7), b.view(3, 5, 7)
    eps = torch.tensor([0.5, 0.05, 0.2], dtype=torch.float64)
    together = sinkhorn_shared_cost(a, b, cost[:3], epsilon=eps, max_iter=400, tol=1e-9)
    counts = []
    for g in range(3):
        alone = sinkhorn_shared_cost(
            a[g : g + 1], b[g : g + 1], cost[g : g + 1], epsilon=eps[g], max_iter=400, tol=1e-9
        )
        counts.append(alone.iterations)
        torch.testing.assert_close(together.cost[g], alone.cost[0], rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(together.f[g], alone.f[0], rtol=1e-12, atol=1e-14)
        assert torch.equal(together.converged[g], alone.converged[0])
    assert len(set(counts)) > 1  # the groups needed different iteration counts
    assert together.iterations == max(counts)


def test_shared_cost_solver_stays_finite_when_the_kernel_underflows():
    a = torch.tensor([[[1.0, 0.0, 0.0]]], dtype=torch.float32)
    b = torch.tensor([[[0.0, 0.5, 0.5]]], dtype=torch.float32)
    cost = torch.tensor([[[0.0, 10.0, 12.0], [10.0, 0.0, 2.0], [12.0, 2.0, 0.0]]])
    ok = sinkhorn_shared_cost(a, b, cost, epsilon=12.0 / max_cost_over_epsilon(torch.float32))
    assert ok.converged.all() and abs(float(ok.cost) - 11.0) < 1e-3
    # far below the range every kernel entry sits at the floor: costs are no longer
    # told apart, but the plan stays feasible and finite
    low = sinkhorn_shared_cost(a, b, cost, epsilon=0.01)
    assert torch.isfinite(low.cost).all() and 10.0 <= float(low.cost) <= 12.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_shared_cost_center_leaves_the_plan_and_doubles_the_range(dtype):
    # sources {0, 1}, targets {2, 3}: the diagonal plan costs 10, the even split 11
    a = torch.tensor([[[0.5, 0.5, 0.0, 0.0]]], dtype=dtype)
    b = torch.tensor([[[0.0, 0.0, 0.5, 0.5]]], dtype=dtype)
    cost = torch.tensor(
        [
            [
                [0.0, 2.0, 10.0, 12.0],
                [2.0, 0.0, 12.0, 10.0],
                [10.0, 12.0, 0.0, 2.0],
                [12.0, 10.0, 2.0, 0.0],
            ]
        ],
        dtype=dtype,
    )
    moderate = sinkhorn_shared_cost(a, b, cost, epsilon=1.0, max_iter=500, tol=1e-6)
    centred = sinkhorn_shared_cost(a, b, cost, epsilon=1.0, max_iter=500, tol=1e-6, center=6.0)
    torch.testing.assert_close(centred.cost, moderate.cost)
    # 12 / eps is 1.9 times the one-sided limit: without a centre both costs sit at the
    # kernel's floor and the plan splits evenly; centred on 6 they are told apart
    eps = 12.0 / (1.9 * max_cost_over_epsilon(dtype))
    plain = sinkhorn_shared_cost(a, b, cost, epsilon=eps, max_iter=500, tol=1e-6)
    centred = sinkhorn_shared_cost(a, b, cost, epsilon=eps, max_iter=500, tol=1e-6, center=6.0)
    assert centred.converged.all() and abs(float(centred.cost) - 10.0) < 1e-3
    assert abs(float(plain.cost) - 11.0) < 1e-3


def test_scaled_solver_converges_where_the_plain_one_does_not():
    # integer costs with many ties, as on unit-length graphs
    gen = torch.Generator().manual_seed(7)
    a = (torch.rand(2, 16, 9, generator=gen, dtype=torch.float64) < 0.4).double() + 1e-3
    b = (torch.rand(2, 16, 9, generator=gen, dtype=torch.float64) < 0.4).double() + 1e-3
    a, b = a / a.sum(-1, keepdim=True), b / b.sum(-1, keepdim=True)
    cost = torch.randint(1, 4, (2, 9, 9), generator=gen).double()
    cost = torch.minimum(cost, cost.transpose(1, 2)) * (1 - torch.eye(9, dtype=torch.float64))
    eps = torch.full((2,), 0.05, dtype=torch.float64)
    plain = sinkhorn_shared_cost(a, b, cost, epsilon=eps, max_iter=60_000, tol=1e-7)
    scaled = sinkhorn_shared_cost_scaled(
        a, b, cost, epsilon=eps, start=torch.full((2,), 3.0), max_iter=60_000, tol=1e-7, center=1.5
    )
    assert scaled.converged.all() and not plain.converged.all()
    torch.testing.assert_close(scaled.cost, plain.cost, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="factor"):
        sinkhorn_shared_cost_scaled(a, b, cost, epsilon=eps, start=eps, factor=1.0)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 6), m=st.integers(1, 6), seed=st.integers(0, 2**16), double=st.booleans())
def test_sinkhorn_cost_is_within_the_entropic_gap_of_emd(n, m, seed, double):
    dtype = torch.float64 if double else torch.float32
    a, b, cost = _problems(3, n, m, seed=seed, dtype=dtype, sparse=True)
    eps = 0.05
    out = sinkhorn(a, b, cost, epsilon=eps, max_iter=3000, tol=1e-4)
    exact = _emd(a, b, cost)
    got = out.cost.double().numpy()
    # the entropic plan costs at least the optimum (up to the marginal error times the
    # largest cost) and at most epsilon * log(n m) above it
    slack = 2.0 * float(out.error.max()) + 1e-5
    assert (got >= exact - slack).all()
    assert (got <= exact + eps * np.log(n * m) + slack).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(a=torch.tensor([0.5, 0.6]), b=torch.tensor([0.5, 0.5])), "same total mass"),
        (dict(a=torch.tensor([1.5, -0.5]), b=torch.tensor([0.5, 0.5])), "non-negative"),
        (dict(a=torch.tensor([float("nan"), 1.0]), b=torch.tensor([0.5, 0.5])), "finite"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(cost=torch.ones(3, 3)), "broadcast"),
        (dict(cost=-torch.ones(2, 2)), "non-negative"),
    ],
)
def test_sinkhorn_rejects_bad_input(kwargs, match):
    args = dict(
        a=torch.tensor([0.5, 0.5]), b=torch.tensor([0.5, 0.5]), cost=torch.ones(2, 2), epsilon=0.1
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sinkhorn(args.pop("a"), args.pop("b"), args.pop("cost"), **args)


def test_shared_cost_solver_rejects_bad_shapes():
    a = torch.full((2, 3, 4), 0.25)
    with pytest.raises(ValueError, match="cost must have shape"):
        sinkhorn_shared_cost(a, a, torch.ones(2, 4, 5), epsilon=0.1)
    with pytest.raises(ValueError, match=r"\(B, E, n\)"):
        sinkhorn_shared_cost(a[0], a[0], torch.ones(4, 4), epsilon=0.1)


# ---------------------------------------------------------------- bounds and exact


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 7),
    m=st.integers(1, 7),
    eps=st.floats(1e-3, 1.0),
    iters=st.sampled_from([1, 5, 200]),
    noise=st.sampled_from([0.0, 1.0, 50.0]),
)
def test_transport_bounds_bracket_the_exact_cost(seed, n, m, eps, iters, noise):
    a, b, cost = _problems(3, n, m, seed=seed, dtype=torch.float64, sparse=True)
    out = sinkhorn(a, b, cost, epsilon=eps, max_iter=iters, tol=0.0)
    gen = torch.Generator().manual_seed(seed)
    f = out.f + noise * torch.randn(out.f.shape, generator=gen, dtype=torch.float64)
    bounds = transport_bounds(a, b, cost, f, out.g, eps)
    exact = torch.tensor(_emd(a, b, cost))
    assert (bounds.lower <= exact + 1e-12).all() and (exact <= bounds.upper + 1e-12).all()
    assert torch.isfinite(bounds.upper).all()


def test_transport_bounds_close_on_a_converged_plan_and_survive_nan():
    a, b, cost = _problems(4, 6, 5, seed=3, dtype=torch.float64)
    out = sinkhorn(a, b, cost, epsilon=1e-3, max_iter=20000, tol=1e-12)
    bounds = transport_bounds(a, b, cost, out.f, out.g, 1e-3)
    exact = torch.tensor(_emd(a, b, cost))
    assert ((bounds.upper - bounds.lower) < 1e-2).all()
    assert ((bounds.upper - exact).abs() < 1e-3).all()
    broken = transport_bounds(a, b, cost, torch.full_like(out.f, float("nan")), out.g, 1e-3)
    assert torch.isneginf(broken.lower).all() and (broken.upper >= exact - 1e-12).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_emd_matches_pot_emd2_on_sparse_supports(dtype):
    a, b, cost = _problems(6, 7, 5, seed=4, dtype=dtype, sparse=True)
    got = emd(a, b, cost)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.double().numpy(), _emd(a, b, cost), rtol=1e-6, atol=1e-7)
    assert emd(
        torch.zeros(1, 3, dtype=dtype),
        torch.zeros(1, 3, dtype=dtype),
        torch.ones(1, 3, 3, dtype=dtype),
    ).tolist() == [0.0]
