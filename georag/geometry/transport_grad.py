"""Differentiable optimal transport: entropic costs with implicit or unrolled gradients,
and the exact cost with the gradient of its linear program.

For marginals ``a`` (..., n), ``b`` (..., m) of equal mass and costs ``C`` (..., n, m), the
entropic plan ``P`` solves ``min_P <P, C> + epsilon KL(P | a b^T)`` under ``P 1 = a``,
``P^T 1 = b``. Two values of it are offered, as in POT's ``sinkhorn2`` / ``solve``:

- ``value="regularized"``: ``OT_eps = <P, C> + epsilon KL(P | a b^T)`` (generalized KL,
  ``sum P log(P / ab) - sum P + sum ab``). With ``grad="implicit"`` its gradient comes
  from the envelope theorem: ``d/dC`` is the plan, ``d/da`` and ``d/db`` are the dual
  potentials of the ``a b^T`` kernel, centred, and ``d/depsilon`` is the KL term. Nothing
  of the iterations is kept.
- ``value="linear"``: ``<P, C>``, the transport cost of the entropic plan (what
  :mod:`georag.geometry.ricci` uses). Its ``grad="implicit"`` differentiates the optimality
  conditions at the fixed point (implicit function theorem): one ``m x m`` linear solve per
  problem (the Schur complement of the dual Hessian), again without the iterations.

``grad="unrolled"`` runs autograd through the log-domain loop (needs positive masses).
Implicit is the default whenever an input requires grad.

Gradients with respect to ``a`` and ``b`` are defined along perturbations that keep the
masses balanced, so only up to a constant: they are returned centred (mean 0 over each
support, the same shift on every entry), the convention of POT's ``emd2``. At a zero mass
the gradient is the one-sided derivative as mass enters there: for the regularized value
the c-transform of the other potential; for the linear value ``x_k = sum_j pi_kj (C_kj -
y_j)`` (``pi_k`` the kernel row of ``k`` weighted by the other scaling, normalized: the
row the plan would get) and symmetrically for ``y``; for the exact cost the c-transform
``min_j C_kj - g_j``. So the gradient is continuous where a mass reaches zero, and a
caller that splits a signed quantity into ``a`` and ``b`` can take the mean of the two
one-sided derivatives at a tie (as :mod:`georag.geometry.ricci.grad` does).

Where the plan nearly falls apart into blocks (costs between them many epsilon apart)
the potentials' offset between the blocks is ill-determined at any finite tolerance, and
so is the marginals' gradient along moving mass between blocks; the cost gradient is not
affected.

:func:`exact_transport` is the unregularized cost (POT's network simplex per problem, CPU)
with the gradient of the linear program: the optimal plan for ``C`` and the centred dual
potentials for ``a`` and ``b`` (unique where the optimal plan and potentials are).
"""

from __future__ import annotations

import math

import torch

from georag.geometry.transport import (
    max_cost_over_epsilon,
    sinkhorn,
    sinkhorn_shared_cost,
    sinkhorn_shared_cost_scaled,
)

__all__ = ["VALUES", "GRADS", "sinkhorn_cost", "shared_cost_transport", "exact_transport"]

VALUES = ("regularized", "linear")
GRADS = ("implicit", "unrolled")


