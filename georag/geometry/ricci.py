"""Ollivier-Ricci curvature and normalized discrete Ricci flow on batches of graphs.

The semantics are those of GraphRicciCurvature 0.6.1 (``OllivierRicci(G, alpha,
exp_power, method="OTD")`` and its ``compute_ricci_flow``), the library the
Ricci-Filtration paper builds on:

- node measure ``m_x``: mass ``alpha`` stays at ``x``; ``1 - alpha`` is spread over the
  neighbours ``v`` in proportion to ``exp(-w_xv ** exp_power)`` (evenly when the sum of
  those weights is below 1e-7); an isolated node keeps all its mass;
- curvature ``kappa_xy = 1 - W(m_x, m_y) / d(x, y)`` on every edge, with ``W`` the
  optimal transport cost over the shortest-path metric ``d`` and ``kappa = 0`` when
  ``d(x, y) < 1e-7``;
- flow: restricted to the largest connected component; curvature on the initial
  lengths, then per iteration ``w <- w - step * kappa * w``, rescale so the mean edge
  length is 1, recompute the curvature, and stop a graph early once
  ``max(kappa) - min(kappa) < delta``.

Every graph of the batch runs at once; the Python loops run over flow iterations,
Sinkhorn iterations and Floyd-Warshall pivots only (``method="exact"`` loops over edges
and is meant for checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from georag.geometry.graphs import shortest_paths
from georag.geometry.transport import (
    max_cost_over_epsilon,
    sinkhorn_shared_cost,
    sinkhorn_shared_cost_scaled,
)

__all__ = [
    "RicciFlowResult",
    "node_measures",
    "ollivier_ricci",
    "ricci_flow",
    "largest_component",
    "CURVATURE_METHODS",
    "SINKHORN_ACCURACY",
]

CURVATURE_METHODS = ("sinkhorn", "exact")

#: Sinkhorn settings of :func:`ollivier_ricci` that keep the curvature within 1e-3 of the
#: exact transport on random unit-length and weighted graphs (``ollivier_ricci(lengths,
#: adjacency, **SINKHORN_ACCURACY)``): a small regularization, float64 iterations and
#: enough of them for the degenerate problems of unit-length graphs.
SINKHORN_ACCURACY = {"epsilon": 0.004, "max_iter": 60_000, "tol": 1e-8,
                     "transport_dtype": torch.float64}
_NEIGHBOUR_WEIGHT_FLOOR = 1e-7  # GraphRicciCurvature's EPSILON
_ZERO_DISTANCE = 1e-7
_KERNEL_SPAN = 1.6  # widest cost / epsilon, in units of max_cost_over_epsilon


def _check_graph(lengths: torch.Tensor, adjacency: torch.Tensor) -> None:
    if lengths.dim() != 3 or lengths.shape[1] != lengths.shape[2]:
        raise ValueError(f"lengths must have shape (B, N, N), got {tuple(lengths.shape)}")
    if not lengths.is_floating_point():
        raise ValueError(f"lengths must be a floating tensor, got {lengths.dtype}")
    if adjacency.shape != lengths.shape or adjacency.dtype != torch.bool:
        raise ValueError(
            f"adjacency must be a bool tensor of shape {tuple(lengths.shape)}, "
            f"got {adjacency.dtype} {tuple(adjacency.shape)}"
        )
    if not torch.equal(adjacency, adjacency.transpose(1, 2)):
        raise ValueError("adjacency must be symmetric (undirected graphs)")
    if adjacency.diagonal(dim1=1, dim2=2).any():
        raise ValueError("adjacency must be False on the diagonal (no self loops)")
    edge_lengths = lengths[adjacency]
    if not torch.isfinite(edge_lengths).all() or (edge_lengths < 0).any():
        raise ValueError("lengths must be finite and non-negative on every edge")
    upper = lengths.masked_fill(~adjacency, 0.0)
    if not torch.equal(upper, upper.transpose(1, 2)):
        raise ValueError("lengths must be symmetric on the edges")


def node_measures(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float = 0.5,
    exp_power: float = 2.0,
) -> torch.Tensor:
    """Lazy random-walk measures ``m_x`` of every node.

    Parameters
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Non-negative symmetric edge lengths (read where ``adjacency``).
    adjacency : torch.Tensor, shape (B, N, N), bool
        Symmetric edge mask, no self loops.
    alpha : float
        Mass kept at the node, in [0, 1].
    exp_power : float
        ``p`` in ``exp(-w ** p)``; 0 spreads evenly.

    Returns
    -------
    torch.Tensor, shape (B, N, N)
        Row ``x`` is ``m_x``; rows sum to 1.

    Examples
    --------
    >>> adjacency = torch.tensor([[[False, True, True], [True, False, False],
    ...                            [True, False, False]]])
    >>> lengths = torch.tensor([[[0.0, 1.0, 2.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]])
    >>> node_measures(lengths, adjacency)[0, 0]
    tensor([0.5000, 0.4763, 0.0237])
    """
    _check_graph(lengths, adjacency)
    _check_measure_options(alpha, exp_power)
    return _node_measures(lengths, adjacency, alpha=alpha, exp_power=exp_power)


def _check_measure_options(alpha: float, exp_power: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if not math.isfinite(exp_power) or exp_power < 0:
        raise ValueError(f"exp_power must be finite and non-negative, got {exp_power}")


def _node_measures(lengths: torch.Tensor, adjacency: torch.Tensor, *, alpha: float,
                   exp_power: float) -> torch.Tensor:
    n = lengths.shape[1]
    logits = (-lengths.clamp_min(0.0).pow(exp_power)).masked_fill(~adjacency, -math.inf)
    log_total = torch.logsumexp(logits, dim=2, keepdim=True)
    degree = adjacency.sum(2, keepdim=True)
    proportional = (logits - log_total).exp()
    even = adjacency.to(lengths.dtype) / degree.clamp_min(1)
    spread = torch.where(log_total > math.log(_NEIGHBOUR_WEIGHT_FLOOR), proportional, even)
    spread = spread.masked_fill(~adjacency, 0.0)
    eye = torch.eye(n, dtype=lengths.dtype, device=lengths.device)
    isolated = degree == 0
    keep = torch.where(isolated, torch.ones_like(log_total), torch.full_like(log_total, alpha))
    return (1.0 - alpha) * spread.masked_fill(isolated, 0.0) + keep * eye


def _edge_index(adjacency: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded list of the undirected edges ``i < j`` of each graph.

    Returns ``(i, j, valid)``, each of shape (B, E) with E the largest edge count.
    """
    b, n, _ = adjacency.shape
    upper = torch.triu(adjacency, diagonal=1).reshape(b, n * n)
    counts = upper.sum(1)
    e = int(counts.max()) if b else 0
    order = torch.argsort((~upper).to(torch.int8), dim=1, stable=True)[:, :e]
    valid = torch.arange(e, device=adjacency.device).unsqueeze(0) < counts.unsqueeze(1)
    return order // n, order % n, valid


def _scatter_edges(values: torch.Tensor, i: torch.Tensor, j: torch.Tensor, valid: torch.Tensor,
                   n: int) -> torch.Tensor:
    b = values.shape[0]
    out = values.new_zeros(b, n * n)
    values = values.masked_fill(~valid, 0.0)
    out.scatter_add_(1, i * n + j, values)
    out.scatter_add_(1, j * n + i, values)
    return out.view(b, n, n)


def _transport_exact(measures: torch.Tensor, dist: torch.Tensor, i: torch.Tensor,
                     j: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Exact W(m_i, m_j) by POT's network simplex, one edge at a time (for checks)."""
    import numpy as np
    import ot

    m = measures.detach().cpu().double().numpy()
    d = dist.detach().cpu().double().numpy()
    out = np.zeros(tuple(i.shape))
    for g, e in valid.nonzero().tolist():
        x, y = int(i[g, e]), int(j[g, e])
        sx, sy = np.flatnonzero(m[g, x] > 0), np.flatnonzero(m[g, y] > 0)
        out[g, e] = ot.emd2(m[g, x, sx], m[g, y, sy], d[g][np.ix_(sx, sy)])
    return torch.from_numpy(out).to(measures.dtype).to(measures.device)


@dataclass
class _WarmStart:
    """Sinkhorn source potentials carried from one flow step to the next."""

    potential: torch.Tensor | None = None


def _warm_start(warm: _WarmStart, source: torch.Tensor, eps: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Starting scalings ``u = exp(f / eps)`` from the carried potentials ``f``.

    ``u`` is defined up to a factor per problem, and the support of ``source`` moves from
    one flow step to the next: the start is scaled to ``max u = 1`` over the current
    support (a support the old potentials do not reach starts from ones).
    """
    if warm.potential is None:
        return None
    logits = (warm.potential / eps.view(-1, 1, 1)).masked_fill(source <= 0, -math.inf)
    top = logits.amax(-1, keepdim=True)
    start = torch.where(torch.isfinite(top), (logits - top).exp(), (source > 0).to(source.dtype))
    return start, start


def _curvature(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    edges: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    *,
    alpha: float,
    exp_power: float,
    method: str,
    epsilon: float,
    max_iter: int,
    tol: float,
    transport_dtype: torch.dtype | None,
    warm: _WarmStart | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Curvature on the padded edge list; returns (kappa (B, E), converged (B, E))."""
    i, j, valid = edges
    b, n, _ = lengths.shape
    dist = shortest_paths(lengths, adjacency)
    measures = _node_measures(lengths, adjacency, alpha=alpha, exp_power=exp_power)
    rows = torch.arange(b, device=lengths.device).unsqueeze(1)
    d_edge = dist[rows, i, j]
    if method == "exact":
        transport = _transport_exact(measures, dist, i, j, valid)
        converged = valid.clone()
    else:
        work = transport_dtype or lengths.dtype
        # Only the mass that must move: W(m_x, m_y) = W((m_x - m_y)+, (m_y - m_x)+) on a
        # metric; the shared mass would otherwise leak under the entropic blur.
        # Each problem is solved at unit mass; one whose moving mass is at rounding level
        # (identical measures) costs 0 and solves a point mass on node 0 instead.
        surplus = measures[rows, i] - measures[rows, j]
        source, target = surplus.clamp_min(0.0), (-surplus).clamp_min(0.0)
        out_mass, in_mass = source.sum(-1, keepdim=True), target.sum(-1, keepdim=True)
        moving = torch.minimum(out_mass, in_mass) > 64 * torch.finfo(lengths.dtype).eps
        point = torch.zeros_like(source[:1, :1])
        point[..., 0] = 1.0
        source = torch.where(moving, source / out_mass, point).to(work)
        target = torch.where(moving, target / in_mass, point).to(work)
        cost = dist.to(work)
        eps, center = _sinkhorn_epsilon(lengths, adjacency, dist, epsilon=epsilon, dtype=work)
        if warm is None:
            out = sinkhorn_shared_cost_scaled(source, target, cost, epsilon=eps,
                                              start=2 * center, max_iter=max_iter, tol=tol,
                                              center=center)
        else:
            out = sinkhorn_shared_cost(source, target, cost, epsilon=eps, max_iter=max_iter,
                                       tol=tol, init=_warm_start(warm, source, eps), center=center)
            warm.potential = eps.view(-1, 1, 1) * out.f.clamp_min(torch.finfo(work).tiny).log()
        mass = (out_mass + in_mass).squeeze(-1) / 2
        transport = torch.where(moving.squeeze(-1), mass * out.cost.to(lengths.dtype), 0.0)
        converged = out.converged | ~valid
    safe = d_edge.clamp_min(_ZERO_DISTANCE)
    kappa = torch.where(d_edge < _ZERO_DISTANCE, torch.zeros_like(d_edge), 1.0 - transport / safe)
    return kappa.masked_fill(~valid, 0.0), converged


def _sinkhorn_epsilon(lengths: torch.Tensor, adjacency: torch.Tensor, dist: torch.Tensor, *,
                      epsilon: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-graph regularization and kernel centre.

    ``epsilon`` times the mean edge length, raised where the costs that matter would not
    fit the exponent range of ``dtype``. The costs that matter join a node of ``N[x]`` to
    one of ``N[y]`` over an edge ``xy``: pairs at most three hops apart. The kernel is
    centred on half the widest of them; the scalings then span up to
    ``exp(widest / epsilon)``, which is kept within ``_KERNEL_SPAN`` times
    :func:`max_cost_over_epsilon` (80% of the exponent range). Returns
    ``(epsilon (B,), center (B,))``.
    """
    on_edges = lengths.masked_fill(~adjacency, 0.0)
    count = adjacency.sum((1, 2)).clamp_min(1)
    mean = on_edges.sum((1, 2)) / count
    mean = torch.where(mean > 0, mean, torch.ones_like(mean))
    step = adjacency.to(lengths.dtype)
    closed = step + torch.eye(lengths.shape[1], dtype=lengths.dtype, device=lengths.device)
    within_three = torch.bmm(torch.bmm(closed, step), closed) > 0
    widest = dist.masked_fill(~within_three, 0.0).amax((1, 2))
    eps = torch.maximum(epsilon * mean, widest / (_KERNEL_SPAN * max_cost_over_epsilon(dtype)))
    return eps.to(dtype), (widest / 2).to(dtype)


def ollivier_ricci(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    method: str = "sinkhorn",
    epsilon: float = 0.03,
    max_iter: int = 1000,
    tol: float = 1e-5,
    transport_dtype: torch.dtype | None = torch.float64,
) -> torch.Tensor:
    """Ollivier-Ricci curvature ``kappa_xy = 1 - W(m_x, m_y) / d(x, y)`` of every edge.

    Parameters
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Non-negative symmetric edge lengths (read where ``adjacency``).
    adjacency : torch.Tensor, shape (B, N, N), bool
        Symmetric edge mask, no self loops. Any number of components; isolated
        (e.g. padding) nodes carry no edge.
    alpha, exp_power : float
        Node measures, see :func:`node_measures`.
    method : {"sinkhorn", "exact"}
        ``"sinkhorn"``: batched entropic transport (:func:`sinkhorn_shared_cost`);
        ``"exact"``: POT's network simplex per edge, slow, for checks.
    epsilon : float
        Sinkhorn regularization relative to each graph's mean edge length; raised per
        graph where the costs between two neighbourhoods would not fit the kernel's
        exponent range in ``transport_dtype``. The solve is epsilon-scaled from the
        widest such cost down to it (:func:`sinkhorn_shared_cost_scaled`).
    max_iter, tol : int, float
        Iteration cap and L1 marginal tolerance of the last Sinkhorn stage. The defaults
        (0.03, 1000, 1e-5) keep the curvature within 1e-2 of the exact one on random
        unit-length and weighted graphs (lengths in [0.5, 2]) with 5 to 41 nodes, in
        float32 and float64; :data:`SINKHORN_ACCURACY` within 1e-3 (about 50 times
        slower; figures in docs/methods/ricci_filtration.md).
    transport_dtype : torch.dtype, optional
        Dtype of the Sinkhorn iterations; None uses that of ``lengths``. float64 by
        default: in float32 the kernel's exponent range forces a larger epsilon on
        graphs whose neighbourhoods lie far apart (errors up to ~1.2e-2 on weighted
        graphs). The result has the dtype of ``lengths``.

    Returns
    -------
    torch.Tensor, shape (B, N, N)
        Symmetric curvature on the edges, 0 elsewhere.
    """
    _check_graph(lengths, adjacency)
    _check_measure_options(alpha, exp_power)
    if method not in CURVATURE_METHODS:
        raise ValueError(f"method must be one of {CURVATURE_METHODS}, got {method!r}")
    edges = _edge_index(adjacency)
    kappa, _ = _curvature(lengths, adjacency, edges, alpha=alpha, exp_power=exp_power,
                          method=method, epsilon=epsilon, max_iter=max_iter, tol=tol,
                          transport_dtype=transport_dtype, warm=None)
    return _scatter_edges(kappa, *edges, n=lengths.shape[1])


def largest_component(adjacency: torch.Tensor) -> torch.Tensor:
    """Nodes of the largest connected component of each graph.

    Ties go to the component holding the lowest node index, as ``max(nx.connected_
    components(G), key=len)`` picks them.

    Parameters
    ----------
    adjacency : torch.Tensor, shape (B, N, N), bool

    Returns
    -------
    torch.Tensor, shape (B, N), bool
    """
    b, n, _ = adjacency.shape
    hops = torch.where(adjacency, 1.0, math.inf)
    reach = torch.isfinite(shortest_paths(hops, adjacency))
    size = reach.sum(2)
    first = size.argmax(1)
    return reach[torch.arange(b, device=adjacency.device), first]


@dataclass(frozen=True)
class RicciFlowResult:
    """Outcome of :func:`ricci_flow`.

    Attributes
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Final edge lengths on ``adjacency``, 0 elsewhere.
    curvature : torch.Tensor, shape (B, N, N)
        Curvature on the final lengths, 0 off the edges.
    adjacency : torch.Tensor, shape (B, N, N), bool
        The edges that flowed: those of each graph's largest connected component.
    iterations : torch.Tensor, shape (B,), long
        Flow iterations each graph ran (fewer than asked when it stopped early).
    converged : torch.Tensor, shape (B,), bool
        False where a Sinkhorn solve of that graph missed its tolerance at some step.
    history_lengths, history_curvature : torch.Tensor, shape (T + 1, B, N, N), optional
        Lengths and curvature before the first and after every iteration (frozen after
        a graph stops), when ``history=True``.
    """

    lengths: torch.Tensor
    curvature: torch.Tensor
    adjacency: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor
    history_lengths: torch.Tensor | None = None
    history_curvature: torch.Tensor | None = None


def ricci_flow(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    iterations: int = 20,
    step: float = 1.0,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    normalize: bool = True,
    delta: float = 1e-4,
    method: str = "sinkhorn",
    epsilon: float = 0.1,
    max_iter: int = 50,
    tol: float = 1e-3,
    transport_dtype: torch.dtype | None = None,
    history: bool = False,
) -> RicciFlowResult:
    """Normalized discrete Ricci flow on B graphs at once.

    Parameters
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Non-negative symmetric initial edge lengths (read where ``adjacency``).
    adjacency : torch.Tensor, shape (B, N, N), bool
        Symmetric edge mask. Only the largest connected component of each graph flows
        (as in GraphRicciCurvature); the other edges are dropped from the result.
    iterations : int
        Flow steps M.
    step : float
        Step size in ``w <- w - step * kappa * w``.
    alpha, exp_power : float
        Node measures, see :func:`node_measures`.
    normalize : bool
        Rescale after each step so that the mean edge length is 1.
    delta : float
        A graph stops once the spread of its curvatures is below ``delta``.
    method, epsilon, max_iter, tol, transport_dtype
        Curvature solver, see :func:`ollivier_ricci`. Sinkhorn potentials are
        warm-started from one step to the next, so the defaults are looser than
        :func:`ollivier_ricci`'s (0.1, 50, 1e-3): at these the kept set of Ricci-Filtration
        matches GraphRicciCurvature's on over 99% of SciFact candidates.
    history : bool
        Also return every intermediate length and curvature matrix.

    Returns
    -------
    RicciFlowResult
    """
    _check_graph(lengths, adjacency)
    _check_measure_options(alpha, exp_power)
    if method not in CURVATURE_METHODS:
        raise ValueError(f"method must be one of {CURVATURE_METHODS}, got {method!r}")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    b, n, _ = lengths.shape
    core = largest_component(adjacency)
    adjacency = adjacency & core.unsqueeze(2) & core.unsqueeze(1)
    edges = _edge_index(adjacency)
    i, j, valid = edges
    rows = torch.arange(b, device=lengths.device).unsqueeze(1)
    w = lengths[rows, i, j].masked_fill(~valid, 0.0)
    num_edges = valid.sum(1, keepdim=True).clamp_min(1).to(lengths.dtype)
    warm = _WarmStart() if method == "sinkhorn" else None
    options = dict(alpha=alpha, exp_power=exp_power, method=method, epsilon=epsilon,
                   max_iter=max_iter, tol=tol, transport_dtype=transport_dtype, warm=warm)

    def matrix(values: torch.Tensor) -> torch.Tensor:
        return _scatter_edges(values, i, j, valid, n)

    kappa, ok = _curvature(matrix(w), adjacency, edges, **options)
    converged = ok.all(1)
    active = torch.ones(b, dtype=torch.bool, device=lengths.device)
    ran = torch.zeros(b, dtype=torch.long, device=lengths.device)
    trail_w, trail_k = [matrix(w)], [matrix(kappa)]
    for _ in range(iterations):
        if not bool(active.any()):
            break
        stepped = w - step * kappa * w
        if normalize:
            total = stepped.sum(1, keepdim=True)
            stepped = stepped * (num_edges / torch.where(total > 0, total, num_edges))
        stepped = stepped.masked_fill(~valid, 0.0)
        new_kappa, ok = _curvature(matrix(stepped), adjacency, edges, **options)
        keep = active.unsqueeze(1)
        w = torch.where(keep, stepped, w)
        kappa = torch.where(keep, new_kappa, kappa)
        converged &= ok.all(1) | ~active
        ran += active.long()
        spread = (kappa.masked_fill(~valid, -math.inf).amax(1)
                  - kappa.masked_fill(~valid, math.inf).amin(1))
        active &= ~(spread < delta)
        if history:
            trail_w.append(matrix(w))
            trail_k.append(matrix(kappa))
    return RicciFlowResult(
        lengths=matrix(w),
        curvature=matrix(kappa),
        adjacency=adjacency,
        iterations=ran,
        converged=converged,
        history_lengths=torch.stack(trail_w) if history else None,
        history_curvature=torch.stack(trail_k) if history else None,
    )
