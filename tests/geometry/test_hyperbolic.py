"""Lorentz / Poincare helpers and OEM pooling, checked against geoopt and closed forms."""

from __future__ import annotations

import geoopt
import geoopt.manifolds.lorentz.math as lmath
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.hyperbolic import (
    add_time,
    lorentz_distance,
    lorentz_gram,
    lorentz_inner,
    lorentz_to_poincare,
    oem_pool,
    poincare_to_lorentz,
    radial_coordinate,
    rescale_to_hyperboloid,
)

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-10, atol=1e-10)}


def _points(*shape: int, k: float, dtype: torch.dtype, scale: float = 1.0, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen, dtype=torch.float64) * scale
    return add_time(x, k=k).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0.5, 1.0, 2.0])
def test_inner_and_distance_equal_geoopt(dtype, k):
    x = _points(7, 5, k=k, dtype=dtype, seed=1)
    y = _points(7, 5, k=k, dtype=dtype, seed=2)
    kt = torch.tensor(k, dtype=dtype)
    torch.testing.assert_close(lorentz_inner(x, y), lmath.inner(x, y), **TOL[dtype])
    torch.testing.assert_close(
        lorentz_inner(x, y, keepdim=True), lmath.inner(x, y, keepdim=True), **TOL[dtype]
    )
    torch.testing.assert_close(
        lorentz_distance(x, y, k=k), geoopt.Lorentz(k=kt).dist(x, y), **TOL[dtype]
    )
    # transposed layout through dim=
    torch.testing.assert_close(lorentz_inner(x.T, y.T, dim=0), lmath.inner(x, y), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gram_matches_pairwise_inner(dtype):
    x = _points(3, 4, 6, k=1.0, dtype=dtype, seed=3)
    y = _points(3, 5, 6, k=1.0, dtype=dtype, seed=4)
    expected = lorentz_inner(x.unsqueeze(2), y.unsqueeze(1))
    torch.testing.assert_close(lorentz_gram(x, y), expected, **TOL[dtype])
    with pytest.raises(ValueError, match="last dimension"):
        lorentz_gram(x, y[..., :5])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0.25, 1.0, 4.0])
def test_add_time_lands_on_hyperboloid(dtype, k):
    p = _points(50, 384, k=k, dtype=dtype, scale=0.05)
    assert p.dtype == dtype
    assert torch.allclose(lorentz_inner(p, p), torch.full((50,), -k, dtype=dtype), atol=1e-5)
    assert geoopt.Lorentz(k=torch.tensor(k, dtype=dtype)).check_point_on_manifold(p, atol=1e-5)


def test_distance_is_clamped_and_zero_on_diagonal():
    p = _points(10, 8, k=1.0, dtype=torch.float32, scale=3.0)
    d = lorentz_distance(p, p)
    assert torch.isfinite(d).all() and (d >= 0).all() and (d < 1e-2).all()
    with pytest.raises(ValueError, match="k must be positive"):
        lorentz_distance(p, p, k=0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0.5, 1.0, 3.0])
