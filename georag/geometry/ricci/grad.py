"""Ollivier-Ricci curvature and normalized Ricci flow under autograd.

The same semantics as :mod:`georag.geometry.ricci` (GraphRicciCurvature's node measures,
``kappa = 1 - W(m_x, m_y) / d(x, y)``, the flow restricted to the largest component with
mean-1 rescaling and early stop at ``delta``), differentiable with respect to the edge
lengths and to ``alpha``, ``exp_power`` and ``step`` given as tensors.
:func:`georag.geometry.ricci.ollivier_ricci` and :func:`~georag.geometry.ricci.ricci_flow`
come here when one of those requires grad.

How each part is differentiated:

- shortest paths: Floyd-Warshall under autograd, the (sub)gradient of the min: each
  distance's gradient is the edge indicator of a shortest path. Ties (two routes of the
  same length, common with unit lengths) are split evenly by ``torch.minimum``, so the
  gradient is a convex combination of the tied paths' indicators, one element of the
  subdifferential;
- node measures: autograd through the softmax ``exp(-w ** p)`` (the branch to an even
  spread below GraphRicciCurvature's floor 1e-7 and the isolated nodes are discrete);
- transport (``method="sinkhorn"``): the linear entropic cost with the implicit gradient
  of :func:`georag.geometry.transport_grad.shared_cost_transport`, including its
  dependence on epsilon (a multiple of the mean edge length), so nothing of the Sinkhorn
  iterations is kept. The split into the positive and negative parts of ``m_x - m_y``
  is piecewise linear; where both measures agree exactly (a tie, common at unit lengths
  or ``exp_power = 0``) each part takes half of the gradient, and the transport's
  gradient at a zero mass is its one-sided derivative as mass enters there, so the
  result is the mean of the two one-sided derivatives (as the shortest paths' ties).
  ``method="exact"``: POT's network simplex with the gradient of its linear program
  (:func:`georag.geometry.transport_grad.exact_transport`), the reference;
  ``method="auto"`` picks one of the two as the no-grad solvers do (exact up to
  :data:`~georag.geometry.ricci.EXACT_MAX_SUPPORT` nodes per neighbourhood), so that the
  gradient is that of the curvature the no-grad path returns;
- flow: unrolled over its M steps (``checkpoint=True`` recomputes each step in the
  backward instead of keeping it, :func:`torch.utils.checkpoint.checkpoint`); the early
  stop and the choice of the largest component are discrete.

The regularization is per graph: ``epsilon`` times the mean edge length, raised where the
costs between neighbourhoods would leave the kernel's exponent range (as the no-grad
one-shot and flow solvers); one-shot curvature is epsilon-scaled from the widest such cost,
the flow warm-starts each step from the potentials of the one before. The gradient is that
of the fixed point, so it is exact once the solve converged (the one-shot defaults reach
1e-5; the flow's loose defaults 1e-3).
"""

from __future__ import annotations

import math

import torch
from torch.utils.checkpoint import checkpoint as _checkpoint

from georag.geometry.graphs import shortest_paths
from georag.geometry.ricci.common import (
    _KERNEL_SPAN,
    _NEIGHBOUR_WEIGHT_FLOOR,
    _ZERO_DISTANCE,
    EXACT_MAX_SUPPORT,
    RicciFlowResult,
    _check_graph,
    _edge_index,
    _flow_edges,
    _scatter_edges,
    _Trail,
)
from georag.geometry.ricci.measures import _split_surplus
from georag.geometry.ricci.solvers import _warm_start, _WarmStart
from georag.geometry.transport import max_cost_over_epsilon
from georag.geometry.transport_grad import exact_transport, shared_cost_transport

__all__ = ["wants_grad", "node_measures", "ollivier_ricci", "ricci_flow"]

_METHODS = ("auto", "sinkhorn", "exact")


def wants_grad(*values: object) -> bool:
    """True when autograd is on and one of ``values`` is a tensor that requires grad."""
    return torch.is_grad_enabled() and any(
        isinstance(v, torch.Tensor) and v.requires_grad for v in values
    )


