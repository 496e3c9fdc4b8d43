"""Ollivier-Ricci curvature of every edge of a large sparse graph, without all-pairs paths.

:func:`georag.geometry.ricci.ollivier_ricci` works on dense (B, N, N) batches of small
graphs. A corpus graph (thousands of nodes, a k-NN graph say) needs another route: the
transport problem of an edge ``x y`` moves ``m_x`` (on the closed neighbourhood
``N[x]``) to ``m_y`` (on ``N[y]``), so only the distances between ``N[x]`` and ``N[y]``
matter, never an N x N matrix. As in the dense path only the net masses move,
``W(m_x, m_y) = W((m_x - m_y)+, (m_y - m_x)+)`` (shortest paths obey the triangle
inequality), which drops the shared mass of common neighbours from the problem.

Distances: each needed distance ``d(u, v)``, ``u`` in ``N[x]``, ``v`` in ``N[y]``, is at
most the three-hop path ``u - x - y - v``; a Dijkstra search from ``u`` cut at the
largest such bound over the pairs it serves (scipy's ``limit``) finds it exactly, a few
hundred sources at a time. This part runs on the CPU (scipy) for every ``method`` by
default; ``distances="torch"`` runs Bellman-Ford sweeps on the device of ``lengths``
instead, each source cut at its own bound (exact too). Measured on the SciFact k-NN graph
(256 sources, 1 CPU thread, loaded machine): scipy 0.78 s, torch sweeps 17.2 s on the CPU
(8 sweeps); a GPU was not available to measure them there.

Transport, by ``method``:

- ``"exact"`` (the reference): POT's network simplex per edge
  (:func:`georag.geometry.transport.emd_many`), a Python loop around its C++ solver;
- ``"batched"``: the edge problems grouped by support size (padded to a ladder of
  sizes), their cost blocks assembled as tensors on the device of ``lengths``, and solved
  together by the batched interior-point method of
  :func:`georag.geometry.transport_ipm.transport_ipm`. Every edge is certified: its
  curvature error is at most ``accuracy`` (the bracket ``[lower, upper]`` on its exact
  cost, relative to ``d(x, y)``); the few whose bracket is wider are re-solved by the
  network simplex;
- ``"auto"`` (default): ``"exact"`` for CPU tensors, ``"batched"`` for tensors on any
  other device. On one CPU thread the network simplex loop is the faster one at
  neighbourhood sizes of tens of nodes (SciFact k-NN graph, 36,387 edges: transport 4 s
  exact against 21 s batched, scripts/bench_sparse_ricci.py); the batched solver is
  meant for a GPU, where it has not been measured.

The semantics are those of :func:`~georag.geometry.ricci.ollivier_ricci` and of
GraphRicciCurvature 0.6.1 (``method="OTD"``): measures ``alpha`` at the node and
``base ** (-w ** exp_power)`` over the neighbours (evenly when their sum is below 1e-7),
curvature ``1 - W / d(x, y)`` with the graph distance, 0 where ``d < 1e-7``, 1 where the
two measures coincide. Everything is computed in float64 whatever the input dtype.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from georag.geometry.transport import emd_many
from georag.geometry.transport_ipm import transport_ipm

__all__ = ["SPARSE_METHODS", "sparse_ollivier_ricci"]

#: Transport solvers of :func:`sparse_ollivier_ricci` ("auto": exact on CPU tensors,
#: batched elsewhere).
SPARSE_METHODS = ("auto", "exact", "batched")
_DISTANCES = ("scipy", "torch")

_log = logging.getLogger(__name__)
_NEIGHBOUR_WEIGHT_FLOOR = 1e-7  # GraphRicciCurvature's EPSILON
_ZERO_DISTANCE = 1e-7
_TINY_MASS = 64 * float(np.finfo(np.float64).eps)  # identical measures below this
_GAP_FLOOR = 1e-13  # the interior point's duality gap is not resolved below rounding
_BUCKETS = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256])


def _check_edges(edge_index: torch.Tensor, lengths: torch.Tensor, num_nodes: int) -> None:
    if edge_index.dim() != 2 or edge_index.shape[0] != 2 or edge_index.dtype != torch.long:
        raise ValueError(
            f"edge_index must be a long tensor of shape (2, E), got "
            f"{edge_index.dtype} {tuple(edge_index.shape)}"
        )
    if lengths.shape != (edge_index.shape[1],) or not lengths.is_floating_point():
        raise ValueError(
            f"lengths must be a floating tensor of shape ({edge_index.shape[1]},), "
            f"got {lengths.dtype} {tuple(lengths.shape)}"
        )
    if not torch.isfinite(lengths).all() or (lengths < 0).any():
        raise ValueError("lengths must be finite and non-negative")
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(f"edge_index must hold node ids in [0, {num_nodes})")
    if (edge_index[0] == edge_index[1]).any():
        raise ValueError("edge_index must hold no self loops")
    low, high = edge_index.min(0).values, edge_index.max(0).values
    if torch.unique(low * num_nodes + high).numel() != edge_index.shape[1]:
        raise ValueError("edge_index must list each undirected edge once")


@dataclass(frozen=True)
class _Problems:
    """The transport problems of the moving edges, flat (numpy, float64).

    Edge ``k`` (of ``edges``) moves ``source[src[k]:src[k+1]]`` (unit mass) onto
    ``target[dst[k]:dst[k+1]]``; its costs are ``cost[pair[k]:pair[k+1]]``, row-major
    (sources x targets). ``mass`` is the mass that moves, ``distance`` ``d(x, y)``.
    """

    edges: np.ndarray
    mass: np.ndarray
    distance: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    pair: np.ndarray
    source: np.ndarray
    target: np.ndarray
    cost: np.ndarray

    def block(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = self.source[self.src[k] : self.src[k + 1]]
        b = self.target[self.dst[k] : self.dst[k + 1]]
        return a, b, self.cost[self.pair[k] : self.pair[k + 1]].reshape(len(a), len(b))


def _ranges(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, position)`` of the concatenated ranges ``start[k] + arange(count[k])``."""
    owner = np.repeat(np.arange(len(count)), count)
    offsets = np.concatenate([[0], np.cumsum(count)])
    return owner, start[owner] + np.arange(offsets[-1]) - offsets[owner]