def _centred(x: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    count = support.sum(-1, keepdim=True).clamp_min(1)
    mean = x.masked_fill(~support, 0.0).sum(-1, keepdim=True) / count
    return x - mean


def _linear_adjoint(
    plan: torch.Tensor, cost: torch.Tensor, precision: torch.dtype | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Adjoint potentials ``(x, y)`` of the linear cost ``<P, C>`` at the Sinkhorn fixed point.

    Solves ``[[diag(a), P], [P^T, diag(b)]] [x; y] = [P C 1; (P C)^T 1]`` with ``a, b`` the
    plan's own marginals, by eliminating ``x``: ``(diag(b) - P^T diag(1/a) P) y = ...``.
    That Schur complement is symmetric positive semi-definite and singular along the
    constant vector (the gauge ``(x + c, y - c)``), and nearly singular where the plan's
    support almost falls apart into blocks; ``y`` is its truncated pseudo-inverse solution
    (eigenvalues below ``10 sqrt(machine eps)`` times the largest column mass dropped, the
    machine eps of ``precision``, the dtype the plan was solved in; computed in float64),
    which takes the gauge with ``y`` orthogonal to the constants. Entries off the supports
    get 0.
    """
    dtype = plan.dtype
    cutoff = 10 * torch.finfo(precision or dtype).eps ** 0.5
    plan, cost = plan.double(), cost.double()
    rows, cols = plan.sum(-1), plan.sum(-2)
    on_a, on_b = rows > 0, cols > 0
    weighted = plan * cost
    r, c = weighted.sum(-1), weighted.sum(-2)
    inv_a = torch.where(on_a, 1.0 / torch.where(on_a, rows, 1.0), 0.0)
    scaled = plan * inv_a.unsqueeze(-1)
    schur = torch.diag_embed(cols) - plan.transpose(-1, -2) @ scaled
    rhs = (c - (scaled.transpose(-1, -2) @ r.unsqueeze(-1)).squeeze(-1)).masked_fill(~on_b, 0.0)
    values, vectors = torch.linalg.eigh((schur + schur.transpose(-1, -2)) / 2)
    # relative to the largest column mass, the scale of the Schur complement's terms, not
    # to its largest eigenvalue: where every row of the plan sends all its mass to one
    # column (each block a star), the complement is 0 up to rounding, and an eigenvalue
    # of rounding noise kept by a relative cutoff blew the adjoint up to 1e23 (found in
    # learned_ricci training); there y is a free gauge per block and gets 0
    scale = cols.amax(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
    inverse = torch.where(values > cutoff * scale, 1.0 / values, 0.0)
    y = (
        (
            vectors
            @ (inverse * (vectors.transpose(-1, -2) @ rhs.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)
        )
        .squeeze(-1)
        .masked_fill(~on_b, 0.0)
    )
    x = ((r - (plan @ y.unsqueeze(-1)).squeeze(-1)) * inv_a).masked_fill(~on_a, 0.0)
    return x.to(dtype), y.to(dtype)


def _off_support(
    x: torch.Tensor,
    y: torch.Tensor,
    log_kernel: torch.Tensor,
    log_u: torch.Tensor,
    log_v: torch.Tensor,
    cost: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Extend the adjoint ``(x, y)`` of the linear cost to the zero masses.

    ``x_k = sum_j pi_kj (C_kj - y_j)`` with ``pi_kj`` proportional to ``K_kj v_j`` over
    the support of ``b`` (the limit of the adjoint's row ``k`` as ``a_k -> 0``), and
    ``y_j`` likewise with ``K_ij u_i``; 0 where no finite cost reaches a support.

    Parameters
    ----------
    x, log_u : torch.Tensor, shape (..., n)
    y, log_v : torch.Tensor, shape (..., m)
        The adjoint and the log scalings (``-inf`` at the zero masses).
    log_kernel, cost : torch.Tensor, shape (..., n, m)
    """
    on_a, on_b = torch.isfinite(log_u), torch.isfinite(log_v)
    finite = torch.isfinite(cost)
    c = torch.where(finite, cost, 0.0)

    def extend(logits, reach, values, dim):
        logits = logits.masked_fill(~reach, -math.inf)
        some = reach.any(dim)
        weights = torch.softmax(torch.where(some.unsqueeze(dim), logits, 0.0), dim=dim)
        return torch.where(some, (weights * values).masked_fill(~reach, 0.0).sum(dim), 0.0)

    row_reach, col_reach = finite & on_b.unsqueeze(-2), finite & on_a.unsqueeze(-1)
    x_off = extend(log_kernel + log_v.unsqueeze(-2), row_reach, c - y.unsqueeze(-2), -1)
    y_off = extend(log_kernel + log_u.unsqueeze(-1), col_reach, c - x.unsqueeze(-1), -2)
    return torch.where(on_a, x, x_off), torch.where(on_b, y, y_off)


def _linear_grads(
    plan: torch.Tensor,
    log_plan: torch.Tensor,
    cost: torch.Tensor,
    eps: torch.Tensor,
    f: torch.Tensor,
    g: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """Gradients of ``<P, C>`` w.r.t. ``a``, ``b``, ``C`` and ``epsilon`` (per problem).

    With the adjoint ``(x, y)`` and ``Q = P (x_i + y_j - C_ij) / eps``:
    ``d/dC = P + Q``, ``d/deps = sum Q log P``, ``d/da = x``, ``d/db = y`` (centred; at
    the zero masses the one-sided derivative, :func:`_off_support`). ``f``, ``g``: the
    log-domain potentials (``-inf`` at the zero masses).
    """
    x, y = _linear_adjoint(plan, cost)
    e = eps[..., None]
    x, y = _off_support(x, y, -cost / e[..., None], f / e, g / e, cost)
    e = eps[..., None, None]
    q = plan * (x.unsqueeze(-1) + y.unsqueeze(-2) - cost) / e
    d_eps = (q * log_plan.masked_fill(plan == 0, 0.0)).sum((-2, -1))
    return (_centred(x, plan.sum(-1) > 0), _centred(y, plan.sum(-2) > 0), plan + q, d_eps)


class _Transport(torch.autograd.Function):
    """A transport value whose input gradients were computed with it (``solve``)."""

    @staticmethod
    def forward(ctx, a, b, cost, eps, solve):
        value, grads = solve(a.detach(), b.detach(), cost.detach(), eps.detach())
        ctx.save_for_backward(*grads)
        ctx.shapes = (a.shape, b.shape, cost.shape, eps.shape)
        return value

    @staticmethod
    def backward(ctx, grad):
        d_a, d_b, d_c, d_eps = ctx.saved_tensors
        shape_a, shape_b, shape_c, shape_eps = ctx.shapes
        g = grad.to(d_a.dtype)
        out = (g.unsqueeze(-1) * d_a, g.unsqueeze(-1) * d_b, g[..., None, None] * d_c, g * d_eps)
        out = [o.sum_to_size(s) for o, s in zip(out, (shape_a, shape_b, shape_c, shape_eps))]
        return (*out, None)


def _check_choice(value: str, grad: str | None) -> None:
    if value not in VALUES:
        raise ValueError(f"value must be one of {VALUES}, got {value!r}")
    if grad is not None and grad not in GRADS:
        raise ValueError(f"grad must be one of {GRADS} or None, got {grad!r}")


def _log_plan(
    f: torch.Tensor, g: torch.Tensor, cost: torch.Tensor, eps: torch.Tensor
) -> torch.Tensor:
    finite = torch.where(torch.isfinite(cost), cost, 0.0)
    log_plan = (f.unsqueeze(-1) + g.unsqueeze(-2) - finite) / eps[..., None, None]
    zero = ~torch.isfinite(f).unsqueeze(-1) | ~torch.isfinite(g).unsqueeze(-2)
    return log_plan.masked_fill(zero | ~torch.isfinite(cost), -math.inf)


def _regularized(plan, log_plan, a, b, cost, eps):
    """``OT_eps`` from a plan; returns (value, KL)."""
    finite = torch.where(plan > 0, cost, 0.0)
    log_ab = a.log().unsqueeze(-1) + b.log().unsqueeze(-2)
    ratio = torch.where(plan > 0, log_plan - torch.where(plan > 0, log_ab, 0.0), 0.0)
    kl = (plan * ratio).sum((-2, -1)) - plan.sum((-2, -1)) + a.sum(-1) * b.sum(-1)
    return (plan * finite).sum((-2, -1)) + eps * kl, kl


def sinkhorn_cost(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    *,
    epsilon: float | torch.Tensor,
    value: str = "regularized",
    grad: str | None = None,
    max_iter: int = 1000,
    tol: float = 1e-9,
    check_every: int = 10,
) -> torch.Tensor:
    """Entropic transport value, differentiable in ``a``, ``b``, ``cost`` and ``epsilon``.

    Parameters
    ----------
    a : torch.Tensor, shape (..., n)
    b : torch.Tensor, shape (..., m)
        Non-negative masses, equal totals per problem.
    cost : torch.Tensor, shape (..., n, m)
        Broadcast against the batch shape of ``a``; finite where both masses are positive.
    epsilon : float or torch.Tensor, shape (...) or broadcastable
        Regularization, in the units of ``cost``.
    value : {"regularized", "linear"}
        See the module docstring.
    grad : {"implicit", "unrolled"}, optional
        None: implicit. ``"unrolled"`` needs positive masses.
    max_iter, tol, check_every
        Log-domain Sinkhorn (:func:`georag.geometry.transport.sinkhorn`); the implicit
        gradients are exact at the fixed point, so keep ``tol`` tight.

    Returns
    -------
    torch.Tensor, shape (...)

    Examples
    --------
    >>> a = torch.tensor([0.5, 0.5], dtype=torch.float64, requires_grad=True)
    >>> cost = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    >>> sinkhorn_cost(a, a.detach(), cost, epsilon=1e-3).backward()
    >>> cost.grad  # the plan
    tensor([[0.5000, 0.0000],
            [0.0000, 0.5000]], dtype=torch.float64)
    """
    _check_choice(value, grad)
    options = dict(max_iter=max_iter, tol=tol, check_every=check_every)
    eps = torch.as_tensor(epsilon, dtype=a.dtype, device=a.device)
    if grad == "unrolled":
        if not bool((a > 0).all() and (b > 0).all()):
            raise ValueError("grad='unrolled' needs positive masses in a and b")
        out = sinkhorn(a, b, cost, epsilon=eps, **options)
        e = eps.expand(a.shape[:-1])
        log_plan = _log_plan(out.f, out.g, cost.expand(*a.shape, b.shape[-1]), e)
        plan = log_plan.exp()
        full = cost.expand_as(plan)
        if value == "linear":
            return (plan * torch.where(plan > 0, full, 0.0)).sum((-2, -1))
        return _regularized(plan, log_plan, a, b, full, e)[0]

    def solve(a, b, cost, eps):
        e = eps.expand(a.shape[:-1])
        full = cost.expand(*a.shape, b.shape[-1])
        out = sinkhorn(a, b, full, epsilon=e, **options)
        log_plan = _log_plan(out.f, out.g, full, e)
        plan = log_plan.exp()
        if value == "linear":
            linear = (plan * torch.where(plan > 0, full, 0.0)).sum((-2, -1))
            return linear, _linear_grads(plan, log_plan, full, e, out.f, out.g)
        total, kl = _regularized(plan, log_plan, a, b, full, e)
        # ab^T-kernel potentials as c-transforms: finite at zero masses too
        finite = torch.where(torch.isfinite(full), full, math.inf)
        f = -e[..., None] * torch.logsumexp(
            (out.g.unsqueeze(-2) - finite) / e[..., None, None], dim=-1
        )
        g = -e[..., None] * torch.logsumexp(
            (out.f.unsqueeze(-1) - finite) / e[..., None, None], dim=-2
        )
        return total, (_centred(f, a > 0), _centred(g, b > 0), plan, kl)

    return _Transport.apply(a, b, cost, eps, solve)


def shared_cost_transport(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    *,
    epsilon: torch.Tensor,
    center: torch.Tensor,
    start: torch.Tensor | None = None,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
    max_iter: int = 1000,
    tol: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Linear entropic cost ``<P, C>`` of groups sharing one cost, with implicit gradients.

    The forward is :func:`~georag.geometry.transport.sinkhorn_shared_cost` (warm-started
    from ``init``) or, given ``start``, its epsilon-scaled variant; the backward is that of
    ``value="linear"`` (see the module docstring), with respect to ``a``, ``b``, ``cost``
    and ``epsilon``. Per group the plans are rebuilt from the scalings in the backward, so
    only ``(B, E, n + m)`` numbers are kept per call.

    Parameters
    ----------
    a : torch.Tensor, shape (B, E, n)
    b : torch.Tensor, shape (B, E, m)
    cost : torch.Tensor, shape (B, n, m)
    epsilon, center : torch.Tensor, shape (B,)
        Regularization and kernel centre per group (``center`` gets no gradient: the plan
        does not depend on it).
    start : torch.Tensor, shape (B,), optional
        First regularization of an epsilon-scaled solve.
    init : (u, v), optional
        Warm-start scalings.
    max_iter, tol
        Of the (last) Sinkhorn stage.

    Returns
    -------
    cost : torch.Tensor, shape (B, E)
    u : torch.Tensor, shape (B, E, n)
        Final source scalings (no gradient), for warm starts.
    converged : torch.Tensor, shape (B, E), bool
    """
    extra: dict[str, torch.Tensor] = {}
    value = _SharedCost.apply(
        a, b, cost, epsilon, center.detach(), start, init, max_iter, tol, extra
    )
    return value, extra["u"], extra["converged"]


def _shared_kernel(cost, eps, center, dtype):
    """The solver's log kernel ``(center - C) / eps`` at its floor, (B, 1, n, m), float64."""
    floor = math.exp(-1.5 * max_cost_over_epsilon(dtype))
    cost, eps, center = (t.double() for t in (cost, eps, center))
    log_k = torch.maximum(
        (center.view(-1, 1, 1) - cost) / eps.view(-1, 1, 1),
        torch.tensor(math.log(floor), dtype=torch.float64, device=cost.device),
    )
    return torch.where(torch.isfinite(cost), log_k, math.log(floor)).unsqueeze(1)


def _shared_plan(u, v, cost, eps, center):
    """Plans ``u_i K_ij v_j`` (and their logs) of the solver's kernel, in float64."""
    log_k = _shared_kernel(cost, eps, center, u.dtype)
    u, v = u.double(), v.double()
    plan = u.unsqueeze(-1) * log_k.exp() * v.unsqueeze(-2)
    log_plan = u.log().unsqueeze(-1) + log_k + v.log().unsqueeze(-2)
    return plan, log_plan


class _SharedCost(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, cost, eps, center, start, init, max_iter, tol, extra):
        options = dict(epsilon=eps, max_iter=max_iter, tol=tol, center=center)
        if start is None:
            out = sinkhorn_shared_cost(a, b, cost, init=init, **options)
        else:
            out = sinkhorn_shared_cost_scaled(a, b, cost, start=start, **options)
        u, v = out.f, out.g
        plan, _ = _shared_plan(u, v, cost, eps, center)
        finite = torch.where(torch.isfinite(cost), cost, 0.0).double().unsqueeze(1)
        value = (plan * finite).sum((-2, -1)).to(a.dtype)
        x, y = _linear_adjoint(plan, finite.expand_as(plan), precision=u.dtype)
        x, y = _off_support(
            x.double(),
            y.double(),
            _shared_kernel(cost, eps, center, u.dtype),
            u.double().log(),
            v.double().log(),
            cost.double().unsqueeze(1),
        )
        extra["u"], extra["converged"] = u, out.converged
        ctx.save_for_backward(u, v, x, y, cost, eps, center)
        return value

    @staticmethod
    def backward(ctx, grad):
        u, v, x, y, cost, eps, center = ctx.saved_tensors
        plan, log_plan = _shared_plan(u, v, cost, eps, center)
        finite = torch.where(torch.isfinite(cost), cost, 0.0).double().unsqueeze(1)
        q = plan * (x.unsqueeze(-1) + y.unsqueeze(-2) - finite) / eps.double().view(-1, 1, 1, 1)
        g = grad.double()
        d_cost = (g[..., None, None] * (plan + q)).sum(1)
        d_eps = (g * (q * log_plan.masked_fill(plan == 0, 0.0)).sum((-2, -1))).sum(1)
        d_a = g.unsqueeze(-1) * _centred(x.double(), plan.sum(-1) > 0)
        d_b = g.unsqueeze(-1) * _centred(y.double(), plan.sum(-2) > 0)
        return (
            d_a.to(u.dtype),
            d_b.to(u.dtype),
            d_cost.to(cost.dtype),
            d_eps.to(eps.dtype),
            None,
            None,
            None,
            None,
            None,
            None,
        )


def exact_transport(a: torch.Tensor, b: torch.Tensor, cost: torch.Tensor) -> torch.Tensor:
    """Unregularized transport cost per problem with the gradient of its linear program.

    POT's network simplex (``ot.emd``, float64, CPU) on each problem's supports; the
    backward gives the optimal plan for ``cost`` and the centred dual potentials for
    ``a`` and ``b`` (their c-transforms off the supports). For checks: one Python call per problem.

    Parameters
    ----------
    a : torch.Tensor, shape (..., n)
    b : torch.Tensor, shape (..., m)
    cost : torch.Tensor, shape (..., n, m), broadcast against the batch of ``a``

    Returns
    -------
    torch.Tensor, shape (...)
    """
    eps = torch.zeros((), dtype=a.dtype, device=a.device)
    return _Transport.apply(a, b, cost, eps, _emd_solve)


def _emd_solve(a, b, cost, eps):
    import numpy as np
    import ot

    batch = a.shape[:-1]
    full = cost.expand(*a.shape, b.shape[-1])
    an = a.reshape(-1, a.shape[-1]).cpu().double().numpy()
    bn = b.reshape(-1, b.shape[-1]).cpu().double().numpy()
    cn = full.reshape(-1, *full.shape[-2:]).cpu().double().numpy()
    value = np.zeros(len(an))
    plan = np.zeros(cn.shape)
    fa, gb = np.zeros(an.shape), np.zeros(bn.shape)
    for k in range(len(an)):
        sa, sb = np.flatnonzero(an[k] > 0), np.flatnonzero(bn[k] > 0)
        sub = np.ascontiguousarray(cn[k][np.ix_(sa, sb)])
        p, log = ot.emd(an[k, sa], bn[k, sb], sub, log=True)
        value[k] = float((p * sub).sum())
        plan[k][np.ix_(sa, sb)] = p
        u, v = log["u"], log["v"]
        # off the supports, the c-transforms (the one-sided derivatives as mass enters);
        # then one shift per side, so that both keep the pair's gauge
        fa[k] = np.min(cn[k][:, sb] - v, axis=1) if len(sb) else 0.0
        gb[k] = np.min(cn[k][sa, :] - u[:, None], axis=0) if len(sa) else 0.0
        fa[k, sa], gb[k, sb] = u, v
        fa[k], gb[k] = fa[k] - u.mean(), gb[k] - v.mean()
        fa[k][~np.isfinite(fa[k])], gb[k][~np.isfinite(gb[k])] = 0.0, 0.0  # unreachable

    def back(x, shape):
        return torch.from_numpy(x).to(a.dtype).to(a.device).reshape(shape)

    return back(value, batch), (
        back(fa, a.shape),
        back(gb, b.shape),
        back(plan, full.shape),
        torch.zeros(batch, dtype=a.dtype, device=a.device),
    )
