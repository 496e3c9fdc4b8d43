"""Batched entropic optimal transport for many small problems at once.

Two solvers over the same entropic problem
``min_P <P, C> + epsilon * KL(P | a b^T)`` subject to ``P 1 = a``, ``P^T 1 = b``:

- :func:`sinkhorn`: log-domain iterations (``logsumexp``), stable for any ``epsilon``,
  any batch shape and any cost; the general tool.
- :func:`sinkhorn_shared_cost`: kernel-domain iterations for the case where many
  problems share one cost matrix (all edges of one graph transport over the same
  shortest-path metric). One kernel ``exp(-C / epsilon)`` per group is multiplied by
  all the group's scaling vectors in one batched matrix product, which is what makes
  thousands of graphs per second possible on a CPU. Its kernel must not underflow on
  the supports, so the caller keeps ``C / epsilon`` within the dtype's exponent range
  (see :func:`max_cost_over_epsilon`).

Both return the transport cost ``<P, C>`` of the entropic plan (not the regularized
objective), whether each problem converged, and the scalings for warm starts.

Two tools turn an approximate solve into a certified or exact one:

- :func:`transport_bounds`: from any dual potentials, a lower bound on the exact cost
  ``W`` (the dual objective of their c-transforms) and an upper bound (the cost of the
  entropic plan rounded onto the marginals, Altschuler, Weed and Rigollet, "Near-linear
  time approximation algorithms for optimal transport via Sinkhorn iteration"); the
  exact ``W`` lies between them, so their gap certifies the error.
- :func:`emd`: exact transport cost by POT's network simplex, one problem at a time on
  the CPU (about 10-50 us per problem of 5-20 points), for the problems a certificate
  does not cover.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "SinkhornResult",
    "sinkhorn",
    "sinkhorn_shared_cost",
    "sinkhorn_shared_cost_scaled",
    "max_cost_over_epsilon",
    "TransportBounds",
    "transport_bounds",
    "emd",
    "emd_many",
]


@dataclass(frozen=True)
class SinkhornResult:
    """Output of the Sinkhorn solvers.

    Attributes
    ----------
    cost : torch.Tensor, shape (...)
        ``<P, C>`` for the final plan of each problem.
    converged : torch.Tensor, shape (...), bool
        Whether the L1 marginal error of each problem fell below ``tol``.
    error : torch.Tensor, shape (...)
        Final L1 error of the row marginal (the column marginal is exact after the
        last half-step).
    iterations : int
        Sinkhorn iterations run: the most of any problem (:func:`sinkhorn` runs the whole
        batch alike; :func:`sinkhorn_shared_cost` stops each group on its own).
    f, g : torch.Tensor, shape (..., n) and (..., m)
        Dual potentials (log-domain solver) or scalings ``u``, ``v`` (kernel-domain
        solver); pass them back as ``init`` to warm-start.
    """

    cost: torch.Tensor
    converged: torch.Tensor
    error: torch.Tensor
    iterations: int
    f: torch.Tensor
    g: torch.Tensor


def max_cost_over_epsilon(dtype: torch.dtype) -> float:
    """Largest ``C / epsilon`` whose kernel ``exp(-C / epsilon)`` stays a normal number,
    with a margin for the products of scalings (half the exponent range)."""
    return 0.5 * -math.log(torch.finfo(dtype).tiny)


def _check_marginals(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape[:-1] != b.shape[:-1]:
        raise ValueError(
            f"a and b must share their batch shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    for name, m in (("a", a), ("b", b)):
        if not torch.isfinite(m).all() or (m < 0).any():
            raise ValueError(f"{name} must be finite and non-negative")
    mass_a, mass_b = a.sum(-1), b.sum(-1)
    if ((mass_a - mass_b).abs() > 1e-5 * mass_a.clamp_min(1.0)).any():
        raise ValueError("a and b must carry the same total mass (within 1e-5) in every problem")


def _check_epsilon(
    epsilon: float | torch.Tensor, batch_shape: torch.Size, like: torch.Tensor
) -> torch.Tensor:
    eps = torch.as_tensor(epsilon, dtype=like.dtype, device=like.device)
    if not torch.isfinite(eps).all() or (eps <= 0).any():
        raise ValueError(f"epsilon must be positive and finite, got {epsilon}")
    try:
        return eps.expand(batch_shape).contiguous() if eps.dim() == 0 else eps
    except RuntimeError as exc:
        raise ValueError(f"epsilon of shape {tuple(eps.shape)} does not fit {batch_shape}") from exc


def sinkhorn(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    *,
    epsilon: float | torch.Tensor,
    max_iter: int = 1000,
    tol: float = 1e-6,
    check_every: int = 10,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> SinkhornResult:
    """Log-domain Sinkhorn over any leading batch shape.

    Iterates ``f <- eps log a - eps LSE_j((g_j - C_ij) / eps)`` and the symmetric
    update of ``g``; nothing is exponentiated outside ``logsumexp``, so no epsilon
    underflows in float32. Zero-mass entries get ``-inf`` potentials and carry nothing;
    infinite costs are allowed where they meet zero mass.

    Parameters
    ----------
    a : torch.Tensor, shape (..., n)
        Source masses.
    b : torch.Tensor, shape (..., m)
        Target masses, same totals as ``a``.
    cost : torch.Tensor, shape (..., n, m)
        Costs; broadcast against the batch shape of ``a`` (e.g. ``(B, 1, n, m)`` shared
        by the ``E`` problems of a group ``(B, E, n)``).
    epsilon : float or torch.Tensor, shape (...) or broadcastable
        Entropic regularization, in the units of ``cost``.
    max_iter : int
        Maximum iterations.
    tol : float
        Stop when every problem's L1 row-marginal error is below ``tol``.
    check_every : int
        Iterations between error checks.
    init : (f, g), optional
        Potentials from an earlier call (warm start).

    Returns
    -------
    SinkhornResult
        With ``f``, ``g`` the dual potentials.

    Examples
    --------
    >>> a = torch.tensor([0.5, 0.5]); b = torch.tensor([0.5, 0.5])
    >>> cost = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    >>> out = sinkhorn(a, b, cost, epsilon=0.01)
    >>> round(out.cost.item(), 6), bool(out.converged)
    (0.0, True)
    """
    _check_marginals(a, b)
    if max_iter < 1 or check_every < 1:
        raise ValueError(f"max_iter and check_every must be >= 1, got {max_iter}, {check_every}")
    batch = a.shape[:-1]
    try:
        cost = cost.expand(*batch, a.shape[-1], b.shape[-1])
    except RuntimeError as exc:
        raise ValueError(
            f"cost of shape {tuple(cost.shape)} does not broadcast to "
            f"{(*batch, a.shape[-1], b.shape[-1])}"
        ) from exc
    if cost.isnan().any() or (cost < 0).any():
        raise ValueError("cost must be non-negative and not NaN")
    eps = _check_epsilon(epsilon, batch, a)[..., None]
    log_a, log_b = a.log(), b.log()
    neg_c = -cost / eps[..., None]
    if init is None:
        f = torch.zeros_like(a)
        g = torch.zeros_like(b)
    else:
        f, g = init
    error = torch.full(batch, math.inf, dtype=a.dtype, device=a.device)
    iterations = 0
    while iterations < max_iter:
        steps = min(check_every, max_iter - iterations)
        for _ in range(steps):
            f = eps * (log_a - torch.logsumexp(neg_c + (g / eps)[..., None, :], dim=-1))
            g = eps * (log_b - torch.logsumexp(neg_c + (f / eps)[..., :, None], dim=-2))
        iterations += steps
        log_plan = neg_c + (f / eps)[..., :, None] + (g / eps)[..., None, :]
        error = (log_plan.exp().sum(-1) - a).abs().sum(-1)
        if bool((error < tol).all()):
            break
    plan = (neg_c + (f / eps)[..., :, None] + (g / eps)[..., None, :]).exp()
    transport = (plan * cost.masked_fill(plan == 0, 0.0)).sum((-2, -1))
    return SinkhornResult(transport, error < tol, error, iterations, f, g)


def sinkhorn_shared_cost(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    *,
    epsilon: float | torch.Tensor,
    max_iter: int = 100,
    tol: float = 1e-4,
    check_every: int = 10,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
    center: float | torch.Tensor = 0.0,
) -> SinkhornResult:
    """Kernel-domain Sinkhorn for groups of problems that share one cost matrix.

    For group ``k`` with kernel ``K = exp(-C_k / eps_k)`` the E problems of the group
    update ``v <- b / (u K)`` and ``u <- a / (v K^T)`` as two batched matrix products
    ``(E, n) @ (n, m)``. A group stops at the first check where all its problems meet
    ``tol`` (the other groups go on), so it gets the iterations it would get alone: its
    result does not depend on the batch it is solved in.

    Parameters
    ----------
    a : torch.Tensor, shape (B, E, n)
        Source masses of the E problems of each of the B groups.
    b : torch.Tensor, shape (B, E, m)
        Target masses, same totals as ``a``.
    cost : torch.Tensor, shape (B, n, m)
        One cost matrix per group; may be ``inf`` where either mass is zero.
    epsilon : float or torch.Tensor, shape (B,)
        Regularization per group. ``|cost - center| / epsilon`` must stay below
        :func:`max_cost_over_epsilon` wherever both masses are positive: beyond it the
        kernel sits at a floor (``exp(-1.5 * limit)``), the plan stays feasible and finite,
        but costs there are no longer told apart.
    max_iter, tol, check_every
        As in :func:`sinkhorn`; ``tol`` bounds the L1 row-marginal error.
    init : (u, v), optional
        Scalings from an earlier call with the same ``epsilon`` (warm start; the
        iteration starts from ``u``, so a different ``center`` is absorbed by ``v``).
    center : float or torch.Tensor, shape (B,)
        A constant per group taken off the cost inside the kernel,
        ``K = exp((center - C) / epsilon)``. The scalings absorb it, so the plan and its
        cost do not change; with ``center`` at half the largest cost that matters, costs
        spanning twice :func:`max_cost_over_epsilon` times ``epsilon`` are told apart.

    Returns
    -------
    SinkhornResult
        With ``f``, ``g`` the scalings ``u``, ``v`` (shape (B, E, n), (B, E, m)).
    """
    _check_marginals(a, b)
    if a.dim() != 3:
        raise ValueError(f"a must have shape (B, E, n), got {tuple(a.shape)}")
    bsz, _, n = a.shape
    m = b.shape[-1]
    if cost.shape != (bsz, n, m):
        raise ValueError(f"cost must have shape ({bsz}, {n}, {m}), got {tuple(cost.shape)}")
    if cost.isnan().any() or (cost < 0).any():
        raise ValueError("cost must be non-negative and not NaN")
    if max_iter < 1 or check_every < 1:
        raise ValueError(f"max_iter and check_every must be >= 1, got {max_iter}, {check_every}")
    eps = _check_epsilon(epsilon, torch.Size([bsz]), a)
    shift = torch.as_tensor(center, dtype=a.dtype, device=a.device).expand(bsz)
    if not torch.isfinite(shift).all():
        raise ValueError(f"center must be finite, got {center}")
    if (a.sum(-1) <= 0).any():
        raise ValueError("every problem must carry positive mass")
    return _shared_cost_sinkhorn(
        a, b, cost, eps, shift, max_iter=max_iter, tol=tol, check_every=check_every, init=init
    )


def _shared_cost_sinkhorn(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    eps: torch.Tensor,
    center: torch.Tensor,
    *,
    max_iter: int,
    tol: float,
    check_every: int = 10,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> SinkhornResult:
    """:func:`sinkhorn_shared_cost` on checked input: ``eps`` and ``center`` of shape (B,)
    in the dtype of ``a`` (the solver's hot path; callers that built their input
    themselves, such as the Ricci flow, call it directly)."""
    bsz = a.shape[0]
    eps, shift = eps.view(bsz, 1, 1), center.view(bsz, 1, 1)
    # A floor far below every kernel entry that matters (those are >= exp(-limit)) keeps
    # each denominator positive, so the loop needs no clamping.
    floor = math.exp(-1.5 * max_cost_over_epsilon(a.dtype))
    kernel = torch.exp((shift - cost) / eps).clamp_min(floor)
    weighted = torch.where(torch.isfinite(cost), kernel * cost, torch.zeros_like(kernel))
    kernel_t = kernel.transpose(1, 2)
    u = (a > 0).to(a.dtype) if init is None else init[0]
    # v <- b / (u K), u <- a / (v K^T), checked every check_every iterations on the
    # v K^T that the next u update needs anyway
    v = b / torch.bmm(u, kernel)
    back = torch.bmm(v, kernel_t)
    iterations = 0
    # A group leaves the iteration at the first check where all its problems meet tol
    # (the others go on), so each group gets the iterations it would get alone: the
    # result does not depend on the batch it was solved in.
    out = None  # (rows still iterating, full u, full v, full error) once a group left
    while True:
        for _ in range(min(check_every, max_iter - iterations)):
            u = a / back
            v = b / torch.bmm(u, kernel)
            back = torch.bmm(v, kernel_t)
        iterations = min(iterations + check_every, max_iter)
        error = (u * back - a).abs().sum(-1)
        if iterations >= max_iter:
            break
        done = (error < tol).all(-1)
        if bool(done.all()):
            break
        if u.shape[0] > 1 and bool(done.any()):
            if out is None:
                rows = torch.arange(bsz, device=a.device)
                out = (rows, u.clone(), v.clone(), error.clone())
            rows = out[0]
            for full, part in zip(out[1:], (u, v, error)):
                full.index_copy_(0, rows[done], part[done])
            left = (~done).nonzero().squeeze(1)
            a, b, u, v, back = (t.index_select(0, left) for t in (a, b, u, v, back))
            kernel = kernel.index_select(0, left)
            kernel_t = kernel.transpose(1, 2)
            out = (rows[left], *out[1:])
    if out is not None:
        rows, *full = out
        for whole, part in zip(full, (u, v, error)):
            whole.index_copy_(0, rows, part)
        u, v, error = full
    transport = (torch.bmm(u, weighted) * v).sum(-1)
    converged = (error < tol) & torch.isfinite(transport)
    return SinkhornResult(transport, converged, error, iterations, u, v)


def sinkhorn_shared_cost_scaled(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    *,
    epsilon: float | torch.Tensor,
    start: float | torch.Tensor,
    factor: float = 0.5,
    stage_iter: int = 100,
    max_iter: int = 1000,
    tol: float = 1e-5,
    center: float | torch.Tensor = 0.0,
) -> SinkhornResult:
    """:func:`sinkhorn_shared_cost` with epsilon scaling.

    Solves at ``start``, ``start * factor``, ... down to ``epsilon``, each stage
    warm-started from the potentials ``f = eps log u`` of the one before. At small
    ``epsilon`` on degenerate problems (many equal path lengths) plain Sinkhorn needs
    tens of thousands of iterations; the scaled schedule reaches the same plan in a
    fraction of them.

    Parameters
    ----------
    a, b, cost, center
        As in :func:`sinkhorn_shared_cost`.
    epsilon, start : float or torch.Tensor, shape (B,)
        Final and first regularization of each group (``start`` is raised to
        ``epsilon`` where it is smaller, e.g. a graph without edges).
    factor : float
        Ratio of successive stages, in (0, 1).
    stage_iter : int
        Iteration cap of every stage but the last.
    max_iter, tol : int, float
        Iteration cap and L1 marginal tolerance of the last stage (every stage stops
        early once it reaches ``tol``).

    Returns
    -------
    SinkhornResult
        That of the last stage, with ``iterations`` summed over the stages.
    """
    if not 0.0 < factor < 1.0:
        raise ValueError(f"factor must lie in (0, 1), got {factor}")
    if stage_iter < 1:
        raise ValueError(f"stage_iter must be >= 1, got {stage_iter}")
    eps = _check_epsilon(epsilon, torch.Size([a.shape[0]]), a)
    first = torch.as_tensor(start, dtype=a.dtype, device=a.device).expand(a.shape[0])
    if not torch.isfinite(first).all() or (first < 0).any():
        raise ValueError(f"start must be finite and non-negative, got {start}")
    first = torch.maximum(first, eps)
    stages = int(torch.ceil(torch.log(first / eps) / -math.log(factor)).max()) if a.numel() else 0
    init, total = None, 0
    for stage in range(stages + 1):
        stage_eps = torch.maximum(first * factor**stage, eps)
        last = stage == stages
        out = sinkhorn_shared_cost(
            a,
            b,
            cost,
            epsilon=stage_eps,
            tol=tol,
            center=center,
            max_iter=max_iter if last else stage_iter,
            init=init,
        )
        total += out.iterations
        if not last:
            next_eps = torch.maximum(first * factor ** (stage + 1), eps)
            # u and v are defined up to a factor per problem: balance their largest
            # entries so that neither the power nor the next products overflow
            log_u = torch.where(a > 0, out.f.log(), -math.inf).amax(-1, keepdim=True)
            log_v = torch.where(b > 0, out.g.log(), -math.inf).amax(-1, keepdim=True)
            u = out.f * torch.exp((log_v - log_u) / 2)
            u = u.pow((stage_eps / next_eps).view(-1, 1, 1))
            init = (u, out.g) if bool(torch.isfinite(u).all()) else None
    return SinkhornResult(out.cost, out.converged, out.error, total, out.f, out.g)


@dataclass(frozen=True)
class TransportBounds:
    """Certified bounds on the exact transport cost.

    Attributes
    ----------
    lower : torch.Tensor, shape (...)
        Dual objective of the c-transformed potentials: ``lower <= W`` (``-inf`` where
        the potentials carry no information, e.g. NaN).
    upper : torch.Tensor, shape (...)
        Cost of a feasible plan (the entropic plan rounded onto the marginals):
        ``W <= upper``.
    """

    lower: torch.Tensor
    upper: torch.Tensor


def transport_bounds(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    f: torch.Tensor,
    g: torch.Tensor,
    epsilon: float | torch.Tensor,
) -> TransportBounds:
    """Lower and upper bounds on the exact cost ``W(a, b)`` from dual potentials.

    The plan behind ``(f, g)`` is ``P_ij = exp((f_i + g_j - C_ij) / epsilon)`` (the
    log-domain potentials of :func:`sinkhorn`; for the scalings of
    :func:`sinkhorn_shared_cost` take ``f = eps log u + center``, ``g = eps log v``).

    - lower: ``g'_j = min_i C_ij - f_i``, ``f'_i = min_j C_ij - g'_j`` over the supports
      satisfy ``f'_i + g'_j <= C_ij``, so ``<a, f'> + <b, g'> <= W`` by weak duality;
    - upper: ``P`` is scaled down to fit the row and then the column marginals, and the
      missing mass is joined by the product of the two deficits (Altschuler et al.'s
      rounding); the result is feasible, so its cost is at least ``W``.

    Computed in log space: no exponent overflows however far the potentials are from
    converged, and NaN potentials give ``lower = -inf`` (no certificate).

    Parameters
    ----------
    a : torch.Tensor, shape (..., n)
    b : torch.Tensor, shape (..., m)
        Non-negative masses with equal totals per problem.
    cost : torch.Tensor, shape (..., n, m)
        Finite where both masses are positive (read only there).
    f : torch.Tensor, shape (..., n)
    g : torch.Tensor, shape (..., m)
        Dual potentials (read only on the supports).
    epsilon : float or torch.Tensor, shape (...)
        Regularization of the plan behind the potentials.

    Returns
    -------
    TransportBounds
    """
    src, dst = a > 0, b > 0
    both = src[..., :, None] & dst[..., None, :]
    c = torch.where(both, cost, torch.zeros_like(cost))
    f = torch.where(src & ~f.isnan(), f, -math.inf)
    g = torch.where(dst & ~g.isnan(), g, -math.inf)
    # lower bound: two c-transforms (g' from f, then f' from g')
    inf = torch.full_like(c, math.inf)
    g_c = torch.where(both, c - f[..., :, None], inf).amin(-2)
    f_c = torch.where(both, c - g_c[..., None, :], inf).amin(-1)
    lower = torch.where(src, a * f_c, 0.0).sum(-1) + torch.where(dst, b * g_c, 0.0).sum(-1)
    lower = torch.where(torch.isfinite(lower), lower, -math.inf)
    # upper bound: the rounded plan, in log space
    eps = torch.as_tensor(epsilon, dtype=a.dtype, device=a.device)
    eps = eps.expand(a.shape[:-1])[..., None, None]
    log_plan = torch.where(both, (f[..., :, None] + g[..., None, :] - c) / eps, -math.inf)
    log_rows = torch.logsumexp(log_plan, -1)
    shrink = torch.where(src, (a.log() - log_rows).clamp_max(0.0), 0.0)
    log_plan = log_plan + shrink[..., :, None]
    log_cols = torch.logsumexp(log_plan, -2)
    shrink = torch.where(dst, (b.log() - log_cols).clamp_max(0.0), 0.0)
    plan = torch.where(both, (log_plan + shrink[..., None, :]).exp(), 0.0)
    short_a = (a - plan.sum(-1)).clamp_min(0.0)
    short_b = (b - plan.sum(-2)).clamp_min(0.0)
    missing = short_a.sum(-1)
    joined = (short_a[..., :, None] * c * short_b[..., None, :]).sum((-2, -1))
    upper = (plan * c).sum((-2, -1)) + torch.where(missing > 0, joined / missing, 0.0)
    return TransportBounds(lower, upper)


def emd_many(problems: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """Exact transport cost of each ``(a, b, cost)`` (numpy, float64, any sizes) by POT's
    network simplex (its C++ solver, minus ``ot.emd2``'s per-call checks).

    Zero masses are dropped before the solve; ``b`` is rescaled to the total of ``a``
    (the solver wants equal totals to rounding). An empty problem costs 0.
    """
    from ot.lp.emd_wrap import check_result, emd_c

    out = []
    for a, b, cost in problems:
        rows, cols = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
        if len(rows) == 0 or len(cols) == 0:
            out.append(0.0)
            continue
        x, y = a[rows], b[cols]
        y = y * (x.sum() / y.sum())
        _, value, _, _, code = emd_c(
            x, y, np.ascontiguousarray(cost[np.ix_(rows, cols)]), 1_000_000, 1
        )
        check_result(code)
        out.append(value)
    return np.asarray(out, dtype=np.float64)


def emd(a: torch.Tensor, b: torch.Tensor, cost: torch.Tensor) -> torch.Tensor:
    """Exact transport cost of each problem by POT's network simplex (CPU, float64).

    A Python loop over the problems calls POT's C++ solver on the supports of the two
    masses (:func:`emd_many`); meant for the problems a certificate does not cover, and
    for small supports, where it is cheaper than Sinkhorn on a CPU.

    Parameters
    ----------
    a : torch.Tensor, shape (P, n)
    b : torch.Tensor, shape (P, m)
        Non-negative masses with equal totals (to rounding).
    cost : torch.Tensor, shape (P, n, m)
        Finite where both masses are positive.

    Returns
    -------
    torch.Tensor, shape (P,)
        ``W(a_p, b_p)``, in the dtype and on the device of ``a``; 0 for empty problems.
    """
    a64 = a.detach().to("cpu", torch.float64).numpy()
    b64 = b.detach().to("cpu", torch.float64).numpy()
    c64 = cost.detach().to("cpu", torch.float64).numpy()
    out = emd_many(zip(a64, b64, c64))
    return torch.from_numpy(out).to(dtype=a.dtype, device=a.device)