def _scipy_search(graph):
    """Dijkstra searches by scipy (CPU), cut at the largest reach of the block."""
    from scipy.sparse.csgraph import dijkstra

    def search(block, reach, rows, cols):
        limit = float(reach.max()) * (1 + 1e-9) + 1e-300
        return dijkstra(graph, directed=False, indices=block, limit=limit)[rows, cols]

    return search


def _torch_search(tail, head, arc_w, n, device):
    """Bellman-Ford sweeps in torch on ``device``, each source cut at its own reach: a
    path no longer than the reach has every prefix within it, so the pruning is exact."""
    as_t = lambda v: torch.as_tensor(v, device=device)  # noqa: E731
    tail_t, head_t, w_t = as_t(tail), as_t(head), as_t(arc_w)

    def search(block, reach, rows, cols):
        limit = as_t(reach * (1 + 1e-9) + 1e-300)[:, None]
        dist = torch.full((len(block), n), math.inf, dtype=torch.float64, device=device)
        dist[torch.arange(len(block), device=device), as_t(block)] = 0.0
        heads = head_t.expand(len(block), -1)
        while True:
            reached = dist[:, tail_t] + w_t
            reached = reached.masked_fill(reached > limit, math.inf)
            new = dist.scatter_reduce(1, heads, reached, "amin")
            if torch.equal(new, dist):
                return dist[as_t(rows), as_t(cols)].cpu().numpy()
            dist = new

    return search


def _distances(
    search, u: np.ndarray, v: np.ndarray, bound: np.ndarray, n: int, chunk: int
) -> np.ndarray:
    """Exact ``d(u_k, v_k)`` given ``d(u_k, v_k) <= bound_k``, by bounded searches.

    Each source is searched as far as its farthest bound; sources of similar reach share
    a chunk (scipy's ``limit`` is one number per call).
    """
    out = np.empty(len(u))
    by_source = np.argsort(u, kind="stable")
    first = np.searchsorted(u[by_source], np.arange(n + 1))
    sources = np.flatnonzero(first[1:] > first[:-1])
    reach = np.zeros(n)
    if len(sources):
        reach[sources] = np.maximum.reduceat(bound[by_source], first[sources])
    sources = sources[np.argsort(reach[sources], kind="stable")]
    slot = np.full(n, -1)
    for k in range(0, len(sources), chunk):
        block = sources[k : k + chunk]
        _, picks = _ranges(first[block], first[block + 1] - first[block])
        picks = by_source[picks]
        slot[block] = np.arange(len(block))
        out[picks] = search(block, reach[block], slot[u[picks]], v[picks])
    if not np.isfinite(out).all():
        raise RuntimeError("a neighbourhood distance exceeded its three-hop bound")
    return out