def test_poincare_maps_are_inverse_isometries(dtype, k):
    x = _points(20, 4, k=k, dtype=dtype, seed=5)
    y = _points(20, 4, k=k, dtype=dtype, seed=6)
    ball = geoopt.PoincareBall(c=torch.tensor(1.0 / k, dtype=dtype))
    bx, by = lorentz_to_poincare(x, k=k), lorentz_to_poincare(y, k=k)
    assert (bx.norm(dim=-1) < k**0.5).all()
    torch.testing.assert_close(ball.dist(bx, by), lorentz_distance(x, y, k=k), **TOL[dtype])
    torch.testing.assert_close(poincare_to_lorentz(bx, k=k), x, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_poincare_boundary_is_clamped(dtype):
    y = torch.zeros(3, 4, dtype=dtype)
    y[0, 0] = 1.0  # on the boundary
    y[1, 1] = 5.0  # outside
    y[2, 2] = 1.0 - 1e-9
    p = poincare_to_lorentz(y, k=1.0)
    assert torch.isfinite(p).all()
    # the constraint holds to rounding relative to t^2 (t is about 250 at the clamp in float32)
    err = (lorentz_inner(p, p) + 1.0).abs()
    assert (err <= 8 * torch.finfo(dtype).eps * p[:, 0] ** 2).all()
    assert (lorentz_to_poincare(p).norm(dim=-1) < 1.0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_radial_coordinate_is_distance_to_origin(dtype):
    k = 2.0
    p = _points(30, 6, k=k, dtype=dtype, scale=2.0)
    origin = torch.zeros(1, 7, dtype=dtype)
    origin[0, 0] = k**0.5
    torch.testing.assert_close(
        k**0.5 * radial_coordinate(p, k=k), lorentz_distance(p, origin, k=k), **TOL[dtype]
    )
    assert radial_coordinate(origin, k=k).item() == pytest.approx(0.0, abs=1e-3)


def _klein_einstein_midpoint(points, mask, k):
    """Reference: Einstein midpoint in the (unit) Klein chart, gamma-weighted, mapped back."""
    klein = points[..., 1:] / points[..., :1]
    gamma = 1.0 / torch.sqrt(1.0 - (klein * klein).sum(-1))  # Lorentz factor, = t / sqrt(k)
    gamma = gamma * mask
    mid = (gamma.unsqueeze(-1) * klein).sum(1) / gamma.sum(1, keepdim=True)
    return add_time(k**0.5 * mid / torch.sqrt(1.0 - (mid * mid).sum(-1, keepdim=True)), k=k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0.5, 1.0, 2.0])
def test_oem_power_zero_is_projected_einstein_midpoint(dtype, k):
    pts = _points(4, 9, 5, k=k, dtype=dtype, scale=1.5, seed=7)
    mask = torch.rand(4, 9, generator=torch.Generator().manual_seed(0)) > 0.3
    mask[:, 0] = True
    out = oem_pool(pts, mask, k=k, power=0.0)
    torch.testing.assert_close(out, _klein_einstein_midpoint(pts, mask, k), **TOL[dtype])
    # also a Lorentzian centroid of the real points: padding content is ignored
    garbage = pts.masked_fill(~mask.unsqueeze(-1), float("nan"))
    torch.testing.assert_close(oem_pool(garbage, mask, k=k, power=0.0), out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_oem_tends_to_largest_time_point(dtype):
    pts = _points(3, 6, 4, k=1.0, dtype=dtype, scale=1.0, seed=8)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 3:] = False
    t = pts[..., 0].masked_fill(~mask, -1.0)
    target = pts[torch.arange(3), t.argmax(1)]
    gaps = [
        lorentz_distance(oem_pool(pts, mask, power=p), target).max().item()
        for p in (0.0, 1.0, 4.0, 16.0, 64.0, 400.0)
    ]
    floor = 2e-3 if dtype == torch.float32 else 1e-7  # arcosh resolution near 1
    assert all(b <= a + floor for a, b in zip(gaps[:-1], gaps[1:], strict=True)), gaps
    assert gaps[-1] < 1e-2 and gaps[0] > 0.1


@pytest.mark.parametrize("dtype", DTYPES)
def test_oem_single_point_and_on_manifold(dtype):
    pts = _points(5, 7, 384, k=1.0, dtype=dtype, scale=0.05)
    mask = torch.zeros(5, 7, dtype=torch.bool)
    mask[:, 2] = True
    torch.testing.assert_close(oem_pool(pts, mask), pts[:, 2], **TOL[dtype])
    mask[:] = True
    out = oem_pool(pts, mask, power=1.0)
    assert out.dtype == dtype and out.shape == (5, 385)
    err = (lorentz_inner(out, out) + 1.0).abs().max().item()
    assert err < 1e-5


def test_oem_rejects_bad_input():
    pts = _points(2, 3, 4, k=1.0, dtype=torch.float32)
    with pytest.raises(ValueError, match="no point in set"):
        oem_pool(pts, torch.tensor([[True, False, False], [False, False, False]]))
    with pytest.raises(ValueError, match="mask must be a bool"):
        oem_pool(pts, torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"points must have shape \(B, T, d\+1\)"):
        oem_pool(pts[0], torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="power must be >= 0"):
        oem_pool(pts, torch.ones(2, 3, dtype=torch.bool), power=-1.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_finite_near_boundary(dtype):
    # far points (|x| up to 1e4), identical points (distance 0) and ball points at the rim
    x = torch.randn(2, 5, 8, dtype=dtype, generator=torch.Generator().manual_seed(9))
    x = x * torch.tensor([1e-3, 1.0, 1e2, 1e3, 1e4], dtype=dtype).view(1, 5, 1)
    x.requires_grad_(True)
    pts = add_time(x)
    pooled = oem_pool(pts, torch.ones(2, 5, dtype=torch.bool), power=1.0)
    loss = lorentz_distance(pooled, pts[:, 0]).sum() + lorentz_distance(pts, pts).sum()
    loss = loss + radial_coordinate(pooled).sum() + lorentz_inner(pooled, pooled).sum() * 1e-9
    y = torch.full((3, 8), 0.35355339, dtype=dtype)  # norm 1 - 1e-8: at the rim
    y = (y * (1 - 1e-8)).requires_grad_(True)
    loss = loss + lorentz_distance(poincare_to_lorentz(y), pts[0, :3].detach()).sum()
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(x.grad).all() and torch.isfinite(y.grad).all()


@settings(max_examples=40, deadline=None)
@given(
    scale=st.floats(1e-4, 50.0),
    power=st.floats(0.0, 8.0),
    k=st.floats(0.1, 10.0),
    n=st.integers(1, 6),
)
def test_oem_stays_on_hyperboloid_property(scale, power, k, n):
    pts = _points(2, n, 16, k=k, dtype=torch.float64, scale=scale)
    out = oem_pool(pts, torch.ones(2, n, dtype=torch.bool), k=k, power=power)
    t = out[:, 0]
    assert torch.isfinite(out).all() and (t > 0).all()
    assert torch.allclose(
        lorentz_inner(out, out),
        torch.full((2,), -k, dtype=torch.float64),
        rtol=1e-9,
        atol=1e-9 * float(t.max()) ** 2,
    )
    # the pooled point never lies farther out than the farthest input
    assert (radial_coordinate(out, k=k) <= radial_coordinate(pts, k=k).max(1).values + 1e-9).all()


def test_rescale_to_hyperboloid_float32_far_points():
    p = torch.tensor([[1e4 + 1.0, 1e4, 0.0], [5.0, 3.0, 0.0]], dtype=torch.float32)
    out = rescale_to_hyperboloid(p)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[1], torch.tensor([1.25, 0.75, 0.0]))