def _scalar(value: float | torch.Tensor, like: torch.Tensor, name: str) -> torch.Tensor:
    t = torch.as_tensor(value, device=like.device).to(like.dtype)
    if t.dim() != 0 or not bool(torch.isfinite(t.detach())):
        raise ValueError(f"{name} must be a finite scalar, got {value}")
    return t


def _check_options(alpha: torch.Tensor, exp_power: torch.Tensor, method: str) -> None:
    alpha, exp_power = float(alpha.detach()), float(exp_power.detach())
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if exp_power < 0:
        raise ValueError(f"exp_power must be finite and non-negative, got {exp_power}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS} for gradients, got {method!r}")


def _resolve(method: str, adjacency: torch.Tensor) -> str:
    """``"auto"`` as the no-grad solvers decide it (exact when every closed neighbourhood
    has at most :data:`~georag.geometry.ricci.EXACT_MAX_SUPPORT` nodes), so that the
    gradient is that of the curvature the no-grad path computes."""
    if method != "auto":
        return method
    degrees = adjacency.sum(2)
    support = 1 + (int(degrees.max()) if degrees.numel() else 0)
    return "exact" if support <= EXACT_MAX_SUPPORT else "sinkhorn"


def _check_unsupported(**options: object) -> None:
    """Options of the no-grad path that the differentiable path does not offer."""
    defaults = {"directed": False, "edge_mask": None, "base": math.e, "nbr_topk": None}
    for name, value in options.items():
        if value is not defaults[name] and value != defaults[name]:
            raise ValueError(f"{name} is not supported with gradients (got {value!r})")


def node_measures(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float | torch.Tensor = 0.5,
    exp_power: float | torch.Tensor = 2.0,
) -> torch.Tensor:
    """:func:`georag.geometry.ricci.node_measures`, differentiable in all three inputs.

    ``w ** p`` is ``exp(p log w)`` on positive lengths and ``0 ** p`` (1 at ``p = 0``)
    elsewhere, so no ``log 0`` reaches the tape.

    Returns
    -------
    torch.Tensor, shape (B, N, N)
        Row ``x`` is ``m_x``.
    """
    _check_graph(lengths, adjacency)
    alpha, exp_power = _scalar(alpha, lengths, "alpha"), _scalar(exp_power, lengths, "exp_power")
    _check_options(alpha, exp_power, "sinkhorn")
    return _measures(lengths, adjacency, alpha, exp_power)


def _measures(lengths, adjacency, alpha, exp_power):
    n = lengths.shape[1]
    positive = adjacency & (lengths > 0)
    log_w = torch.log(torch.where(positive, lengths, 1.0))
    power = torch.where(positive, torch.exp(exp_power * log_w), (exp_power == 0).to(lengths.dtype))
    logits = (-power).masked_fill(~adjacency, -math.inf)
    log_total = torch.logsumexp(logits, dim=2, keepdim=True)
    degree = adjacency.sum(2, keepdim=True)
    safe_total = torch.where(degree > 0, log_total, 0.0)
    proportional = (logits - safe_total).exp()
    even = adjacency.to(lengths.dtype) / degree.clamp_min(1)
    spread = torch.where(log_total > math.log(_NEIGHBOUR_WEIGHT_FLOOR), proportional, even)
    spread = spread.masked_fill(~adjacency, 0.0)
    eye = torch.eye(n, dtype=lengths.dtype, device=lengths.device)
    isolated = degree == 0
    keep = torch.where(isolated, 1.0, alpha)
    return (1.0 - alpha) * spread.masked_fill(isolated, 0.0) + keep * eye


def _graph_epsilon(lengths, adjacency, dist, epsilon, dtype):
    """The no-grad solvers' per-graph regularization (differentiable) and kernel centre
    (no gradient); they compute it from their precomputed graph structure."""
    on_edges = lengths.masked_fill(~adjacency, 0.0)
    count = adjacency.sum((1, 2)).clamp_min(1)
    mean = on_edges.sum((1, 2)) / count
    mean = torch.where(mean > 0, mean, 1.0)
    step = adjacency.to(lengths.dtype)
    closed = step + torch.eye(lengths.shape[1], dtype=lengths.dtype, device=lengths.device)
    within_three = torch.bmm(torch.bmm(closed, step), closed) > 0
    widest = dist.masked_fill(~within_three, 0.0).amax((1, 2))
    eps = torch.maximum(epsilon * mean, widest / (_KERNEL_SPAN * max_cost_over_epsilon(dtype)))
    return eps.to(dtype), (widest / 2).detach().to(dtype)


