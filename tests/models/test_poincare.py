"""Poincare maps: inside the ball, radius = distance to origin (geoopt), targets, save/load."""

from __future__ import annotations

import geoopt
import pytest
import torch

from georag.models.poincare import PoincareHead, fixed_projection, generality_target_radius


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fixed_projection_radius_is_twice_the_centred_norm(dtype):
    gen = torch.Generator().manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(50, 16, generator=gen, dtype=dtype), dim=1)
    x = fixed_projection(emb, scale=0.7)
    assert x.dtype == dtype and (x.norm(dim=1) < 1).all()
    radius = geoopt.PoincareBall(c=1.0).dist0(x)
    centred = (emb - emb.mean(0)).norm(dim=1)
    torch.testing.assert_close(radius, 2 * 0.7 * centred, rtol=1e-4, atol=1e-5)


def test_huge_inputs_are_clipped_inside_the_ball():
    head = PoincareHead(8, 4, 16, c=2.0)
    with torch.no_grad():
        head.mlp[2].weight.mul_(1e4)
    x = head(torch.randn(100, 8, dtype=torch.float32))
    assert torch.isfinite(x).all() and (x.norm(dim=1) * 2**0.5 < 1).all()
    assert torch.isfinite(head.radius(torch.randn(5, 8))).all()
    far = fixed_projection(torch.randn(10, 3) * 1e3)
    assert (far.norm(dim=1) < 1).all()


def test_head_distance_matches_geoopt_and_save_load(tmp_path):
    head = PoincareHead(6, 3, 5)
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    xa, xb = head(a), head(b)
    torch.testing.assert_close(head.distance(xa, xb), geoopt.PoincareBall(c=1.0).dist(xa, xb))
    head.save(tmp_path / "h.pt")
    again = PoincareHead.load(tmp_path / "h.pt")
    torch.testing.assert_close(again(a), xa)


def test_target_radius_ranks_generic_to_the_centre():
    g = torch.tensor([0.0, 5.0, 1.0, 1.0, 3.0])
    r = generality_target_radius(g, r_min=0.5, r_max=3.0)
    assert r[1] == 0.5 and r[0] == 3.0 and r[2] == r[3]
    assert r[4] < r[2] < r[0]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: PoincareHead(4, 2, 3)(torch.randn(2, 5)), "dimension 4"),
        (lambda: fixed_projection(torch.full((2, 2), float("nan"))), "NaN"),
        (lambda: fixed_projection(torch.ones(2, 2), scale=0), "positive"),
        (lambda: generality_target_radius(torch.ones(2, 2)), r"shape \(N,\)"),
        (lambda: PoincareHead(4, 2, 3, max_norm=1.5), "max_norm"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
