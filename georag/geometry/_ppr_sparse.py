"""Sparse CSR personalized PageRank: one graph (N, N), personalization columns (N, Q) in
blocks, each column stopped at its own first converged step, with an implicit or unrolled
gradient in the CSR values (see :mod:`georag.geometry.diffusion`)."""

from __future__ import annotations

import torch

from georag.geometry._ppr_shared import (
    PowerIterationFailedConvergence,
    _adjoint_grads,
    _check_weights,
    _needs_grad,
    _normalize_personalization,
    _rounding_floor,
    _unrolled_iteration,
)


def _sparse_ppr(
    weights: torch.Tensor,
    personalization: torch.Tensor,
    damping: float | torch.Tensor,
    tol: float,
    max_iter: int,
    block_size: int | None,
    grad: str,
) -> torch.Tensor:
    if weights.dim() != 2 or weights.shape[0] != weights.shape[1]:
        raise ValueError(f"sparse weights must have shape (N, N), got {tuple(weights.shape)}")
    n = weights.shape[0]
    single = personalization.dim() == 1
    p = personalization.unsqueeze(1) if single else personalization
    if p.dim() != 2 or p.shape[0] != n:
        raise ValueError(
            f"personalization must have shape ({n}, Q) or ({n},), "
            f"got {tuple(personalization.shape)}"
        )
    if block_size is not None and block_size < 1:
        raise ValueError(f"block_size must be positive, got {block_size}")
    _check_weights(weights.values().detach())
    p = _normalize_personalization(p.to(weights.dtype), dim=0)
    if not _needs_grad(weights, p, damping):
        out = _sparse_solve(weights, p, float(damping), tol, max_iter, block_size)
    else:
        damping = torch.as_tensor(damping, dtype=weights.dtype, device=weights.device)
        if grad == "unrolled":
            out = _sparse_unrolled(weights, p, damping, tol, max_iter)
        else:
            out = _SparsePageRank.apply(weights, p, damping, tol, max_iter, block_size)
    return out.squeeze(1) if single else out


def _sparse_solve(
    weights: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    tol: float,
    max_iter: int,
    block_size: int | None,
) -> torch.Tensor:
    transition_t, dangling = _transposed_transition(weights)
    q = p.shape[1]
    step = q if block_size is None else block_size
    blocks = [
        _sparse_power_iteration(transition_t, dangling, p[:, s : s + step], damping, tol, max_iter)
        for s in range(0, q, step)
    ]
    return torch.cat(blocks, dim=1) if len(blocks) > 1 else blocks[0]


def _csr_rows(weights: torch.Tensor) -> torch.Tensor:
    """The row of every stored entry of a CSR matrix, shape (E,)."""
    crow = weights.crow_indices()
    n = weights.shape[0]
    return torch.repeat_interleave(torch.arange(n, device=weights.device), crow[1:] - crow[:-1])


def _transposed_transition(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(D^-1 W)^T`` as CSR and the ids of the dangling nodes."""
    n = weights.shape[0]
    rows = _csr_rows(weights)
    cols = weights.col_indices()
    values = weights.values()
    ones = torch.ones(n, 1, dtype=values.dtype, device=values.device)
    strength = (weights @ ones).squeeze(1)
    inv = torch.where(strength > 0, 1.0 / strength, 0.0)
    transposed = torch.sparse_coo_tensor(
        torch.stack([cols, rows]), values * inv[rows], (n, n), check_invariants=False
    ).coalesce()
    dangling = torch.nonzero(strength == 0).flatten()
    return transposed.to_sparse_csr(), dangling


def _sparse_power_iteration(
    transition_t: torch.Tensor,
    dangling: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    tol: float,
    max_iter: int,
) -> torch.Tensor:
    """Power iteration over the columns of ``p`` (N, Q); converged columns drop out."""
    n, q = p.shape
    out = torch.empty_like(p)
    active = torch.arange(q, device=p.device)
    x = torch.full_like(p, 1.0 / n)
    teleport = (1.0 - damping) * p
    threshold = max(n * tol, _rounding_floor(p.dtype))
    for _ in range(max_iter):
        x_new = torch.addmm(teleport, transition_t, x, alpha=damping)
        if dangling.numel():
            lost = x.index_select(0, dangling).sum(dim=0, keepdim=True)
            x_new.add_(p * lost, alpha=damping)
        converged = (x_new - x).abs_().sum(dim=0) < threshold
        if bool(converged.any()):
            out[:, active[converged]] = x_new[:, converged]
            left = ~converged
            active, x_new = active[left], x_new[:, left]
            p, teleport = p[:, left], teleport[:, left]
            if active.numel() == 0:
                return out
        x = x_new
    raise PowerIterationFailedConvergence(
        f"{active.numel()} of {q} personalization vectors did not converge in {max_iter} iterations"
    )


def _sparse_unrolled(
    weights: torch.Tensor, p: torch.Tensor, damping: torch.Tensor, tol: float, max_iter: int
) -> torch.Tensor:
    """The sparse iteration under autograd, as an edge-list product (the check)."""
    n, q = p.shape
    rows, cols, values = _csr_rows(weights), weights.col_indices(), weights.values()
    strength = torch.zeros(n, dtype=values.dtype, device=values.device).index_add(0, rows, values)
    positive = strength > 0
    inv = positive / torch.where(positive, strength, 1.0)
    dangling = (~positive).to(values.dtype).unsqueeze(1)
    edge = (values * inv[rows]).unsqueeze(1)
    x = torch.full_like(p, 1.0 / n)
    threshold = max(n * tol, _rounding_floor(p.dtype))

    def walk(x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x).index_add(0, cols, edge * x[rows])

    return _unrolled_iteration(
        walk, x, p, dangling, damping, None, threshold, max_iter, 0, "personalization vectors"
    )


class _SparsePageRank(torch.autograd.Function):
    """Sparse-CSR PPR with the implicit (adjoint) gradient; see the module docstring."""

    @staticmethod
    def forward(ctx, weights, p, damping, tol, max_iter, block_size):
        x = _sparse_solve(weights, p, float(damping), tol, max_iter, block_size)
        ctx.save_for_backward(weights, p, x, damping)
        ctx.tol, ctx.max_iter = tol, max_iter
        return x

    @staticmethod
    def backward(ctx, g):
        weights, p, x, damping = ctx.saved_tensors
        d, n = float(damping), weights.shape[0]
        ones = torch.ones(n, 1, dtype=x.dtype, device=x.device)
        strength = (weights.detach() @ ones).squeeze(1)
        inv = torch.where(strength > 0, 1.0 / strength, 0.0).unsqueeze(1)
        dangling = (strength == 0).to(x.dtype).unsqueeze(1)

        def apply_t(v: torch.Tensor) -> torch.Tensor:
            return inv * (weights.detach() @ v)

        needs = ctx.needs_input_grad
        v, tv, grad_p, grad_d = _adjoint_grads(
            g, apply_t, x, p, dangling, damping, None, ctx.tol, ctx.max_iter, 0, needs
        )
        grad_w = None
        if needs[0]:
            rows, cols = _csr_rows(weights), weights.col_indices()
            through = (x * tv).sum(dim=1)
            values = d * inv[rows, 0] * ((x[rows] * v[cols]).sum(dim=1) - through[rows])
            grad_w = torch.sparse_csr_tensor(
                weights.crow_indices(), cols, values, weights.shape, check_invariants=False
            )
        return grad_w, grad_p, grad_d, None, None, None