def _curvature(
    lengths,
    adjacency,
    edges,
    alpha,
    exp_power,
    *,
    method,
    epsilon,
    max_iter,
    tol,
    work,
    potential,
    scaled,
):
    """Curvature on the padded edge list: (kappa (B, E), converged (B, E), potential)."""
    i, j, valid = edges
    b = lengths.shape[0]
    dist = shortest_paths(lengths, adjacency)
    measures = _measures(lengths, adjacency, alpha, exp_power)
    rows = torch.arange(b, device=lengths.device).unsqueeze(1)
    d_edge = dist[rows, i, j]
    # padded edges solve a point mass: no NaN to mask
    source, target, mass, moving = _split_surplus(measures[rows, i] - measures[rows, j], valid)
    source, target = source.to(work), target.to(work)
    cost = dist.to(work)
    if method == "exact":
        finite = torch.where(torch.isfinite(cost), cost, 0.0).unsqueeze(1)
        out = exact_transport(source, target, finite)
        converged = torch.ones_like(valid)
    else:
        eps, center = _graph_epsilon(lengths, adjacency, dist, epsilon, work)
        init = None if scaled else _warm_start(_WarmStart(potential), source.detach(), eps.detach())
        start = (2 * center).detach() if scaled else None
        out, u, ok = shared_cost_transport(
            source,
            target,
            cost,
            epsilon=eps,
            center=center,
            start=start,
            init=init,
            max_iter=max_iter,
            tol=tol,
        )
        potential = eps.detach().view(-1, 1, 1) * u.clamp_min(torch.finfo(work).tiny).log()
        converged = ok | ~valid
    transport = torch.where(moving, mass * out.to(lengths.dtype), 0.0)
    safe = d_edge.clamp_min(_ZERO_DISTANCE)
    kappa = torch.where(d_edge < _ZERO_DISTANCE, torch.zeros_like(d_edge), 1.0 - transport / safe)
    return kappa.masked_fill(~valid, 0.0), converged, potential


