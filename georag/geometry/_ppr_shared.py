"""What the dense and sparse PageRank paths share: input checks, the rounding floor of the
stopping rule, the adjoint power iteration of the implicit gradient, and the error of a
run that did not converge (see :mod:`georag.geometry.diffusion`)."""

from __future__ import annotations

from collections.abc import Callable

import torch


class PowerIterationFailedConvergence(RuntimeError):
    """Raised when the power iteration has not converged within ``max_iter`` steps."""


def _needs_grad(*tensors: object) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors
    )


def _check_weights(values: torch.Tensor) -> None:
    if not values.is_floating_point():
        raise ValueError(f"weights must be floating point, got {values.dtype}")
    if not values.numel():
        return
    low, high = torch.aminmax(values)  # one pass; NaN propagates into both
    if low.isnan() or high.isinf():
        raise ValueError("weights hold non-finite values (NaN or inf)")
    if low < 0:
        raise ValueError(f"weights must be non-negative, got minimum {low.item()}")


def _normalize_personalization(p: torch.Tensor, dim: int) -> torch.Tensor:
    if not p.numel():
        raise ValueError(f"personalization is empty, shape {tuple(p.shape)}")
    low, high = torch.aminmax(p)
    if low.isnan() or high.isinf():
        raise ValueError("personalization holds non-finite values (NaN or inf)")
    if low < 0:
        raise ValueError(f"personalization must be non-negative, got minimum {low.item()}")
    total = p.sum(dim=dim, keepdim=True)
    if (total <= 0).any():
        bad = (total <= 0).flatten().nonzero().flatten().tolist()
        raise ValueError(
            f"personalization has no positive entry in vector(s) {bad[:10]}"
            f"{' ...' if len(bad) > 10 else ''}; every vector needs a positive entry"
        )
    return p / total


def _rounding_floor(dtype: torch.dtype) -> float:
    """The smallest L1 change (relative to the iterate's L1 norm) a solve waits for.

    Sixteen machine epsilons: a smaller change is rounding noise, and whether an iterate
    gets below it depends on the CPU's summation order (float32 at ``tol=1e-7`` stalled
    on one machine and not on another).
    """
    return 16.0 * torch.finfo(dtype).eps


def _adjoint(
    g: torch.Tensor,
    apply_t: Callable[[torch.Tensor], torch.Tensor],
    dangling: torch.Tensor,
    p: torch.Tensor,
    damping: float,
    keep: torch.Tensor | None,
    tol: float,
    max_iter: int,
    dim: int,
) -> torch.Tensor:
    """Solve ``v = g + damping * (T v + delta (p . v))`` by fixed-point iteration.

    ``apply_t(v)`` is ``T v``; vectors run along ``dim`` (1: dense rows, 0: sparse
    columns). Each vector stops at its first step whose L1 change is at most
    ``max(tol, floor) * ||g||_1``, with the floor of :func:`_rounding_floor`.
    """
    threshold = max(tol, _rounding_floor(g.dtype)) * g.abs().sum(dim=dim)
    done = torch.zeros_like(threshold, dtype=torch.bool)
    v = g if keep is None else g * keep
    for _ in range(max_iter):
        v_new = g + damping * (apply_t(v) + dangling * (p * v).sum(dim=dim, keepdim=True))
        if keep is not None:
            v_new = v_new * keep
        err = (v_new - v).abs().sum(dim=dim)
        v = torch.where(done.unsqueeze(dim), v, v_new)
        done |= err <= threshold
        if bool(done.all()):
            return v
    raise PowerIterationFailedConvergence(
        f"the adjoint of {int((~done).sum())} of {done.numel()} PageRank vectors did not "
        f"converge in {max_iter} iterations"
    )


def _adjoint_grads(g, apply_t, x, p, dangling, damping, keep, tol, max_iter, dim, needs):
    """The adjoint ``v`` of an upstream gradient ``g``, ``T v`` (``apply_t(v)``), and the
    gradients in the personalization and in ``damping`` (module docstring of
    :mod:`georag.geometry.diffusion`; None where ``needs``, the autograd flags of
    ``(weights, p, damping)``, says it is not asked)."""
    d = float(damping)
    v = _adjoint(g, apply_t, dangling, p, d, keep, tol, max_iter, dim=dim)
    tv = apply_t(v)
    pv = (p * v).sum(dim=dim, keepdim=True)
    xd = (x * dangling).sum(dim=dim, keepdim=True)
    grad_p = (1.0 - d) * v + d * xd * v if needs[1] else None
    grad_d = ((x * tv).sum() + (xd * pv).sum() - pv.sum()).to(damping.dtype) if needs[2] else None
    return v, tv, grad_p, grad_d


def _unrolled_iteration(walk, x, p, dangling, damping, keep, threshold, max_iter, dim, what):
    """The power iteration out of place, under autograd, from ``x``; ``walk(x)`` is the
    step ``x T`` and ``dim`` the node dimension (1: dense (B, N) rows, 0: sparse (N, Q)
    columns). Each graph or column keeps its first converged iterate; ``what`` names them
    in the error of a run that did not converge."""
    done = torch.zeros(x.shape[1 - dim], dtype=torch.bool, device=x.device)
    for _ in range(max_iter):
        x_new = damping * (walk(x) + p * (x * dangling).sum(dim=dim, keepdim=True))
        x_new = x_new + (1.0 - damping) * p
        if keep is not None:
            x_new = x_new * keep
        err = (x_new - x).detach().abs().sum(dim=dim)
        x = torch.where(done.unsqueeze(dim), x, x_new)
        done = done | (err < threshold)
        if bool(done.all()):
            return x
    raise PowerIterationFailedConvergence(
        f"{int((~done).sum())} of {len(done)} {what} did not converge in {max_iter} iterations"
    )
