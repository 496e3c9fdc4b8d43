"""Ollivier-Ricci curvature of every edge of a batch of graphs, without gradients.

Each edge's transport problem lives on the closed neighbourhoods ``N[x] x N[y]``; it is
solved by POT's network simplex (``"exact"``), batched entropic transport with a per-edge
certificate (``"sinkhorn"``, :mod:`georag.geometry.transport`), the batched interior point
(``"batched"``, :mod:`georag.geometry.transport_ipm`) or GraphRicciCurvature's average
transportation distance (``"average"``). What depends on the graphs alone (:class:`_Graphs`)
is built once and reused by every step of a flow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from georag.geometry.ricci.common import (
    _GAP_FLOOR,
    _KERNEL_SPAN,
    _ZERO_DISTANCE,
    EXACT_MAX_SUPPORT,
    _check_accuracy,
    _check_graph,
    _check_measure_options,
    _check_method,
    _edge_index,
    _scatter_edges,
)
from georag.geometry.ricci.measures import _Measures, _node_measures, _split_surplus
from georag.geometry.transport import (
    _shared_cost_sinkhorn,
    emd,
    max_cost_over_epsilon,
    sinkhorn_shared_cost_scaled,
    transport_bounds,
)
from georag.geometry.transport_ipm import transport_ipm


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


def ollivier_ricci(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    directed: bool,
    edge_mask: torch.Tensor | None,
    **options,
) -> torch.Tensor:
    """:func:`georag.geometry.ricci.ollivier_ricci` without gradients (same parameters;
    ``options`` are those of :func:`_curvature`: ``alpha``, ``exp_power``, ``method``,
    ``epsilon``, ``max_iter``, ``tol``, ``accuracy``, ``transport_dtype``, ``base``,
    ``nbr_topk``)."""
    _check_graph(lengths, adjacency, directed)
    alpha, method = options["alpha"], options["method"]
    _check_measure_options(alpha, options["exp_power"], options["base"], options["nbr_topk"])
    _check_method(method)
    _check_accuracy(options["accuracy"], method)
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
    graphs = _Graphs(adjacency, edges, alpha=alpha, directed=directed)
    kappa, _, _ = _curvature(lengths, graphs, warm=None, **options)
    return _scatter_edges(kappa, *edges, n=lengths.shape[1], directed=directed)