def _problems(
    x_of: np.ndarray,
    y_of: np.ndarray,
    w: np.ndarray,
    n: int,
    *,
    alpha: float,
    exp_power: float,
    base: float,
    chunk: int,
    device: torch.device | None,
) -> tuple[_Problems, np.ndarray]:
    """The net-mass transport problem of every moving edge (distances by scipy, or by
    torch on ``device`` when given).

    Returns ``(problems, d(x, y) of every edge (E,))``.
    """
    import scipy.sparse as sp

    e = len(w)
    # arcs in both directions, grouped by tail (CSR order)
    tail = np.concatenate([x_of, y_of])
    head = np.concatenate([y_of, x_of])
    arc_w = np.concatenate([w, w])
    order = np.lexsort((head, tail))
    tail, head, arc_w = tail[order], head[order], arc_w[order]
    degree = np.bincount(tail, minlength=n)
    start = np.concatenate([[0], np.cumsum(degree)])
    # node measures: base ** (-w ** p) in log space, per tail
    logits = -math.log(base) * arc_w**exp_power
    top = np.full(n, -np.inf)
    np.maximum.at(top, tail, logits)
    total = np.zeros(n)
    np.add.at(total, tail, np.exp(logits - top[tail]))
    log_total = top[tail] + np.log(total[tail])
    spread = np.where(
        log_total > math.log(_NEIGHBOUR_WEIGHT_FLOOR),
        np.exp(logits - log_total),
        1.0 / degree[tail],
    )
    arc_mass = (1.0 - alpha) * spread
    if device is None:
        search = _scipy_search(sp.csr_matrix((arc_w, (tail, head)), shape=(n, n)))
    else:
        search = _torch_search(tail, head, arc_w, n, device)

    def closed(ends: np.ndarray) -> tuple[np.ndarray, ...]:
        """(edge, node, mass, hop length) over the closed neighbourhood of each end."""
        owner, arc = _ranges(start[ends], degree[ends] + 1)
        last = arc == start[ends][owner] + degree[ends][owner]
        arc = np.minimum(arc, len(tail) - 1)
        node = np.where(last, ends[owner], head[arc])
        return (
            owner,
            node,
            np.where(last, alpha, arc_mass[arc]),
            np.where(last, 0.0, arc_w[arc]),
        )

    # net masses m_x - m_y per (edge, node); sources keep their hop to x, targets to y
    own_x, node_x, mass_x, hop_x = closed(x_of)
    own_y, node_y, mass_y, hop_y = closed(y_of)
    keys, inverse = np.unique(
        np.concatenate([own_x * n + node_x, own_y * n + node_y]), return_inverse=True
    )
    split = len(own_x)
    net = np.bincount(inverse, np.concatenate([mass_x, -mass_y]), minlength=len(keys))
    hop = np.zeros(len(keys))
    hop[inverse[:split]] = hop_x
    hop[inverse[split:]] = np.where(net[inverse[split:]] < 0, hop_y, hop[inverse[split:]])
    owner, node = keys // n, keys % n
    is_src, is_dst = net > 0, net < 0
    out_mass = np.bincount(owner[is_src], net[is_src], minlength=e)
    in_mass = np.bincount(owner[is_dst], -net[is_dst], minlength=e)
    # d(x, y) of every edge, and the costs of the moving ones
    d_xy = _distances(search, x_of, y_of, w, n, chunk)
    moving = (np.minimum(out_mass, in_mass) > _TINY_MASS) & (d_xy >= _ZERO_DISTANCE)
    keep = moving[owner]
    edges = np.flatnonzero(moving)
    renumber = np.cumsum(moving) - 1
    src_own, dst_own = renumber[owner[is_src & keep]], renumber[owner[is_dst & keep]]
    src_node, dst_node = node[is_src & keep], node[is_dst & keep]
    src_hop, dst_hop = hop[is_src & keep], hop[is_dst & keep]
    source = net[is_src & keep] / out_mass[edges][src_own]
    target = -net[is_dst & keep] / in_mass[edges][dst_own]
    n_src = np.bincount(src_own, minlength=len(edges))
    n_dst = np.bincount(dst_own, minlength=len(edges))
    src = np.concatenate([[0], np.cumsum(n_src)])
    dst = np.concatenate([[0], np.cumsum(n_dst)])
    pair = np.concatenate([[0], np.cumsum(n_src * n_dst)])
    k_of, local = _ranges(np.zeros(len(edges), dtype=np.int64), n_src * n_dst)
    i = src[k_of] + local // n_dst[k_of]
    j = dst[k_of] + local % n_dst[k_of]
    bound = src_hop[i] + w[edges][k_of] + dst_hop[j]
    cost = _distances(search, src_node[i], dst_node[j], bound, n, chunk)
    mass = (out_mass[edges] + in_mass[edges]) / 2
    problems = _Problems(edges, mass, d_xy[edges], src, dst, pair, source, target, cost)
    return problems, d_xy


