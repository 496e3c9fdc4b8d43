"""Dense batched personalized PageRank: graphs (B, N, N), each stopped at its own first
converged step, with an implicit or unrolled gradient (see
:mod:`georag.geometry.diffusion`)."""

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


def _dense_ppr(
    weights: torch.Tensor,
    personalization: torch.Tensor,
    damping: float | torch.Tensor,
    tol: float,
    max_iter: int,
    mask: torch.Tensor | None,
    grad: str,
) -> torch.Tensor:
    if weights.dim() != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"weights must have shape (B, N, N), got {tuple(weights.shape)}")
    b, n, _ = weights.shape
    if personalization.shape != (b, n):
        raise ValueError(
            f"personalization must have shape ({b}, {n}), got {tuple(personalization.shape)}"
        )
    _check_weights(weights.detach())
    personalization = personalization.to(weights.dtype)
    if mask is not None:
        if mask.shape != (b, n) or mask.dtype != torch.bool:
            raise ValueError(
                f"mask must be a bool tensor of shape ({b}, {n}), "
                f"got {mask.dtype} {tuple(mask.shape)}"
            )
        personalization = personalization.masked_fill(~mask, 0.0)
    p = _normalize_personalization(personalization, dim=1)
    keep = None if mask is None else mask.to(weights.dtype)
    if not _needs_grad(weights, p, damping):
        return _dense_solve(weights, p, float(damping), keep, tol, max_iter)[0]
    damping = torch.as_tensor(damping, dtype=weights.dtype, device=weights.device)
    if grad == "unrolled":
        return _dense_unrolled(weights, p, damping, keep, tol, max_iter)
    return _DensePageRank.apply(weights, p, damping, keep, tol, max_iter)


def _dense_structure(
    weights: torch.Tensor, keep: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse strengths, dangling indicator, start vector and graph sizes (no autograd)."""
    b, n, _ = weights.shape
    if keep is None:
        strength = weights.sum(dim=2)
        size = torch.full((b,), float(n), dtype=weights.dtype, device=weights.device)
        x = torch.full((b, n), 1.0 / n, dtype=weights.dtype, device=weights.device)
    else:
        strength = torch.bmm(weights, keep.unsqueeze(2)).squeeze(2)
        size = keep.sum(dim=1)
        x = keep / size.clamp_min(1.0).unsqueeze(1)
    inv = torch.where(strength > 0, 1.0 / strength, 0.0)
    dangling = (strength == 0).to(weights.dtype)
    if keep is not None:
        dangling = dangling * keep
    return inv, dangling, x, size


def _dense_solve(
    weights: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    keep: torch.Tensor | None,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The power iteration without autograd; returns ``(x, inv, dangling)``."""
    b = weights.shape[0]
    inv, dangling, x, size = _dense_structure(weights, keep)
    # x T = (x / s) W: scaling the iterate instead of the matrix allocates no (B, N, N)
    # buffer; masked columns are left out of s and zeroed in each iterate instead.
    teleport = ((1.0 - damping) * p).unsqueeze(1)
    threshold = (size * tol).clamp_min(_rounding_floor(weights.dtype))
    done = torch.zeros(b, dtype=torch.bool, device=weights.device)
    for _ in range(max_iter):
        x_new = torch.baddbmm(teleport, (x * inv).unsqueeze(1), weights, alpha=damping)
        x_new = x_new.squeeze(1).add_(p * (x * dangling).sum(dim=1, keepdim=True), alpha=damping)
        if keep is not None:
            x_new.mul_(keep)
        err = (x_new - x).abs_().sum(dim=1)
        x = torch.where(done.unsqueeze(1), x, x_new)
        done |= err < threshold
        if bool(done.all()):
            return x, inv, dangling
    raise PowerIterationFailedConvergence(
        f"{int((~done).sum())} of {b} graphs did not converge in {max_iter} iterations"
    )


def _dense_unrolled(
    weights: torch.Tensor,
    p: torch.Tensor,
    damping: torch.Tensor,
    keep: torch.Tensor | None,
    tol: float,
    max_iter: int,
) -> torch.Tensor:
    """The same iteration as :func:`_dense_solve`, out of place, under autograd."""
    with torch.no_grad():
        _, dangling, x, size = _dense_structure(weights, keep)
    if keep is None:
        strength = weights.sum(dim=2)
    else:
        strength = torch.bmm(weights, keep.unsqueeze(2)).squeeze(2)
    positive = strength > 0
    inv = positive / torch.where(positive, strength, 1.0)  # no 1/0 on the autograd tape
    threshold = (size * tol).clamp_min(_rounding_floor(weights.dtype))

    def walk(x: torch.Tensor) -> torch.Tensor:
        return torch.bmm((x * inv).unsqueeze(1), weights).squeeze(1)

    return _unrolled_iteration(
        walk, x, p, dangling, damping, keep, threshold, max_iter, 1, "graphs"
    )


class _DensePageRank(torch.autograd.Function):
    """Dense PPR with the implicit (adjoint) gradient; see the module docstring."""

    @staticmethod
    def forward(ctx, weights, p, damping, keep, tol, max_iter):
        x, inv, dangling = _dense_solve(weights, p, float(damping), keep, tol, max_iter)
        ctx.save_for_backward(weights, p, x, inv, dangling, damping)
        ctx.keep, ctx.tol, ctx.max_iter = keep, tol, max_iter
        return x

    @staticmethod
    def backward(ctx, g):
        weights, p, x, inv, dangling, damping = ctx.saved_tensors
        d, keep = float(damping), ctx.keep

        def apply_t(v: torch.Tensor) -> torch.Tensor:
            return inv * torch.bmm(weights, v.unsqueeze(2)).squeeze(2)

        needs = ctx.needs_input_grad
        v, tv, grad_p, grad_d = _adjoint_grads(
            g, apply_t, x, p, dangling, damping, keep, ctx.tol, ctx.max_iter, 1, needs
        )
        grad_w = None
        if needs[0]:
            grad_w = (d * x * inv).unsqueeze(2) * (v.unsqueeze(1) - tv.unsqueeze(2))
            if keep is not None:
                grad_w = grad_w * keep.unsqueeze(1)
        return grad_w, grad_p, grad_d, None, None, None
