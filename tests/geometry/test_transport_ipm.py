"""Batched interior-point transport against POT's network simplex."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.transport import emd_many
from georag.geometry.transport_ipm import transport_ipm


def random_problems(
    seed: int, batch: int, n: int, m: int, spread: float, zeros: float, decades: float = 6.0
):
    """Padded problems: random supports (at least one entry each), costs over ``spread``
    decades, masses over ``decades`` decades."""
    gen = np.random.default_rng(seed)
    a = 10.0 ** gen.uniform(-decades, 0, (batch, n)) * (gen.random((batch, n)) >= zeros)
    b = 10.0 ** gen.uniform(-decades, 0, (batch, m)) * (gen.random((batch, m)) >= zeros)
    a[np.arange(batch), gen.integers(0, n, batch)] += 0.5
    b[np.arange(batch), gen.integers(0, m, batch)] += 0.5
    a /= a.sum(1, keepdims=True)
    b /= b.sum(1, keepdims=True)
    cost = 10.0 ** gen.uniform(-spread, 0, (batch, n, m)) * (gen.random((batch, n, m)) > 0.1)
    return a, b, cost


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 9),
    m=st.integers(1, 9),
    spread=st.sampled_from([0.0, 3.0, 9.0]),
    zeros=st.sampled_from([0.0, 0.5]),
    decades=st.sampled_from([6.0, 60.0]),
)
def test_bounds_bracket_the_exact_cost(seed, n, m, spread, zeros, decades):
    a, b, cost = random_problems(seed, 16, n, m, spread, zeros, decades)
    exact = emd_many(zip(a, b, cost))
    out = transport_ipm(torch.tensor(a), torch.tensor(b), torch.tensor(cost))
    lower, upper = out.lower.numpy(), out.upper.numpy()
    slack = 1e-12  # rounding: the potentials are O(1) for costs at most 1
    assert np.isfinite(upper).all()
    assert (lower <= exact + slack).all() and (exact <= upper + slack).all()
    if spread == 0.0 and decades == 6.0:  # well-scaled: the default gap is reached
        np.testing.assert_allclose(upper, exact, atol=1e-9)
        assert (upper - lower).max() < 1e-9


def test_float32_input_and_a_per_problem_gap():
    a, b, cost = random_problems(3, 64, 7, 5, 0.0, 0.3)
    exact = emd_many(zip(a, b, cost))
    gap = torch.where(torch.arange(64) % 2 == 0, 1e-4, 1e-12)
    out = transport_ipm(
        torch.tensor(a, dtype=torch.float32),
        torch.tensor(b, dtype=torch.float32),
        torch.tensor(cost, dtype=torch.float32),
        gap=gap,
    )
    assert out.upper.dtype == torch.float64
    width = (out.upper - out.lower).numpy()
    assert (width[1::2] < 1e-9).all() and (width[0::2] < 1e-3).all()
    # float32 masses are rounded: compare with the exact cost of the rounded problems
    a32, b32 = (np.float64(np.float32(v)) for v in (a, b))
    exact = emd_many(zip(a32, b32, np.float64(np.float32(cost))))
    np.testing.assert_allclose(out.upper.numpy()[1::2], exact[1::2], atol=1e-6)


@pytest.mark.parametrize(
    "a, b, cost, match",
    [
        (torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3, 2), "shapes"),
        (torch.ones(1, 2), torch.zeros(1, 2), torch.ones(1, 2, 2), "positive mass"),
        (-torch.ones(1, 2), torch.ones(1, 2), torch.ones(1, 2, 2), "a must be"),
        (torch.ones(1, 2), torch.tensor([[1.0, math.nan]]), torch.ones(1, 2, 2), "b must be"),
        (torch.ones(1, 2), torch.ones(1, 2), torch.full((1, 2, 2), math.inf), "cost must be"),
    ],
)
def test_bad_input_is_rejected(a, b, cost, match):
    with pytest.raises(ValueError, match=match):
        transport_ipm(a, b, cost)
    with pytest.raises(ValueError, match="gap"):
        transport_ipm(torch.ones(1, 2), torch.ones(1, 2), torch.ones(1, 2, 2), gap=-1.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    a, b, cost = random_problems(5, 256, 12, 10, 3.0, 0.3)
    cpu = transport_ipm(*(torch.tensor(v) for v in (a, b, cost)))
    gpu = transport_ipm(*(torch.tensor(v, device="cuda") for v in (a, b, cost)))
    assert gpu.upper.device.type == "cuda"
    exact = emd_many(zip(a, b, cost))
    for out in (cpu, gpu):
        assert (out.lower.cpu().numpy() <= exact + 1e-12).all()
        assert (exact <= out.upper.cpu().numpy() + 1e-12).all()
