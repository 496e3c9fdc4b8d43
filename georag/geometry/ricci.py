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

Every graph of the batch runs at once (each leaves the Sinkhorn iteration once its own
problems converged, so its result does not depend on the batch); what depends on the
graphs alone is built once per flow; the Python loops run over flow iterations,
Sinkhorn iterations and Floyd-Warshall pivots, and, for the exact solves (``"exact"``,
``"auto"`` on small neighbourhoods, Sinkhorn edges without a certificate), over edges
around POT's C++ network simplex: on a CPU that is cheaper than Sinkhorn at these sizes
(docs/methods/ricci_filtration.md, "Choosing the solver"). The Sinkhorn path
(:mod:`georag.geometry.transport`) returns plans' scalings, costs and ``converged`` flags
per problem, and :func:`~georag.geometry.transport.transport_bounds` certifies them.
The uncertified Sinkhorn flow on CPU tensors (Ricci-Filtration's setting) runs compiled,
graph after graph (:mod:`georag.geometry.ricci_compiled`, ``backend=``). Large sparse
graphs: :mod:`georag.geometry.sparse_ricci`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from georag.geometry import ricci_compiled
from georag.geometry.graphs import shortest_paths
from georag.geometry.transport import (
    _shared_cost_sinkhorn,
    emd,
    max_cost_over_epsilon,
    sinkhorn_shared_cost_scaled,
    transport_bounds,
)
from georag.geometry.transport_ipm import transport_ipm

__all__ = [
    "RicciConvergenceWarning",
    "RicciFlowResult",
    "node_measures",
    "ollivier_ricci",
    "ricci_flow",
    "largest_component",
    "CURVATURE_METHODS",
    "FLOW_BACKENDS",
    "SINKHORN_ACCURACY",
    "EXACT_MAX_SUPPORT",
]

CURVATURE_METHODS = ("auto", "exact", "sinkhorn", "batched", "average")
FLOW_BACKENDS = ("auto", "tensor", "compiled")
#: ``method="auto"`` solves every edge exactly (network simplex) when both closed
#: neighbourhoods have at most this many nodes, and by Sinkhorn otherwise (the rule of
#: GraphRicciCurvature's "OTDSinkhornMix", with its threshold). On a CPU the exact solve
#: is the cheaper one at these sizes (docs/methods/ricci_filtration.md, "Choosing the
#: solver").
EXACT_MAX_SUPPORT = 2000

#: Certified Sinkhorn within 1e-8 of the exact curvature on every edge
#: (``ollivier_ricci(lengths, adjacency, **SINKHORN_ACCURACY)``, also for
#: :func:`ricci_flow`): a smaller regularization and more iterations than the defaults.
#: The flow amplifies each step's curvature error, mostly a few hundred times over 40
#: steps, and up to ten thousand times where edges shrink to 1e-7 of the mean
#: (docs/methods/ricci_filtration.md, "Accuracy through the whole flow"): 1e-6 per step
#: reached 3.4e-2 on one held-out graph, 1e-7 followed it to 1.4e-9; 1e-8 leaves a
#: tenfold margin. Entropic transport at this epsilon certifies few edges that tightly;
#: the others are solved exactly, so on a CPU this setting is slower than
#: ``method="exact"``; off the CPU, ``method="batched"`` is the exact-grade batched solver.
SINKHORN_ACCURACY = {
    "method": "sinkhorn",
    "epsilon": 0.01,
    "max_iter": 3000,
    "tol": 1e-7,
    "accuracy": 1e-8,
}
_NEIGHBOUR_WEIGHT_FLOOR = 1e-7  # GraphRicciCurvature's EPSILON
_ZERO_DISTANCE = 1e-7
_MOVING_EPS = 64  # machine epsilons: a side of m_x - m_y with less mass is rounding
_GAP_FLOOR = 1e-13  # the interior point's duality gap is not resolved below rounding
_KERNEL_SPAN = 1.6  # widest cost / epsilon, in units of max_cost_over_epsilon


class RicciConvergenceWarning(RuntimeWarning):
    """A flow step's Sinkhorn solves missed their tolerance (``accuracy=None`` only)."""


def _check_graph(lengths: torch.Tensor, adjacency: torch.Tensor, directed: bool = False) -> None:
    if lengths.dim() != 3 or lengths.shape[1] != lengths.shape[2]:
        raise ValueError(f"lengths must have shape (B, N, N), got {tuple(lengths.shape)}")
    if not lengths.is_floating_point():
        raise ValueError(f"lengths must be a floating tensor, got {lengths.dtype}")
    if adjacency.shape != lengths.shape or adjacency.dtype != torch.bool:
        raise ValueError(
            f"adjacency must be a bool tensor of shape {tuple(lengths.shape)}, "
            f"got {adjacency.dtype} {tuple(adjacency.shape)}"
        )
    if not directed and not torch.equal(adjacency, adjacency.transpose(1, 2)):
        raise ValueError(
            "adjacency must be symmetric (undirected graphs; directed=True for directed ones)"
        )
    if adjacency.diagonal(dim1=1, dim2=2).any():
        raise ValueError("adjacency must be False on the diagonal (no self loops)")
    edge_lengths = lengths[adjacency]
    if not torch.isfinite(edge_lengths).all() or (edge_lengths < 0).any():
        raise ValueError("lengths must be finite and non-negative on every edge")
    upper = lengths.masked_fill(~adjacency, 0.0)
    if not directed and not torch.equal(upper, upper.transpose(1, 2)):
        raise ValueError("lengths must be symmetric on the edges")


def node_measures(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    base: float = math.e,
    nbr_topk: int | None = None,
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
        ``p`` in ``base ** (-w ** p)``; 0 spreads evenly.
    base : float
        Base of the neighbour weights (positive; GraphRicciCurvature's ``base``).
    nbr_topk : int, optional
        Spread only over the ``nbr_topk`` neighbours of largest weight (ties to the
        larger node index, as GraphRicciCurvature's heap keeps them); None: all.

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
    _check_measure_options(alpha, exp_power, base, nbr_topk)
    return _node_measures(
        lengths, adjacency, alpha=alpha, exp_power=exp_power, base=base, nbr_topk=nbr_topk
    )


def _check_measure_options(
    alpha: float, exp_power: float, base: float = math.e, nbr_topk: int | None = None
) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if not math.isfinite(exp_power) or exp_power < 0:
        raise ValueError(f"exp_power must be finite and non-negative, got {exp_power}")
    if not (math.isfinite(base) and base > 0):
        raise ValueError(f"base must be positive and finite, got {base}")
    if nbr_topk is not None and nbr_topk < 1:
        raise ValueError(f"nbr_topk must be >= 1 or None, got {nbr_topk}")


class _Measures:
    """What the node measures need that depends on the adjacency alone (built once per
    flow, reused at every step): the mask off the edges, the even spread, the mass kept at
    each node on the diagonal, and the largest degree."""

    def __init__(self, adjacency: torch.Tensor, alpha: float, dtype: torch.dtype) -> None:
        n = adjacency.shape[1]
        degree = adjacency.sum(2, keepdim=True)
        self.off = ~adjacency
        self.even = adjacency.to(dtype) / degree.clamp_min(1)
        eye = torch.eye(n, dtype=dtype, device=adjacency.device)
        isolated = degree == 0
        keep = torch.where(isolated, 1.0, torch.full_like(degree, alpha, dtype=dtype))
        self.kept = keep * eye
        self.max_degree = int(degree.max()) if degree.numel() else 0


def _node_measures(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float,
    exp_power: float,
    base: float = math.e,
    nbr_topk: int | None = None,
    plan: _Measures | None = None,
) -> torch.Tensor:
    n = lengths.shape[1]
    if plan is None:
        plan = _Measures(adjacency, alpha, lengths.dtype)
    logits = (-math.log(base) * lengths.clamp_min(0.0).pow(exp_power)).masked_fill(
        plan.off, -math.inf
    )
    if nbr_topk is not None and n and nbr_topk < plan.max_degree:
        # the nbr_topk largest weights, ties to the larger index: sort the reversed
        # columns stably by decreasing weight
        reverse = torch.arange(n - 1, -1, -1, device=lengths.device)
        order = torch.argsort(logits[..., reverse], dim=2, descending=True, stable=True)
        top = reverse[order[..., :nbr_topk]]
        adjacency = adjacency & torch.zeros_like(adjacency).scatter(2, top, True)
        plan = _Measures(adjacency, alpha, lengths.dtype)
        logits = logits.masked_fill(plan.off, -math.inf)
    log_total = torch.logsumexp(logits, dim=2, keepdim=True)
    proportional = (logits - log_total).exp()
    spread = torch.where(log_total > math.log(_NEIGHBOUR_WEIGHT_FLOOR), proportional, plan.even)
    # an isolated node's row is off the edges everywhere: no spread, all its mass kept
    return spread.masked_fill_(plan.off, 0.0).mul_(1.0 - alpha).add_(plan.kept)


def _edge_index(
    adjacency: torch.Tensor, directed: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded list of the edges of each graph: ``i < j`` (undirected) or every ``i -> j``.

    Returns ``(i, j, valid)``, each of shape (B, E) with E the largest edge count.
    """
    b, n, _ = adjacency.shape
    upper = (adjacency if directed else torch.triu(adjacency, diagonal=1)).reshape(b, n * n)
    counts = upper.sum(1)
    e = int(counts.max()) if b else 0
    order = torch.argsort((~upper).to(torch.int8), dim=1, stable=True)[:, :e]
    valid = torch.arange(e, device=adjacency.device).unsqueeze(0) < counts.unsqueeze(1)
    return order // n, order % n, valid


def _flow_edges(
    lengths: torch.Tensor, adjacency: torch.Tensor, restrict: bool
) -> tuple[
    torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor
]:
    """What a flow starts from: the adjacency (cut to the largest component of each graph when
    ``restrict``), its padded edge list ``(i, j, valid)``, the edge lengths ``w`` (B, E), 0 on
    padding, and the number of real edges per graph (B, 1), at least 1."""
    if restrict:
        core = largest_component(adjacency)
        adjacency = adjacency & core.unsqueeze(2) & core.unsqueeze(1)
    edges = _edge_index(adjacency)
    i, j, valid = edges
    rows = torch.arange(lengths.shape[0], device=lengths.device).unsqueeze(1)
    w = lengths[rows, i, j].masked_fill(~valid, 0.0)
    num_edges = valid.sum(1, keepdim=True).clamp_min(1).to(lengths.dtype)
    return adjacency, edges, w, num_edges


def _scatter_edges(
    values: torch.Tensor,
    i: torch.Tensor,
    j: torch.Tensor,
    valid: torch.Tensor,
    n: int,
    directed: bool = False,
) -> torch.Tensor:
    b = values.shape[0]
    out = values.new_zeros(b, n * n)
    values = values.masked_fill(~valid, 0.0)
    out.scatter_add_(1, i * n + j, values)
    if not directed:
        out.scatter_add_(1, j * n + i, values)
    return out.view(b, n, n)


def _neighbourhoods(adjacency: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed neighbourhood ``N[x]`` of every node as a padded index list.

    Returns ``(index (B, N, K), mask (B, N, K))`` with K the largest closed degree.
    """
    n = adjacency.shape[1]
    closed = adjacency | torch.eye(n, dtype=torch.bool, device=adjacency.device)
    k = int(closed.sum(2).max()) if closed.numel() else 1
    index = torch.argsort((~closed).to(torch.int8), dim=2, stable=True)[:, :, :k]
    return index, torch.gather(closed, 2, index)


def _edge_problems(
    neighbours: tuple[tuple[torch.Tensor, torch.Tensor], ...],
    dist: torch.Tensor,
    i: torch.Tensor,
    j: torch.Tensor,
    *tensors: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Each edge's transport problem restricted to ``N[x] x N[y]``.

    ``neighbours`` holds the closed neighbourhoods of the sources and of the targets
    (the same for undirected graphs; in- and out-neighbourhoods for directed ones).
    ``tensors`` are (B, E, N) node values (masses, potentials) of the edge problems;
    the first half is gathered on ``N[x]``, the second half on ``N[y]``. Returns the
    costs (B, E, K, K') (0 on padding), the two padding masks (B, E, K), (B, E, K') and
    the gathered tensors, 0 on padding.
    """
    (index_x, mask_x), (index_y, mask_y) = neighbours
    b, e = i.shape
    rows_g = torch.arange(b, device=dist.device).view(b, 1)
    rows, cols = index_x[rows_g, i], index_y[rows_g, j]
    row_mask, col_mask = mask_x[rows_g, i], mask_y[rows_g, j]
    flat = dist.reshape(b, -1)
    pairs = (rows.unsqueeze(3) * dist.shape[1] + cols.unsqueeze(2)).reshape(b, -1)
    cost = torch.gather(flat, 1, pairs).view(b, e, rows.shape[2], cols.shape[2])
    both = row_mask.unsqueeze(3) & col_mask.unsqueeze(2)
    cost = torch.where(both, cost, torch.zeros_like(cost))
    half = len(tensors) // 2
    out = []
    for t, (idx, m) in zip(tensors, [(rows, row_mask)] * half + [(cols, col_mask)] * half):
        out.append(
            torch.where(m, torch.gather(t, 2, idx), torch.zeros((), dtype=t.dtype, device=t.device))
        )
    return cost, row_mask, col_mask, out


def _split_surplus(
    surplus: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The transport problem of each edge from ``surplus = m_x - m_y``.

    Only the mass that must move counts: ``W(m_x, m_y) = W(s+, s-)`` for a cost that obeys
    the triangle inequality (shortest paths do), and the shared mass would otherwise leak
    under an entropic blur. Each problem is solved at unit mass.

    ``s+ = (|s| + s) / 2`` and ``s- = (|s| - s) / 2`` are the clamps' values exactly, but
    where the measures tie (``s = 0``, common at unit lengths) each side gets half the
    gradient: the mean of the two one-sided derivatives, what a central difference measures.

    Parameters
    ----------
    surplus : torch.Tensor, shape (B, E, N)
    mask : torch.Tensor, shape (B, E), bool
        Edges that may move mass (real edges of positive length).

    Returns
    -------
    source, target : torch.Tensor, shape (B, E, N)
        ``s+`` and ``s-`` at unit mass where mass moves; a point mass on node 0 elsewhere.
    mass : torch.Tensor, shape (B, E)
        The moving mass (the mean of the two sides' totals).
    moving : torch.Tensor, shape (B, E), bool
        ``mask`` and both totals above rounding (64 machine epsilons); elsewhere the
        measures are identical and nothing moves.
    """
    size = surplus.abs()
    source, target = (size + surplus) / 2, (size - surplus) / 2
    out_mass, in_mass = source.sum(-1, keepdim=True), target.sum(-1, keepdim=True)
    moving = torch.minimum(out_mass, in_mass) > _MOVING_EPS * torch.finfo(surplus.dtype).eps
    moving = moving & mask.unsqueeze(-1)
    point = torch.zeros_like(source[:1, :1])
    point[..., 0] = 1.0
    source = torch.where(moving, source / torch.where(moving, out_mass, 1.0), point)
    target = torch.where(moving, target / torch.where(moving, in_mass, 1.0), point)
    return source, target, ((out_mass + in_mass) / 2).squeeze(-1), moving.squeeze(-1)


class _Graphs:
    """What a curvature evaluation needs that depends on the graphs alone.

    :func:`ricci_flow` builds it once and reuses it at every step (the lengths change,
    the edges do not): the edge list and its gather indices, the node-measure masks, the
    pairs within three hops (the costs Sinkhorn must resolve), the Floyd-Warshall buffers
    and, on demand, the closed neighbourhoods of the exact solves.
    """

    def __init__(
        self,
        adjacency: torch.Tensor,
        edges: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        *,
        alpha: float,
        directed: bool = False,
    ) -> None:
        b, n, _ = adjacency.shape
        device = adjacency.device
        self.adjacency, self.edges, self.directed = adjacency, edges, directed
        i, j, _ = edges
        rows = torch.arange(b, device=device).unsqueeze(1)
        self.edge_entry = (rows * n + i) * n + j  # (B, E) into the flattened (B, N, N)
        self.source_rows = (rows * n + i).reshape(-1)  # (B E,) into the (B N, N) rows
        self.target_rows = (rows * n + j).reshape(-1)
        self.out_measures = _Measures(adjacency, alpha, torch.float64)
        self.in_measures = (
            _Measures(adjacency.transpose(1, 2), alpha, torch.float64)
            if directed
            else self.out_measures
        )
        eye = torch.eye(n, dtype=torch.bool, device=device)
        self.no_edge = torch.full((n, n), math.inf, dtype=torch.float64, device=device)
        self.no_edge.masked_fill_(eye, 0.0)
        both = adjacency | adjacency.transpose(1, 2)
        self.off_both = ~both
        self.edge_count = both.sum((1, 2)).clamp_min(1)
        step = both.double()
        closed = step + eye
        self.beyond_three = ~(torch.bmm(torch.bmm(closed, step), closed) > 0)
        self._dist = self._pivot = None
        self._closed: tuple | None = None

    def shortest_paths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Floyd-Warshall on float64 ``lengths`` (B, N, N), as
        :func:`~georag.geometry.graphs.shortest_paths` computes it (same pivots, same
        sums, so the same bits) but in reused buffers and without its input checks. The
        result is overwritten by the next call."""
        if self._dist is None or self._dist.dtype != lengths.dtype:
            self._dist, self._pivot = torch.empty_like(lengths), torch.empty_like(lengths)
            n = lengths.shape[1]
            self._cols = [self._dist[:, :, k : k + 1] for k in range(n)]
            self._rows = [self._dist[:, k : k + 1, :] for k in range(n)]
        dist, pivot = self._dist, self._pivot
        torch.where(self.adjacency, lengths, self.no_edge, out=dist)
        for col, row in zip(self._cols, self._rows):
            torch.minimum(dist, torch.add(col, row, out=pivot), out=dist)
        return dist

    def neighbourhoods(self) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
        """Closed neighbourhoods of the sources and of the targets (see
        :func:`_edge_problems`)."""
        if self._closed is None:
            out = _neighbourhoods(self.adjacency)
            source = _neighbourhoods(self.adjacency.transpose(1, 2)) if self.directed else out
            self._closed = (source, out)
        return self._closed


@dataclass
class _WarmStart:
    """Sinkhorn source potentials carried from one flow step to the next."""

    potential: torch.Tensor | None = None


def _warm_start(
    warm: _WarmStart, source: torch.Tensor, eps: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Starting scalings ``u = exp(f / eps)`` from the carried potentials ``f``.

    ``u`` is defined up to a factor per problem, and the support of ``source`` moves from
    one flow step to the next: the start is scaled to ``max u = 1`` over the current
    support. A problem whose carried potentials do not reach its support, or are not
    finite (a failed solve), starts from ones.
    """
    if warm.potential is None:
        return None
    empty = source <= 0
    logits = (warm.potential / eps.view(-1, 1, 1)).masked_fill_(empty, -math.inf)
    logits = logits.nan_to_num_(nan=-math.inf, posinf=math.inf, neginf=-math.inf)
    top = logits.amax(-1, keepdim=True)
    start = logits.sub_(top).exp_()
    ok = torch.isfinite(top) & ((start > 0) | empty).all(-1, keepdim=True)
    start = torch.where(ok, start, (~empty).to(source.dtype))
    return start, start


def _curvature(
    lengths: torch.Tensor,
    graphs: _Graphs,
    *,
    alpha: float,
    exp_power: float,
    method: str,
    epsilon: float,
    max_iter: int,
    tol: float,
    accuracy: float | None,
    transport_dtype: torch.dtype | None,
    warm: _WarmStart | None,
    base: float = math.e,
    nbr_topk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Curvature on the padded edge list ``graphs.edges``.

    Returns ``(kappa (B, E), converged (B, E), exact (B, E) or None)``; ``exact`` marks
    the edges whose transport was solved by the network simplex (None: no edge was).
    """
    adjacency, directed = graphs.adjacency, graphs.directed
    i, j, valid = graphs.edges
    b, n, _ = lengths.shape
    e = i.shape[1]
    # measures and distances in float64: the net masses m_x - m_y cancel, and the
    # certificate compares costs to each edge's own distance
    lengths64 = lengths.double()
    dist = graphs.shortest_paths(lengths64)
    measure = dict(alpha=alpha, exp_power=exp_power, base=base, nbr_topk=nbr_topk)
    out_measures = _node_measures(lengths64, adjacency, plan=graphs.out_measures, **measure)
    # GraphRicciCurvature's directed measures: the source spreads over its predecessors,
    # the target over its successors
    in_measures = (
        _node_measures(
            lengths64.transpose(1, 2),
            adjacency.transpose(1, 2),
            plan=graphs.in_measures,
            **measure,
        )
        if directed
        else out_measures
    )
    d_edge = dist.take(graphs.edge_entry)
    spread = valid & (d_edge >= _ZERO_DISTANCE)

    def problems(*tensors: torch.Tensor):
        """The edge problems on N[x] x N[y] (see :func:`_edge_problems`)."""
        return _edge_problems(graphs.neighbourhoods(), dist, i, j, *tensors)

    if method == "average":
        transport = _average_transport(
            adjacency, dist, d_edge, i, j, alpha=alpha, directed=directed
        )
        kappa = torch.where(spread, 1.0 - transport / d_edge.clamp_min(_ZERO_DISTANCE), 0.0)
        return kappa.to(lengths.dtype), torch.ones_like(valid), torch.zeros_like(valid)
    # only the mass that must move (directed or not); identical measures cost 0
    surplus = in_measures.view(b * n, n).index_select(0, graphs.source_rows)
    surplus = surplus.sub_(out_measures.view(b * n, n).index_select(0, graphs.target_rows))
    source, target, mass, moving = _split_surplus(surplus.view(b, e, n), spread)
    if method == "auto":
        support = 1 + max(graphs.out_measures.max_degree, graphs.in_measures.max_degree)
        method = "exact" if support <= EXACT_MAX_SUPPORT else "sinkhorn"
    if method == "exact":
        cost, _, _, (a, bb) = problems(source, target)
        unit = torch.zeros_like(d_edge)
        unit[moving] = emd(a[moving], bb[moving], cost[moving])
        converged, exact = valid.clone(), moving
    elif method == "batched":
        cost, _, _, (a, bb) = problems(source, target)
        unit, converged = _batched_transport(a, bb, cost, moving, d_edge / mass, accuracy)
        exact = _solve_uncertified(problems, source, target, moving, unit, converged)
        converged = converged | exact
    else:
        work = torch.float64 if accuracy is not None else transport_dtype or lengths.dtype
        eps, center = _sinkhorn_epsilon(lengths64, graphs, dist, epsilon=epsilon, dtype=work)
        src, dst, cost = source.to(work), target.to(work), dist.to(work)
        if warm is None:
            out = sinkhorn_shared_cost_scaled(
                src,
                dst,
                cost,
                epsilon=eps,
                start=2 * center,
                max_iter=max_iter,
                tol=tol,
                center=center,
            )
        else:
            out = _shared_cost_sinkhorn(
                src,
                dst,
                cost,
                eps,
                center,
                max_iter=max_iter,
                tol=tol,
                init=_warm_start(warm, src, eps),
            )
            warm.potential = eps.view(-1, 1, 1) * out.f.clamp_min(torch.finfo(work).tiny).log()
        unit = out.cost.double()
        converged = out.converged | ~moving
        if accuracy is not None:
            # certified: the exact cost lies in [lower, upper]; the estimate is the upper
            # bound (the rounded plan, the tighter of the two in practice), so its
            # curvature error is at most mass * (upper - lower) / d
            e64 = eps.double().view(-1, 1, 1)
            f = e64 * out.f.double().log() + center.double().view(-1, 1, 1)
            g = e64 * out.g.double().log()
            costs, _, _, (a, f_x, bb, g_y) = problems(source, f, target, g)
            bounds = transport_bounds(a, bb, costs, f_x, g_y, eps.double().view(-1, 1))
            unit = bounds.upper
            error = mass * (bounds.upper - bounds.lower) / d_edge.clamp_min(_ZERO_DISTANCE)
            converged = (error <= accuracy) | ~moving
        # re-solved exactly: uncertified edges (with a certificate) and non-finite ones
        # (always); without one, an edge that missed tol keeps its Sinkhorn value and
        # converged=False (the speed setting)
        if accuracy is None and bool(torch.isfinite(unit).all()):
            exact = None
        else:
            exact = _solve_uncertified(
                problems, source, target, moving, unit, converged | (accuracy is None)
            )
            if accuracy is not None:
                converged = converged | exact
    # kappa = 1 - W / d where mass moves, 1 between distinct identical measures, 0 on
    # zero-distance and padded edges (spread is False there)
    kappa = torch.where(
        moving, 1.0 - mass * unit / d_edge.clamp_min(_ZERO_DISTANCE), spread.to(unit.dtype)
    )
    return kappa.to(lengths.dtype), converged | ~valid, exact


def _solve_uncertified(
    problems, source, target, moving, unit: torch.Tensor, certified: torch.Tensor
) -> torch.Tensor:
    """Re-solve exactly, in place in ``unit`` (B, E), the moving edges that are not
    ``certified`` or whose cost is not finite; return which (B, E)."""
    exact = moving & ~(certified & torch.isfinite(unit))
    if bool(exact.any()):
        costs, _, _, (a, bb) = problems(source, target)
        unit.masked_scatter_(exact, emd(a[exact], bb[exact], costs[exact]))
    return exact


def _batched_transport(
    a: torch.Tensor,
    b: torch.Tensor,
    cost: torch.Tensor,
    moving: torch.Tensor,
    scale: torch.Tensor,
    accuracy: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit-mass transport cost of the moving edge problems by the batched interior point
    (:func:`~georag.geometry.transport_ipm.transport_ipm`), each run to the duality gap
    that its curvature needs.

    ``a``, ``b`` (B, E, K), (B, E, K') and ``cost`` (B, E, K, K') are the problems on
    ``N[x] x N[y]``; ``scale`` (B, E) is ``d(x, y) / mass``, so that a cost error ``err``
    is a curvature error ``err / scale``. Returns ``(cost (B, E), certified (B, E))``:
    the certified upper bound (0 where nothing moves) and where the bracket proves the
    curvature within ``accuracy``.
    """
    unit = torch.zeros_like(scale)
    certified = ~moving
    if not bool(moving.any()):
        return unit, certified
    c = cost[moving]
    top = c.amax((-2, -1)).clamp_min(torch.finfo(torch.float64).tiny)
    norm = scale[moving].clamp_min(_ZERO_DISTANCE) / top  # curvature error per unit gap
    gap = (0.25 * accuracy * norm).clamp_min(_GAP_FLOOR)
    out = transport_ipm(a[moving], b[moving], c / top[:, None, None], gap=gap)
    unit[moving] = out.upper * top
    certified = certified.masked_scatter(moving, (out.upper - out.lower).abs() / norm <= accuracy)
    return unit, certified


def _average_transport(
    adjacency: torch.Tensor,
    dist: torch.Tensor,
    d_edge: torch.Tensor,
    i: torch.Tensor,
    j: torch.Tensor,
    *,
    alpha: float,
    directed: bool,
) -> torch.Tensor:
    """GraphRicciCurvature's "ATD": ``alpha d(x, y)`` plus ``1 - alpha`` spread evenly over
    every pair (neighbour of x, neighbour of y), whatever the weights (B, E)."""
    rows = torch.arange(adjacency.shape[0], device=adjacency.device).unsqueeze(1)
    step = adjacency.double()
    near_x = (step.transpose(1, 2) if directed else step)[rows, i]  # (B, E, N)
    near_y = step[rows, j]
    pairs = near_x.sum(-1) * near_y.sum(-1)
    total = torch.einsum(
        "ben,bnm,bem->be", near_x, torch.where(torch.isfinite(dist), dist, 0.0), near_y
    )
    share = torch.where(pairs > 0, (1.0 - alpha) * total / pairs.clamp_min(1.0), 0.0)
    return alpha * d_edge + share


def _sinkhorn_epsilon(
    lengths: torch.Tensor,
    graphs: _Graphs,
    dist: torch.Tensor,
    *,
    epsilon: float,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-graph regularization and kernel centre.

    ``epsilon`` times the mean edge length, raised where the costs that matter would not
    fit the exponent range of ``dtype``. The costs that matter join a node of ``N[x]`` to
    one of ``N[y]`` over an edge ``xy``: pairs at most three hops apart
    (``graphs.beyond_three`` marks the others). The kernel is centred on half the widest
    of them; the scalings then span up to ``exp(widest / epsilon)``, which is kept within
    ``_KERNEL_SPAN`` times :func:`max_cost_over_epsilon` (80% of the exponent range).
    Returns ``(epsilon (B,), center (B,))``.
    """
    mean = lengths.masked_fill(graphs.off_both, 0.0).sum((1, 2)) / graphs.edge_count
    mean = torch.where(mean > 0, mean, 1.0)
    widest = dist.masked_fill(graphs.beyond_three, 0.0).amax((1, 2))
    eps = torch.maximum(epsilon * mean, widest / (_KERNEL_SPAN * max_cost_over_epsilon(dtype)))
    return eps.to(dtype), (widest / 2).to(dtype)


def _check_accuracy(accuracy: float | None, method: str) -> None:
    if accuracy is not None and not (math.isfinite(accuracy) and accuracy > 0):
        raise ValueError(f"accuracy must be positive and finite or None, got {accuracy}")
    if accuracy is None and method == "batched":
        raise ValueError(
            "accuracy must be positive with method='batched' (it certifies every edge)"
        )


def ollivier_ricci(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    method: str = "auto",
    epsilon: float = 0.03,
    max_iter: int = 1000,
    tol: float = 1e-5,
    accuracy: float | None = 5e-3,
    transport_dtype: torch.dtype | None = torch.float64,
    directed: bool = False,
    edge_mask: torch.Tensor | None = None,
    base: float = math.e,
    nbr_topk: int | None = None,
) -> torch.Tensor:
    """Ollivier-Ricci curvature ``kappa_xy = 1 - W(m_x, m_y) / d(x, y)`` of every edge.

    Parameters
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Non-negative edge lengths (read where ``adjacency``), symmetric unless
        ``directed``. Any value from 0 up works; ``kappa = 0`` where ``d(x, y) < 1e-7``.
    adjacency : torch.Tensor, shape (B, N, N), bool
        Edge mask, no self loops, symmetric unless ``directed``. Any number of
        components; isolated (e.g. padding) nodes carry no edge.
    alpha, exp_power, base, nbr_topk
        Node measures, see :func:`node_measures`.
    method : {"auto", "exact", "sinkhorn", "batched", "average"}
        ``"exact"``: POT's network simplex per edge on the two neighbourhoods
        (:func:`~georag.geometry.transport.emd`, CPU); ``"sinkhorn"``: batched entropic
        transport (:func:`~georag.geometry.transport.sinkhorn_shared_cost_scaled`),
        certified per edge within ``accuracy`` and re-solved exactly where the
        certificate fails; ``"batched"``: every edge problem at once by the batched
        interior point (:func:`~georag.geometry.transport_ipm.transport_ipm`, any
        device), each run to the duality gap that certifies its curvature within
        ``accuracy`` (exact-grade at ``accuracy=1e-9``; the rare uncertified edge is
        solved exactly); ``"auto"``: exact when every closed neighbourhood has at most
        :data:`EXACT_MAX_SUPPORT` nodes, else Sinkhorn; ``"average"``: GraphRicciCurvature's
        average transportation distance ("ATD", no optimisation).
    epsilon, max_iter, tol : float, int, float
        Sinkhorn regularization relative to each graph's mean edge length (raised where
        the costs between two neighbourhoods would not fit the kernel's exponent range;
        epsilon-scaled from the widest such cost), and the iteration cap and L1 marginal
        tolerance of the last stage.
    accuracy : float or None
        Sinkhorn and batched: bound on each edge's curvature error. The plan's dual and
        primal bounds (:func:`~georag.geometry.transport.transport_bounds`) bracket the
        exact cost; edges whose bracket is wider than ``accuracy d(x, y)``, or whose solve
        is not finite, are solved exactly. None (Sinkhorn only) skips the certificate
        (speed; the error is then unbounded on edges far shorter than epsilon).
    transport_dtype : torch.dtype, optional
        Dtype of the Sinkhorn iterations when ``accuracy`` is None (with a certificate
        they run in float64); None uses that of ``lengths``. The result has the dtype of
        ``lengths``; measures and distances are computed in float64 whatever the input.
    directed : bool
        Directed graphs as GraphRicciCurvature treats them: for the edge ``x -> y``,
        ``m_x`` spreads over the predecessors of ``x`` (weights of ``v -> x``), ``m_y``
        over the successors of ``y``, and ``d`` is the directed shortest-path length.
    edge_mask : torch.Tensor, shape (B, N, N), bool, optional
        Compute only these edges (a subset of ``adjacency``; symmetrised when
        undirected); the others get 0.

    Returns
    -------
    torch.Tensor, shape (B, N, N)
        Curvature on the edges (symmetric when undirected), 0 elsewhere. Differentiable in
        ``lengths``, ``alpha`` and ``exp_power`` when one of them is a tensor that requires
        grad (:mod:`georag.geometry.ricci_grad`).
    """
    from georag.geometry import ricci_grad  # imports this module: import on call

    if ricci_grad.wants_grad(lengths, alpha, exp_power):
        return ricci_grad.ollivier_ricci(
            lengths,
            adjacency,
            alpha=alpha,
            exp_power=exp_power,
            method=method,
            epsilon=epsilon,
            max_iter=max_iter,
            tol=tol,
            transport_dtype=transport_dtype,
            directed=directed,
            edge_mask=edge_mask,
        )
    alpha, exp_power = float(alpha), float(exp_power)  # tensors without grad
    _check_graph(lengths, adjacency, directed)
    _check_measure_options(alpha, exp_power, base, nbr_topk)
    _check_method(method)
    _check_accuracy(accuracy, method)
    chosen = adjacency
    if edge_mask is not None:
        if edge_mask.shape != adjacency.shape or edge_mask.dtype != torch.bool:
            raise ValueError(
                f"edge_mask must be a bool tensor of shape "
                f"{tuple(adjacency.shape)}, got {edge_mask.dtype} "
                f"{tuple(edge_mask.shape)}"
            )
        chosen = adjacency & (edge_mask if directed else edge_mask | edge_mask.transpose(1, 2))
    edges = _edge_index(chosen, directed)
    kappa, _, _ = _curvature(
        lengths,
        _Graphs(adjacency, edges, alpha=alpha, directed=directed),
        alpha=alpha,
        exp_power=exp_power,
        method=method,
        epsilon=epsilon,
        max_iter=max_iter,
        tol=tol,
        accuracy=accuracy,
        transport_dtype=transport_dtype,
        warm=None,
        base=base,
        nbr_topk=nbr_topk,
    )
    return _scatter_edges(kappa, *edges, n=lengths.shape[1], directed=directed)


def _check_method(method: str) -> None:
    if method not in CURVATURE_METHODS:
        raise ValueError(f"method must be one of {CURVATURE_METHODS}, got {method!r}")


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
        Whether every curvature of that graph, at every step, is within its stated
        accuracy: with ``accuracy`` set, certified within it or solved exactly (always
        True unless the network simplex failed); with ``accuracy=None``, every Sinkhorn
        solve reached its marginal tolerance ``tol``.
    exact_solves : torch.Tensor, shape (B,), long
        Edge transport problems of that graph solved by the network simplex over the
        whole flow (method "exact": all; Sinkhorn: those not certified, or not finite).
    history_lengths, history_curvature : torch.Tensor, shape (T + 1, B, N, N), optional
        Lengths and curvature before the first and after every iteration (frozen after
        a graph stops), when ``history=True``.
    """

    lengths: torch.Tensor
    curvature: torch.Tensor
    adjacency: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor
    exact_solves: torch.Tensor
    history_lengths: torch.Tensor | None = None
    history_curvature: torch.Tensor | None = None


def _warn_missed(
    steps_missed: int, graphs_missed: int, b: int, tol: float, max_iter: int, depth: int
) -> None:
    """Warn (once per call) that ``steps_missed`` solves missed ``tol``; ``depth``: calls
    between the user's and this one."""
    if steps_missed:
        warnings.warn(
            f"ricci_flow: {steps_missed} (graph, step) curvature solves missed the Sinkhorn "
            f"tolerance tol={tol} within max_iter={max_iter} (converged=False on "
            f"{graphs_missed} of {b} graphs); pass accuracy= for certified curvature",
            RicciConvergenceWarning,
            stacklevel=depth + 1,
        )


def _compiled_flow(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    iterations: int,
    step: float,
    normalize: bool,
    delta: float,
    restrict: bool,
    history: bool,
    alpha: float,
    exp_power: float,
    base: float,
    epsilon: float,
    max_iter: int,
    tol: float,
    transport_dtype: torch.dtype | None,
) -> RicciFlowResult | None:
    """:func:`ricci_flow`'s uncertified Sinkhorn flow by
    :func:`~georag.geometry.ricci_compiled.flow_batch`; None when a transport was not
    finite (the caller then runs the tensor path, which re-solves those edges exactly).
    The kernel's exponent range is that of the dtype the tensor path would iterate in."""
    b, n, _ = lengths.shape
    work = transport_dtype or lengths.dtype
    limit = _KERNEL_SPAN * max_cost_over_epsilon(work)
    floor = math.exp(-1.5 * max_cost_over_epsilon(work))
    params = np.array(
        [alpha, exp_power, math.log(base), epsilon, tol, limit, floor, max_iter]
        + [_ZERO_DISTANCE, math.log(_NEIGHBOUR_WEIGHT_FLOOR)]
        + [_MOVING_EPS * torch.finfo(torch.float64).eps],
        np.float64,
    )
    steps = iterations + 1 if history else 0
    out_lengths, out_kappa = np.zeros((b, n, n)), np.zeros((b, n, n))
    out_adjacency = np.zeros((b, n, n), dtype=bool)
    trail_w, trail_k = np.zeros((steps, b, n, n)), np.zeros((steps, b, n, n))
    ran, missed = np.zeros(b, np.int64), np.zeros(b, np.int64)
    converged, finite = np.zeros(b, dtype=bool), np.zeros(b, dtype=bool)
    ricci_compiled.flow_batch(
        lengths.detach().double().numpy(),
        adjacency.numpy(),
        iterations,
        step,
        normalize,
        delta,
        restrict,
        params,
        out_lengths,
        out_kappa,
        out_adjacency,
        trail_w,
        trail_k,
        ran,
        converged,
        missed,
        finite,
    )
    if not finite.all():
        return None
    _warn_missed(int(missed.sum()), int((~converged).sum()), b, tol, max_iter, depth=3)
    last = int(ran.max()) + 1 if b else 1

    def tensor(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(values).to(lengths.dtype)

    return RicciFlowResult(
        lengths=tensor(out_lengths),
        curvature=tensor(out_kappa),
        adjacency=torch.from_numpy(out_adjacency),
        iterations=torch.from_numpy(ran),
        converged=torch.from_numpy(converged),
        exact_solves=torch.zeros(b, dtype=torch.long),
        history_lengths=tensor(trail_w[:last]) if history else None,
        history_curvature=tensor(trail_k[:last]) if history else None,
    )


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
    method: str = "auto",
    epsilon: float = 0.1,
    max_iter: int = 50,
    tol: float = 1e-3,
    accuracy: float | None = 5e-3,
    transport_dtype: torch.dtype | None = None,
    history: bool = False,
    base: float = math.e,
    nbr_topk: int | None = None,
    restrict: bool = True,
    backend: str = "auto",
) -> RicciFlowResult:
    """Normalized discrete Ricci flow on B graphs at once.

    Parameters
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Non-negative symmetric initial edge lengths (read where ``adjacency``).
    adjacency : torch.Tensor, shape (B, N, N), bool
        Symmetric edge mask. Only the largest connected component of each graph flows
        (as in GraphRicciCurvature); the other edges are dropped from the result
        (``restrict=False``: every component flows, normalized together).
    iterations : int
        Flow steps M.
    step : float
        Step size in ``w <- w - step * kappa * w``.
    alpha, exp_power, base, nbr_topk
        Node measures, see :func:`node_measures`.
    normalize : bool
        Rescale after each step so that the mean edge length is 1.
    delta : float
        A graph stops once the spread of its curvatures is below ``delta``.
    method, epsilon, max_iter, tol, accuracy, transport_dtype
        Curvature solver, see :func:`ollivier_ricci` (``"average"`` is not a flow
        method). Sinkhorn potentials are warm-started from one step to the next, so the
        Sinkhorn defaults are looser than :func:`ollivier_ricci`'s (0.1, 50, 1e-3).
        The flow amplifies curvature errors through the lengths, so only exact solves
        (``"auto"`` on small neighbourhoods, ``"exact"``) follow GraphRicciCurvature's
        trajectory over tens of steps; certified Sinkhorn keeps every step within
        ``accuracy`` of the exact curvature of *its* lengths. Ricci-Filtration runs
        ``method="sinkhorn", accuracy=None`` (its kept set matches GraphRicciCurvature's
        on over 99% of SciFact candidates); such a flow warns once
        (:class:`RicciConvergenceWarning`) when a step missed ``tol``.
    history : bool
        Also return every intermediate length and curvature matrix.
    backend : {"auto", "tensor", "compiled"}
        ``"compiled"``: the uncertified Sinkhorn flow (``method="sinkhorn",
        accuracy=None``, ``nbr_topk=None``, CPU tensors, no gradient) as one compiled
        loop over the graphs (:mod:`georag.geometry.ricci_compiled`, numba), several
        times faster on small graphs and iterating in float64; ``"tensor"``: batched
        tensor ops on any device; ``"auto"``: compiled where it applies.

    Returns
    -------
    RicciFlowResult
        Differentiable in ``lengths``, ``step``, ``alpha`` and ``exp_power`` when one of
        them is a tensor that requires grad (:func:`georag.geometry.ricci_grad.ricci_flow`,
        which can also checkpoint the steps).
    """
    from georag.geometry import ricci_grad  # imports this module: import on call

    if ricci_grad.wants_grad(lengths, step, alpha, exp_power):
        return ricci_grad.ricci_flow(
            lengths,
            adjacency,
            iterations=iterations,
            step=step,
            alpha=alpha,
            exp_power=exp_power,
            normalize=normalize,
            delta=delta,
            method=method,
            epsilon=epsilon,
            max_iter=max_iter,
            tol=tol,
            transport_dtype=transport_dtype,
            history=history,
            base=base,
            nbr_topk=nbr_topk,
            restrict=restrict,
        )
    step, alpha, exp_power = float(step), float(alpha), float(exp_power)  # no grad
    _check_graph(lengths, adjacency)
    _check_measure_options(alpha, exp_power, base, nbr_topk)
    _check_method(method)
    if method == "average":
        raise ValueError("method 'average' is not a flow method; use auto, exact or sinkhorn")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    _check_accuracy(accuracy, method)
    if backend not in FLOW_BACKENDS:
        raise ValueError(f"backend must be one of {FLOW_BACKENDS}, got {backend!r}")
    compiled = (
        method == "sinkhorn"
        and accuracy is None
        and nbr_topk is None
        and lengths.device.type == "cpu"
    )
    if backend == "compiled" and not compiled:
        raise ValueError(
            "backend='compiled' runs method='sinkhorn', accuracy=None, nbr_topk=None on CPU tensors"
        )
    if compiled and backend != "tensor":
        result = _compiled_flow(
            lengths,
            adjacency,
            iterations=iterations,
            step=step,
            normalize=normalize,
            delta=delta,
            restrict=restrict,
            history=history,
            alpha=alpha,
            exp_power=exp_power,
            base=base,
            epsilon=epsilon,
            max_iter=max_iter,
            tol=tol,
            transport_dtype=transport_dtype,
        )
        if result is not None:
            return result
    b, n, _ = lengths.shape
    adjacency, edges, w, num_edges = _flow_edges(lengths, adjacency, restrict)
    i, j, valid = edges
    warm = _WarmStart() if method == "sinkhorn" else None
    options = dict(
        alpha=alpha,
        exp_power=exp_power,
        method=method,
        epsilon=epsilon,
        max_iter=max_iter,
        tol=tol,
        accuracy=accuracy,
        transport_dtype=transport_dtype,
        warm=warm,
        base=base,
        nbr_topk=nbr_topk,
    )

    full = bool(valid.all())  # no padded edge (one graph, or graphs of equal size)
    pairs = torch.cat([i * n + j, j * n + i], 1)

    def matrix(values: torch.Tensor) -> torch.Tensor:
        """(B, E) edge values as the symmetric (B, N, N) matrix (:func:`_scatter_edges`)."""
        if not full:
            return _scatter_edges(values, i, j, valid, n)
        return values.new_zeros(b, n * n).scatter_add_(1, pairs, values.repeat(1, 2)).view(b, n, n)

    graphs = _Graphs(adjacency, edges, alpha=alpha)
    kappa, ok, exact = _curvature(matrix(w), graphs, **options)
    converged = ok.all(1)
    exact_solves = torch.zeros(b, dtype=torch.long, device=lengths.device)
    if exact is not None:
        exact_solves += exact.sum(1)
    missed = (~converged).long()  # (graph, step) solves that missed tol
    active = torch.ones(b, dtype=torch.bool, device=lengths.device)
    ran = torch.zeros(b, dtype=torch.long, device=lengths.device)
    trail_w, trail_k = [matrix(w)], [matrix(kappa)]
    for _ in range(iterations):
        running = int(active.sum())
        if not running:
            break
        stepped = w - step * kappa * w
        if normalize:
            total = stepped.sum(1, keepdim=True)
            stepped = stepped * (num_edges / torch.where(total > 0, total, num_edges))
        if not full:
            stepped = stepped.masked_fill(~valid, 0.0)
        new_kappa, ok, exact = _curvature(matrix(stepped), graphs, **options)
        step_ok = ok.all(1)
        if running == b:  # every graph still flows: nothing to freeze
            w, kappa = stepped, new_kappa
            if exact is not None:
                exact_solves += exact.sum(1)
            missed += ~step_ok
            converged &= step_ok
            ran += 1
        else:
            keep = active.unsqueeze(1)
            if exact is not None:
                exact_solves += (exact & keep).sum(1)
            missed += ~step_ok & active
            w = torch.where(keep, stepped, w)
            kappa = torch.where(keep, new_kappa, kappa)
            converged &= step_ok | ~active
            ran += active.long()
        if not valid.shape[1]:  # no edge: flat
            spread = torch.zeros(b, dtype=kappa.dtype, device=kappa.device)
        elif full:
            spread = kappa.amax(1) - kappa.amin(1)
        else:
            spread = kappa.masked_fill(~valid, -math.inf).amax(1) - kappa.masked_fill(
                ~valid, math.inf
            ).amin(1)
        active &= ~(spread < delta)
        if history:
            trail_w.append(matrix(w))
            trail_k.append(matrix(kappa))
    _warn_missed(int(missed.sum()), int((~converged).sum()), b, tol, max_iter, depth=2)
    return RicciFlowResult(
        lengths=matrix(w),
        curvature=matrix(kappa),
        adjacency=adjacency,
        iterations=ran,
        converged=converged,
        exact_solves=exact_solves,
        history_lengths=torch.stack(trail_w) if history else None,
        history_curvature=torch.stack(trail_k) if history else None,
    )
