"""Gradients of personalized PageRank: gradcheck (float64), implicit vs unrolled."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from georag.geometry.diffusion import personalized_pagerank

TIGHT = {"tol": 1e-12, "max_iter": 2000}


def graphs(seed: int, b: int = 2, n: int = 6, density: float = 0.5):
    """Symmetric random graphs with an isolated node 0 (dangling) and a second component."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.rand(b, n, n, generator=gen, dtype=torch.float64)
    w = w * (torch.rand(b, n, n, generator=gen) < density)
    w = torch.maximum(w, w.transpose(1, 2))
    w.diagonal(dim1=1, dim2=2).zero_()
    w[:, 0, :] = 0.0
    w[:, :, 0] = 0.0
    if n >= 5:  # cut {1, 2} from the rest: several components
        w[:, 1:3, 3:] = 0.0
        w[:, 3:, 1:3] = 0.0
    p = torch.rand(b, n, generator=gen, dtype=torch.float64) + 0.05
    return w, p


def dense(log_w, adjacency, p, damping, mask=None, grad="implicit"):
    # log-parameterized weights: a finite-difference step cannot make an edge negative
    weights = torch.where(adjacency, log_w.exp(), 0.0)
    return personalized_pagerank(weights, p, damping=damping, mask=mask, grad=grad, **TIGHT)


@pytest.mark.parametrize("grad", ["implicit", "unrolled"])
@pytest.mark.parametrize("masked", [False, True])
def test_dense_gradcheck(grad, masked):
    w, p = graphs(0)
    adjacency = w > 0
    log_w = torch.where(adjacency, w.log(), 0.0).requires_grad_()
    p.requires_grad_()
    damping = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    mask = None
    if masked:
        mask = torch.ones(p.shape, dtype=torch.bool)
        mask[0, 3] = mask[1, -1] = False
    assert torch.autograd.gradcheck(
        lambda a, b, c: dense(a, adjacency, b, c, mask, grad), (log_w, p, damping)
    )


@pytest.mark.parametrize("grad", ["implicit", "unrolled"])
def test_sparse_gradcheck(grad):
    w, _ = graphs(1, b=1, n=7)
    csr = w[0].to_sparse_csr()
    log_values = csr.values().log().requires_grad_()
    p = (torch.rand(7, 3, dtype=torch.float64) + 0.05).requires_grad_()
    damping = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)

    def f(values, p, damping):
        weights = torch.sparse_csr_tensor(
            csr.crow_indices(), csr.col_indices(), values.exp(), csr.shape
        )
        return personalized_pagerank(weights, p, damping=damping, grad=grad, **TIGHT)

    assert torch.autograd.gradcheck(f, (log_values, p, damping))


def test_sparse_gradient_equals_dense():
    w, _ = graphs(2, b=1, n=8)
    p = torch.rand(8, 4, dtype=torch.float64) + 0.05
    upstream = torch.randn(8, 4, dtype=torch.float64)
    csr = w[0].to_sparse_csr()
    values = csr.values().clone().requires_grad_()
    sparse = torch.sparse_csr_tensor(csr.crow_indices(), csr.col_indices(), values, csr.shape)
    (personalized_pagerank(sparse, p, **TIGHT) * upstream).sum().backward()
    weights = w[0].expand(4, 8, 8).clone().requires_grad_()
    (personalized_pagerank(weights, p.T.contiguous(), **TIGHT) * upstream.T).sum().backward()
    expected = weights.grad.sum(0)[w[0] > 0]  # CSR values are stored in row-major order
    torch.testing.assert_close(values.grad, expected, atol=1e-10, rtol=0)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(2, 8),
    seed=st.integers(0, 10_000),
    density=st.floats(0.0, 1.0),
    damping=st.floats(0.05, 0.95),
    masked=st.booleans(),
)
def test_hypothesis_implicit_equals_unrolled(n, seed, density, damping, masked):
    w, p = graphs(seed, b=2, n=n, density=density)
    mask = None
    if masked:
        mask = torch.rand(2, n, generator=torch.Generator().manual_seed(seed)) < 0.8
        mask[:, -1] = True
    upstream = torch.randn(2, n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    grads = []
    for grad in ("implicit", "unrolled"):
        weights = w.clone().requires_grad_()
        pers = p.clone().requires_grad_()
        d = torch.tensor(damping, dtype=torch.float64, requires_grad=True)
        out = personalized_pagerank(weights, pers, damping=d, mask=mask, grad=grad, **TIGHT)
        grads.append(torch.autograd.grad((out * upstream).sum(), (weights, pers, d)))
    for implicit, unrolled in zip(*grads, strict=True):
        torch.testing.assert_close(implicit, unrolled, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_unchanged_by_grad(dtype):
    w, p = graphs(3)
    w, p = w.to(dtype), p.to(dtype)
    plain = personalized_pagerank(w, p)
    for grad in ("implicit", "unrolled"):
        out = personalized_pagerank(w.clone().requires_grad_(), p, grad=grad)
        torch.testing.assert_close(
            out.detach(), plain, atol=1e-7 if dtype == torch.float32 else 1e-15, rtol=0
        )


def test_float32_implicit_close_to_float64():
    w, p = graphs(4)
    upstream = torch.randn(p.shape, dtype=torch.float64)
    grads = []
    for dtype, tol in ((torch.float32, 1e-7), (torch.float64, 1e-12)):
        weights = w.to(dtype).requires_grad_()
        out = personalized_pagerank(weights, p.to(dtype), tol=tol, max_iter=1000)
        (out * upstream.to(dtype)).sum().backward()
        grads.append(weights.grad.double())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4, rtol=0)


@pytest.mark.parametrize("sparse", [False, True])
def test_float32_adjoint_below_rounding_tolerance_still_converges(sparse):
    # tol far below float32's resolution: the adjoint stops at 64 eps instead of raising
    w, p = graphs(4)
    weights = w.float()
    if sparse:
        weights, p = weights[0].to_sparse_csr(), p[0].float()
    weights.requires_grad_()
    out = personalized_pagerank(weights, p.float(), tol=1e-12, max_iter=1000)
    out.sum().backward()
    assert torch.isfinite(weights.grad.to_dense() if sparse else weights.grad).all()


def test_dangling_row_has_zero_gradient():
    w, p = graphs(5)
    weights = w.clone().requires_grad_()
    personalized_pagerank(weights, p)[:, 1].sum().backward()
    assert weights.grad[:, 0].abs().max() == 0  # node 0 is dangling (isolated)
    assert weights.grad.abs().max() > 0


def test_bad_input():
    w, p = graphs(6)
    with pytest.raises(ValueError, match="grad"):
        personalized_pagerank(w, p, grad="finite")
    with pytest.raises(ValueError, match="damping"):
        personalized_pagerank(w, p, damping=torch.tensor(1.5))
    with pytest.raises(ValueError, match="damping"):
        personalized_pagerank(w, p, damping=torch.tensor([0.5, 0.5]))