def ollivier_ricci(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float | torch.Tensor = 0.5,
    exp_power: float | torch.Tensor = 2.0,
    method: str = "sinkhorn",
    epsilon: float = 0.03,
    max_iter: int = 1000,
    tol: float = 1e-5,
    transport_dtype: torch.dtype | None = torch.float64,
    directed: bool = False,
    edge_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Differentiable :func:`georag.geometry.ricci.ollivier_ricci` (same parameters;
    ``"auto"`` resolves as there; no certificate: ``"sinkhorn"`` differentiates the plain
    Sinkhorn solve; ``directed`` and ``edge_mask`` are not supported).

    Returns
    -------
    torch.Tensor, shape (B, N, N)
        Symmetric curvature on the edges, 0 elsewhere; differentiable in ``lengths``,
        ``alpha`` and ``exp_power``.
    """
    _check_graph(lengths, adjacency)
    alpha, exp_power = _scalar(alpha, lengths, "alpha"), _scalar(exp_power, lengths, "exp_power")
    _check_options(alpha, exp_power, method)
    _check_unsupported(directed=directed, edge_mask=edge_mask)
    method = _resolve(method, adjacency)
    edges = _edge_index(adjacency)
    kappa, _, _ = _curvature(
        lengths,
        adjacency,
        edges,
        alpha,
        exp_power,
        method=method,
        epsilon=epsilon,
        max_iter=max_iter,
        tol=tol,
        work=transport_dtype or lengths.dtype,
        potential=None,
        scaled=True,
    )
    return _scatter_edges(kappa, *edges, n=lengths.shape[1])


def ricci_flow(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    iterations: int = 20,
    step: float | torch.Tensor = 1.0,
    alpha: float | torch.Tensor = 0.5,
    exp_power: float | torch.Tensor = 2.0,
    normalize: bool = True,
    delta: float = 1e-4,
    method: str = "sinkhorn",
    epsilon: float = 0.1,
    max_iter: int = 50,
    tol: float = 1e-3,
    transport_dtype: torch.dtype | None = None,
    history: bool = False,
    base: float = math.e,
    nbr_topk: int | None = None,
    restrict: bool = True,
    checkpoint: bool = False,
) -> RicciFlowResult:
    """Differentiable :func:`georag.geometry.ricci.ricci_flow` (same parameters;
    ``"auto"`` resolves as there; no certificate; ``base`` and ``nbr_topk`` are not
    supported).

    Parameters
    ----------
    checkpoint : bool
        Recompute each flow step in the backward pass instead of keeping its
        intermediate tensors (less memory, one more forward per step).

    Returns
    -------
    RicciFlowResult
        ``lengths`` and ``curvature`` (and the history) carry gradients to ``lengths``,
        ``step``, ``alpha`` and ``exp_power``.
    """
    _check_graph(lengths, adjacency)
    alpha, exp_power = _scalar(alpha, lengths, "alpha"), _scalar(exp_power, lengths, "exp_power")
    step = _scalar(step, lengths, "step")
    _check_options(alpha, exp_power, method)
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    _check_unsupported(base=base, nbr_topk=nbr_topk)
    method = _resolve(method, adjacency)
    b, n, _ = lengths.shape
    adjacency, edges, w, num_edges = _flow_edges(lengths, adjacency, restrict)
    i, j, valid = edges
    options = dict(
        method=method,
        epsilon=epsilon,
        max_iter=max_iter,
        tol=tol,
        work=transport_dtype or lengths.dtype,
        scaled=False,
    )

    def matrix(values: torch.Tensor) -> torch.Tensor:
        return _scatter_edges(values, i, j, valid, n)

    def advance(w, kappa, potential):
        stepped = w - step * kappa * w
        if normalize:
            total = stepped.sum(1, keepdim=True)
            stepped = stepped * (num_edges / torch.where(total > 0, total, num_edges))
        stepped = stepped.masked_fill(~valid, 0.0)
        new_kappa, ok, potential = _curvature(
            matrix(stepped), adjacency, edges, alpha, exp_power, potential=potential, **options
        )
        return stepped, new_kappa, ok, potential

    kappa, ok, potential = _curvature(
        matrix(w), adjacency, edges, alpha, exp_power, potential=None, **options
    )
    converged = ok.all(1)
    active = torch.ones(b, dtype=torch.bool, device=lengths.device)
    ran = torch.zeros(b, dtype=torch.long, device=lengths.device)
    trail = _Trail(matrix, history, w, kappa)
    for _ in range(iterations):
        if not bool(active.any()):
            break
        if checkpoint and wants_grad(w, kappa, alpha, exp_power, step):
            stepped, new_kappa, ok, potential = _checkpoint(
                advance, w, kappa, potential, use_reentrant=False
            )
        else:
            stepped, new_kappa, ok, potential = advance(w, kappa, potential)
        keep = active.unsqueeze(1)
        w = torch.where(keep, stepped, w)
        kappa = torch.where(keep, new_kappa, kappa)
        converged = converged & (ok.all(1) | ~active)
        ran = ran + active.long()
        with torch.no_grad():
            if valid.shape[1] == 0:  # no edges anywhere: nothing flows
                spread = torch.zeros(b, dtype=kappa.dtype, device=kappa.device)
            else:
                spread = kappa.masked_fill(~valid, -math.inf).amax(1) - kappa.masked_fill(
                    ~valid, math.inf
                ).amin(1)
        active = active & ~(spread < delta)  # out of place: `keep` views it
        trail.add(w, kappa)
    exact_solves = valid.sum(1) * (ran + 1) if method == "exact" else torch.zeros_like(ran)
    return trail.result(w, kappa, adjacency, ran, converged, exact_solves)