def _bucket(size: np.ndarray) -> np.ndarray:
    """Padded size: the smallest ladder size that holds ``size`` (multiples of 64 past
    the ladder)."""
    at = np.searchsorted(_BUCKETS, size)
    over = at >= len(_BUCKETS)
    return np.where(over, -(-size // 64) * 64, _BUCKETS[np.minimum(at, len(_BUCKETS) - 1)])


def _batched(
    problems: _Problems, device: torch.device, accuracy: float, batch_elements: int
) -> tuple[np.ndarray, np.ndarray]:
    """Unit-mass transport cost of every problem by the batched interior point.

    Returns ``(cost (K,), certified (K,))``: ``certified`` where the curvature error is
    at most ``accuracy``.
    """
    n_src, n_dst = np.diff(problems.src), np.diff(problems.dst)
    # the smaller side runs along the columns: the Schur complement is columns x columns
    flip = n_dst > n_src
    rows, cols = np.where(flip, n_dst, n_src), np.where(flip, n_src, n_dst)
    pad_r, pad_c = _bucket(rows), _bucket(cols)
    unit = np.zeros(len(rows))
    certified = np.zeros(len(rows), dtype=bool)
    as_t = lambda v: torch.as_tensor(v, device=device)  # noqa: E731
    cost_t = as_t(problems.cost)
    # sources then targets in one flat tensor; where each problem's rows and columns start
    masses_t = as_t(np.concatenate([problems.source, problems.target]))
    src_first, dst_first = problems.src[:-1], len(problems.source) + problems.dst[:-1]
    row_first = np.where(flip, dst_first, src_first)
    col_first = np.where(flip, src_first, dst_first)

    def padded(flat, first, count, ks, width):
        """(len(ks), width) block of the ranges ``flat[first[k]:first[k] + count[k]]``."""
        owner, at = _ranges(first[ks], count[ks])
        out = torch.zeros(len(ks) * width, dtype=torch.float64, device=device)
        out[as_t(owner * width + at - first[ks][owner])] = flat[as_t(at)]
        return out.view(len(ks), width)

    scale = problems.distance / problems.mass  # curvature error = gap / scale
    groups = np.unique(np.stack([pad_r, pad_c]), axis=1).T
    iterations = []
    for r, c in groups:
        members = np.flatnonzero((pad_r == r) & (pad_c == c))
        per_call = max(1, batch_elements // int(r * c))
        for s in range(0, len(members), per_call):
            ks = members[s : s + per_call]
            b = len(ks)
            # every (source, target) pair of these problems, and its place in the block
            owner, at = _ranges(problems.pair[ks], n_src[ks] * n_dst[ks])
            local = at - problems.pair[ks][owner]
            i, j = local // n_dst[ks][owner], local % n_dst[ks][owner]
            i, j = np.where(flip[ks][owner], j, i), np.where(flip[ks][owner], i, j)
            cost = torch.zeros(b * int(r) * int(c), dtype=torch.float64, device=device)
            cost[as_t((owner * r + i) * c + j)] = cost_t[as_t(at)]
            cost = cost.view(b, int(r), int(c))
            a = padded(masses_t, row_first, rows, ks, int(r))
            bb = padded(masses_t, col_first, cols, ks, int(c))
            top = cost.amax((-2, -1)).clamp_min(torch.finfo(torch.float64).tiny)
            norm = as_t(scale[ks]) / top  # curvature error per unit of normalised gap
            gap = (0.25 * accuracy * norm).clamp_min(_GAP_FLOOR)
            out = transport_ipm(a, bb, cost / top[:, None, None], gap=gap)
            error = (out.upper - out.lower).abs() / norm
            unit[ks] = (out.upper * top).cpu().numpy()
            certified[ks] = (error <= accuracy).cpu().numpy()
            iterations.append(out.iterations)
    _log.info(
        "batched transport: %d problems in %d size buckets, %s interior-point iterations, "
        "%d re-solved exactly",
        len(rows),
        len(groups),
        f"{min(iterations)}-{max(iterations)}" if iterations else "0",
        int((~certified).sum()),
    )
    return unit, certified


def sparse_ollivier_ricci(
    edge_index: torch.Tensor,
    lengths: torch.Tensor,
    num_nodes: int,
    *,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    base: float = math.e,
    method: str = "auto",
    accuracy: float = 1e-6,
    distances: str = "scipy",
    chunk: int = 256,
    batch_elements: int = 1 << 22,
) -> torch.Tensor:
    """Ollivier-Ricci curvature of every edge of an undirected sparse graph.

    Parameters
    ----------
    edge_index : torch.Tensor, shape (2, E), long
        Each undirected edge once (either orientation), no self loops.
    lengths : torch.Tensor, shape (E,)
        Non-negative finite edge lengths.
    num_nodes : int
        Number of nodes (isolated ones carry no edge).
    alpha, exp_power, base : float
        Node measures, see :func:`georag.geometry.ricci.node_measures`.
    method : {"auto", "exact", "batched"}
        Transport solver, see the module docstring: ``"exact"`` network simplex per edge,
        ``"batched"`` certified batched interior point on the device of ``lengths``;
        ``"auto"`` exact for CPU tensors, batched otherwise.
    accuracy : float
        ``"batched"`` only: bound on each edge's curvature error (its certificate); edges
        whose certificate is wider are solved exactly.
    distances : {"scipy", "torch"}
        How the bounded shortest paths are found: scipy's Dijkstra on the CPU, or
        Bellman-Ford sweeps in torch on the device of ``lengths`` (memory ``chunk x 2E``
        floats per sweep). On a CPU the torch sweeps are about 20x slower (module
        docstring); on a GPU they have not been measured.
    chunk : int
        Shortest-path sources searched at once: memory ``chunk x num_nodes`` floats.
    batch_elements : int
        ``"batched"`` only: padded cost entries per interior-point call (memory about
        ten float64 tensors of this size).

    Returns
    -------
    torch.Tensor, shape (E,)
        Curvature of each edge, in the dtype and on the device of ``lengths``.

    Examples
    --------
    >>> edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    >>> sparse_ollivier_ricci(edge_index, torch.ones(3), 3)  # a triangle
    tensor([0.7500, 0.7500, 0.7500])
    """
    _check_edges(edge_index, lengths, num_nodes)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if not (math.isfinite(exp_power) and exp_power >= 0 and math.isfinite(base) and base > 0):
        raise ValueError(f"exp_power must be >= 0 and base > 0, got {exp_power}, {base}")
    if method not in SPARSE_METHODS:
        raise ValueError(f"method must be one of {SPARSE_METHODS}, got {method!r}")
    if not (math.isfinite(accuracy) and accuracy > 0):
        raise ValueError(f"accuracy must be positive and finite, got {accuracy}")
    if distances not in _DISTANCES:
        raise ValueError(f"distances must be one of {_DISTANCES}, got {distances!r}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if batch_elements < 1:
        raise ValueError(f"batch_elements must be >= 1, got {batch_elements}")
    if method == "auto":
        method = "exact" if lengths.device.type == "cpu" else "batched"
    started = time.perf_counter()
    x_of, y_of = (t.cpu().numpy() for t in edge_index)
    w = lengths.detach().cpu().double().numpy()
    problems, distance = _problems(
        x_of,
        y_of,
        w,
        num_nodes,
        alpha=alpha,
        exp_power=exp_power,
        base=base,
        chunk=chunk,
        device=lengths.device if distances == "torch" else None,
    )
    built = time.perf_counter()
    unit = np.zeros(len(problems.edges))
    exact = np.ones(len(unit), dtype=bool)
    if method == "batched" and len(unit):
        unit, certified = _batched(problems, lengths.device, accuracy, batch_elements)
        exact = ~certified
    if exact.any():
        unit[exact] = emd_many(problems.block(k) for k in np.flatnonzero(exact))
    _log.info(
        "sparse curvature (%s): %d edges, %d transport problems, %d pairs; distances and "
        "problems %.2f s, transport %.2f s",
        method,
        len(w),
        len(unit),
        len(problems.cost),
        built - started,
        time.perf_counter() - built,
    )
    kappa = np.where(distance >= _ZERO_DISTANCE, 1.0, 0.0)
    kappa[problems.edges] = 1.0 - problems.mass * unit / problems.distance
    return torch.from_numpy(kappa).to(dtype=lengths.dtype, device=lengths.device)
