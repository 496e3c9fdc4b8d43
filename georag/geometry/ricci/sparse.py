"""Ollivier-Ricci curvature of every edge of a large sparse graph, without all-pairs paths.

:func:`georag.geometry.ricci.ollivier_ricci` works on dense (B, N, N) batches of small
graphs. A corpus graph (thousands of nodes, a k-NN graph say) needs another route: the
transport problem of an edge ``x y`` moves ``m_x`` (on the closed neighbourhood
``N[x]``) to ``m_y`` (on ``N[y]``), so only the distances between ``N[x]`` and ``N[y]``
matter, never an N x N matrix. As in the dense path only the net masses move,
``W(m_x, m_y) = W((m_x - m_y)+, (m_y - m_x)+)`` (shortest paths obey the triangle
inequality), which drops the shared mass of common neighbours from the problem.

Distances: each needed distance ``d(u, v)``, ``u`` in ``N[x]``, ``v`` in ``N[y]``, is at
most the three-hop path ``u - x - y - v`` (``h(u, x) + d(x, y) + h(y, v)``), hence at most
each end's *reach*, the longest such path from it. By default (``distances="compiled"``,
numba) the searches meet in the middle: each source node of a pass settles the nodes
within half its reach and each target node within half of its own, and ``d(u, v)`` is the
least join of the two over the target's ball (exact: a shortest path leaves the source's
ball into the target's). Searching whole depth-3 neighbourhoods from every source instead
settles about eight times more nodes on a k-NN graph. A pair asked by several edges of a
pass is joined once, and each value depends on the graph alone (never on the pass, so a
subset of edges gives the same bits). Edges are taken in passes of about
``pairs_per_pass`` cost entries (memory about 40 bytes each), in a reverse Cuthill-McKee
order so that a pass's neighbourhoods overlap. ``distances="scipy"`` runs scipy's
whole-graph Dijkstra cut at the largest bound of a block of ``chunk`` sources (the earlier
reference), ``distances="torch"`` Bellman-Ford sweeps on the device of ``lengths``, each
source cut at its own bound.

Transport, by ``method``:

- ``"exact"`` (the reference): a transportation simplex compiled by numba, one problem
  after another in one call (least-cost start, block-search pivots; tested equal to POT's
  network simplex within rounding), with POT's network simplex
  (:func:`georag.geometry.transport.emd_many`) for any problem past its pivot cap;
- ``"batched"``: the edge problems grouped by support size (padded to a ladder of
  sizes), their cost blocks assembled as tensors on the device of ``lengths``, and solved
  together by the batched interior-point method of
  :func:`georag.geometry.transport_ipm.transport_ipm`. Every edge is certified: its
  curvature error is at most ``accuracy`` (the bracket ``[lower, upper]`` on its exact
  cost, relative to ``d(x, y)``); the few whose bracket is wider are re-solved by the
  network simplex;
- ``"pot"``: POT's network simplex for every problem (the reference of ``"exact"``);
- ``"auto"`` (default): ``"exact"`` for CPU tensors, ``"batched"`` for tensors on any
  other device (measured on a CPU only, docs/performance.md).

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

import numba
import numpy as np
import torch

from georag.geometry.transport import emd_many
from georag.geometry.transport_ipm import transport_ipm

__all__ = ["SPARSE_METHODS", "sparse_ollivier_ricci"]

#: Transport solvers of :func:`sparse_ollivier_ricci` ("auto": exact on CPU tensors,
#: batched elsewhere).
SPARSE_METHODS = ("auto", "exact", "batched", "pot")
_DISTANCES = ("compiled", "scipy", "torch")

_log = logging.getLogger(__name__)
_NEIGHBOUR_WEIGHT_FLOOR = 1e-7  # GraphRicciCurvature's EPSILON
_ZERO_DISTANCE = 1e-7
_TINY_MASS = 64 * float(np.finfo(np.float64).eps)  # identical measures below this
_GAP_FLOOR = 1e-13  # the interior point's duality gap is not resolved below rounding
_MAX_CELLS = 1 << 16  # the compiled simplex packs a cell's index in 16 bits
_SOURCE_SHARE = 0.5  # of a node's reach settled by its search as a source (the rest: target)
_CLOSED = np.iinfo(np.int64).max  # the compiled simplex's key of a cell out of the start
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

    def flat(self) -> tuple[np.ndarray, ...]:
        return self.src, self.dst, self.pair, self.source, self.target, self.cost

    def block(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = self.source[self.src[k] : self.src[k + 1]]
        b = self.target[self.dst[k] : self.dst[k + 1]]
        return a, b, self.cost[self.pair[k] : self.pair[k + 1]].reshape(len(a), len(b))


def _ranges(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, position)`` of the concatenated ranges ``start[k] + arange(count[k])``."""
    owner = np.repeat(np.arange(len(count)), count)
    offsets = np.concatenate([[0], np.cumsum(count)])
    return owner, start[owner] + np.arange(offsets[-1]) - offsets[owner]


def _jit(fn):
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)


@_jit
def _heap_push(key, item, size, d, v):
    """Push ``(d, v)`` onto the binary min-heap ``key[:size], item[:size]``; new size."""
    at = size
    while at > 0:
        up = (at - 1) >> 1
        if key[up] <= d:
            break
        key[at], item[at] = key[up], item[up]
        at = up
    key[at], item[at] = d, v
    return size + 1


@_jit
def _heap_pop(key, item, size):
    """Remove the smallest entry of the heap (its ``key[0], item[0]``); new size."""
    size -= 1
    d, v = key[size], item[size]
    at = 0
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and key[child + 1] < key[child]:
            child += 1
        if key[child] >= d:
            break
        key[at], item[at] = key[child], item[child]
        at = child
    key[at], item[at] = d, v
    return size


@_jit
def _settle(indptr, indices, weights, s, radius, dist, settled, touched, ball, key, item):
    """Dijkstra search from ``s`` that settles every node within ``radius`` and relaxes all
    the arcs of each, so that ``dist`` also holds the frontier one arc past the ball.

    ``dist`` (inf) and ``settled`` (False) must be clear on entry. Returns ``(touched,
    settled)`` counts: the nodes that got a distance are ``touched[:touched]``, the ball
    ``ball[:settled]`` in increasing distance.
    """
    limit = radius * (1 + 1e-9) + 1e-300
    dist[s], touched[0], count, inside = 0.0, s, 1, 0
    size = _heap_push(key, item, 0, 0.0, s)
    while size:
        d, x = key[0], item[0]
        size = _heap_pop(key, item, size)
        if settled[x]:
            continue
        settled[x] = True
        ball[inside] = x
        inside += 1
        for a in range(indptr[x], indptr[x + 1]):
            nd = d + weights[a]
            y = indices[a]
            if nd < dist[y]:
                if dist[y] == np.inf:
                    touched[count] = y
                    count += 1
                dist[y] = nd
                if nd <= limit:
                    size = _heap_push(key, item, size, nd, y)
    return count, inside


@_jit
def _meeting_cells(  # pragma: no cover - numba
    indptr, indices, weights, reach, share, src, dst, src_node, dst_node, src_hop, dst_hop, gap
):
    """Every cost cell of a group of transport problems by searches that meet in the middle.

    Problem ``k`` moves mass from the nodes ``src_node[src[k]:src[k+1]]`` onto
    ``dst_node[dst[k]:dst[k+1]]``; its cells are row-major (sources x targets), at most the
    three-hop bound ``src_hop[i] + gap[k] + dst_hop[j]``, which is at most the ``reach``
    (n,) of either end. Each distinct source ``s`` gets one search that settles the nodes
    within ``share * reach[s]`` and relaxes all their arcs (``dist_s``: exact on that ball,
    an upper bound one arc past it); each distinct target ``t`` its ball, the nodes within
    ``(1 - share) * reach[t]`` in increasing distance to ``t``. A shortest path from ``s``
    to ``t`` of length ``L`` leaves the source's ball by an arc ``a -> b``, and then ``d(b,
    t) < L - share * reach[s]``, at most ``cut = max(0, min(reach[s], reach[t]) - share *
    reach[s])``: ``d(s, t)`` is the least ``dist_s(b) + d(b, t)`` over the target's ball up
    to ``cut``. A value depends on the graph, ``reach`` and ``share`` alone, never on the
    other problems; a pair asked by several problems is joined once per call.

    Returns ``(cost (P,), count of cells above their bound)`` (the latter 0 unless the
    reaches were wrong).
    """
    n = len(indptr) - 1
    dist = np.full(n, np.inf)
    settled = np.zeros(n, np.bool_)
    touched = np.empty(n, np.int64)
    ball = np.empty(n, np.int64)
    key = np.empty(len(indices) + 1)
    item = np.empty(len(indices) + 1, np.int64)
    problems = len(src) - 1
    # the distinct targets and their balls: CSR rows of (node, distance to the target)
    slot = np.full(n, -1, np.int64)
    target = np.empty(len(dst_node), np.int64)
    count = 0
    for j in range(len(dst_node)):
        if slot[dst_node[j]] < 0:
            slot[dst_node[j]] = count
            target[count] = dst_node[j]
            count += 1
    ball_first = np.zeros(count + 1, np.int64)
    ball_node = np.empty(16 * count + 16, np.int64)
    ball_dist = np.empty(16 * count + 16)
    at = 0
    for i in range(count):
        t = target[i]
        got, inside = _settle(
            indptr,
            indices,
            weights,
            t,
            (1 - share) * reach[t],
            dist,
            settled,
            touched,
            ball,
            key,
            item,
        )
        if at + inside > len(ball_node):
            grown = max(2 * len(ball_node), at + inside)
            ball_node = np.concatenate((ball_node[:at], np.empty(grown - at, np.int64)))
            ball_dist = np.concatenate((ball_dist[:at], np.empty(grown - at)))
        for q in range(inside):
            ball_node[at + q], ball_dist[at + q] = ball[q], dist[ball[q]]
        at += inside
        ball_first[i + 1] = at
        for q in range(got):
            dist[touched[q]], settled[touched[q]] = np.inf, False
    # the source rows (problem, source) grouped by source node with a counting sort
    problem_of = np.empty(len(src_node), np.int64)
    for k in range(problems):
        problem_of[src[k] : src[k + 1]] = k
    first = np.zeros(n + 1, np.int64)
    for r in range(len(src_node)):
        first[src_node[r] + 1] += 1
    for x in range(n):
        first[x + 1] += first[x]
    fill = first[:-1].copy()
    order = np.empty(len(src_node), np.int64)
    for r in range(len(src_node)):
        order[fill[src_node[r]]] = r
        fill[src_node[r]] += 1
    pair = np.zeros(problems + 1, np.int64)  # each problem's first cell
    for k in range(problems):
        pair[k + 1] = pair[k] + (src[k + 1] - src[k]) * (dst[k + 1] - dst[k])
    cost = np.empty(pair[problems])
    joined = np.full(count, -1, np.int64)
    value = np.empty(count)
    over = 0
    for s in range(n):
        if first[s] == first[s + 1]:
            continue
        radius = share * reach[s]
        got, _ = _settle(
            indptr, indices, weights, s, radius, dist, settled, touched, ball, key, item
        )
        for q in range(first[s], first[s + 1]):
            r = order[q]
            k = problem_of[r]
            width = dst[k + 1] - dst[k]
            cell = pair[k] + (r - src[k]) * width
            for j in range(dst[k], dst[k + 1]):
                t = dst_node[j]
                i = slot[t]
                if joined[i] != s:
                    joined[i] = s
                    cut = max(0.0, min(reach[s], reach[t]) - radius) * (1 + 1e-9) + 1e-300
                    best = np.inf
                    for b in range(ball_first[i], ball_first[i + 1]):
                        if ball_dist[b] > cut:
                            break
                        c = dist[ball_node[b]] + ball_dist[b]
                        if c < best:
                            best = c
                    value[i] = best
                cost[cell] = value[i]
                if not value[i] <= (src_hop[r] + gap[k] + dst_hop[j]) * (1 + 1e-9) + 1e-300:
                    over += 1
                cell += 1
        for q in range(got):
            dist[touched[q]], settled[touched[q]] = np.inf, False
    return cost, over


@_jit
def _net_masses(start, head, arc_w, arc_mass, alpha, ends_x, ends_y):  # pragma: no cover
    """``(edge, node, m_x - m_y, hop)`` over the closed neighbourhoods ``N[x] | N[y]`` of
    each edge ``k`` (``x = ends_x[k]``, ``y = ends_y[k]``), edge after edge, each edge's
    nodes in increasing id. ``hop`` is the node's arc length to ``y`` where the net mass is
    negative (a target), to ``x`` otherwise (0 for the end itself or a node off ``N[x]``).
    ``start`` is the CSR row start of the arcs (``head``, ``arc_w``, ``arc_mass``)."""
    n = len(start) - 1
    total, widest = 0, 0
    for k in range(len(ends_x)):
        both = start[ends_x[k] + 1] - start[ends_x[k]] + start[ends_y[k] + 1] - start[ends_y[k]]
        total += both + 2
        widest = max(widest, both + 2)
    owner = np.empty(total, np.int64)
    node = np.empty(total, np.int64)
    net = np.empty(total)
    hop = np.empty(total)
    mass_x, mass_y = np.zeros(n), np.zeros(n)
    hop_x, hop_y = np.zeros(n), np.zeros(n)
    seen = np.full(n, -1, np.int64)
    local = np.empty(widest, np.int64)
    at = 0
    for k in range(len(ends_x)):
        count = 0
        for side in range(2):
            end = ends_x[k] if side == 0 else ends_y[k]
            for a in range(start[end], start[end + 1] + 1):
                last = a == start[end + 1]
                v = end if last else head[a]
                if seen[v] != k:
                    seen[v] = k
                    mass_x[v] = mass_y[v] = hop_x[v] = hop_y[v] = 0.0
                    local[count] = v
                    count += 1
                m = alpha if last else arc_mass[a]
                h = 0.0 if last else arc_w[a]
                if side == 0:
                    mass_x[v], hop_x[v] = m, h
                else:
                    mass_y[v], hop_y[v] = m, h
        for q in range(1, count):  # insertion sort: a few dozen nodes
            v, r = local[q], q
            while r > 0 and local[r - 1] > v:
                local[r] = local[r - 1]
                r -= 1
            local[r] = v
        for q in range(count):
            v = local[q]
            owner[at], node[at] = k, v
            net[at] = mass_x[v] - mass_y[v]
            hop[at] = hop_y[v] if net[at] < 0 else hop_x[v]
            at += 1
    return owner[:at], node[:at], net[:at], hop[:at]


@_jit
def _pair_requests(src, dst, src_node, dst_node, src_hop, dst_hop, reach):  # pragma: no cover
    """Source node, target node and three-hop bound of every (problem, source, target)
    pair, problem after problem, sources x targets row-major (the order of ``cost``)."""
    total = 0
    for k in range(len(src) - 1):
        total += (src[k + 1] - src[k]) * (dst[k + 1] - dst[k])
    u = np.empty(total, np.int64)
    v = np.empty(total, np.int64)
    bound = np.empty(total)
    at = 0
    for k in range(len(src) - 1):
        for i in range(src[k], src[k + 1]):
            for j in range(dst[k], dst[k + 1]):
                u[at], v[at] = src_node[i], dst_node[j]
                bound[at] = src_hop[i] + reach[k] + dst_hop[j]
                at += 1
    return u, v, bound


@_jit
def _row_min(keys, lo, hi):  # pragma: no cover - numba
    """Smallest of ``keys[lo:hi]``."""
    best = keys[lo]
    for q in range(lo + 1, hi):
        best = min(best, keys[q])
    return best


@_jit
def _simplex(  # pragma: no cover - numba
    a,
    b,
    c,
    max_pivots,
    keys,
    head,
    ci,
    cj,
    cc,
    flow,
    s,
    d,
    deg,
    adj,
    pot,
    depth,
    up_cell,
    up_node,
    queue,
    path,
    back,
):
    """Exact cost of moving ``a`` (m,) onto ``b`` (n,) (equal totals) at costs ``c`` (m, n)
    by the transportation simplex; NaN after ``max_pivots`` pivots.

    The basis is a spanning tree of m + n - 1 cells, started by the least-cost rule (the
    cells in increasing cost, each taking what its row and column still hold): each open
    row keeps its cheapest open cell, found again only when that cell's column closes, and
    the start takes the cheapest of these. Each pivot prices the rows in blocks of two,
    cyclically from where the last pricing stopped, and enters the cell of most negative
    reduced cost (tolerance 1e-12 of the largest cost) of the first block that holds one
    (the block search rule of Kovacs, "Minimum-cost flow algorithms: an experimental
    evaluation"); a whole round without one is optimal. The pivot moves the cycle's
    smallest flow around it; the tree (each node's incident cells, its parent, depth and
    potential) is kept across pivots and only the part cut off by the leaving cell is
    re-hung, each potential still computed along its path from node 0. The remaining
    arguments are work buffers (``adj`` is (m + n, max(m, n))).
    """
    m, n = c.shape
    nb = m + n - 1
    nodes = m + n
    top = np.int64(0)
    for i in range(m):
        row = c[i]
        for j in range(n):
            bits = np.float64(row[j]).view(np.int64)
            top = max(top, bits)
            # the order of non-negative floats is that of their bits: the low 16 carry q
            keys[i * n + j] = (bits & ~np.int64(0xFFFF)) | (i * n + j)
        head[i] = _row_min(keys, i * n, i * n + n)
    s[:m] = a
    d[:n] = b
    rows_left, cols_left = m, n
    for t in range(nb):
        q = _row_min(head, 0, m) & 0xFFFF
        i, j = q // n, q % n
        ci[t], cj[t], cc[t] = i, j, c[i, j]
        if rows_left == 1 and cols_left == 1:
            f = s[i]
        elif rows_left == 1 or (cols_left > 1 and d[j] <= s[i]):
            f = d[j]
            s[i] -= f
            cols_left -= 1
            for r in range(m):  # close column j
                old = keys[r * n + j]
                keys[r * n + j] = _CLOSED
                if head[r] == old:
                    head[r] = _row_min(keys, r * n, r * n + n)
        else:
            f = s[i]
            d[j] -= f
            rows_left -= 1
            head[i] = _CLOSED
        flow[t] = max(f, 0.0)
    for x in range(nodes):
        deg[x] = 0
    for t in range(nb):
        x, y = ci[t], m + cj[t]
        adj[x, deg[x]] = t
        deg[x] += 1
        adj[y, deg[y]] = t
        deg[y] += 1
    depth[0], pot[0], up_cell[0], up_node[0], queue[0] = 0, 0.0, -1, -1, 0
    stop = 1
    tol = 1e-12 * np.int64(top).view(np.float64)
    row = 0
    for pivot in range(max_pivots + 1):
        # (re-)hang the nodes reached from queue[0], each below the node it is reached from
        first = 0
        while first < stop:
            x = queue[first]
            first += 1
            ends, up, below, px = m - x, up_cell[x], depth[x] + 1, pot[x]
            for q in range(deg[x]):
                t = adj[x, q]
                if t != up:
                    y = ci[t] + cj[t] + ends
                    depth[y], pot[y] = below, cc[t] - px
                    up_cell[y], up_node[y] = t, x
                    queue[stop] = y
                    stop += 1
        best, bi, bj, i = -tol, -1, -1, row
        for scanned in range(1, m + 1):
            ui = pot[i]
            for j in range(n):
                r = c[i, j] - ui - pot[m + j]
                if r < best:
                    best, bi, bj = r, i, j
            i = i + 1 if i + 1 < m else 0
            if bi >= 0 and scanned >= 2:
                break
        row = i
        if bi < 0:
            value = 0.0
            for t in range(nb):
                value += flow[t] * cc[t]
            return value
        if pivot == max_pivots:
            break
        x, y, nx, ny = m + bj, bi, 0, 0
        while depth[x] > depth[y]:
            path[nx] = up_cell[x]
            nx += 1
            x = up_node[x]
        while depth[y] > depth[x]:
            back[ny] = up_cell[y]
            ny += 1
            y = up_node[y]
        while x != y:
            path[nx] = up_cell[x]
            nx += 1
            x = up_node[x]
            back[ny] = up_cell[y]
            ny += 1
            y = up_node[y]
        # the cycle's cells an even number of steps from the entering cell lose flow; the
        # first of the smallest in the cycle's order from column bj leaves
        theta, leave, cut = np.inf, -1, False
        for q in range(0, nx, 2):
            if flow[path[q]] < theta:
                theta, leave, cut = flow[path[q]], path[q], True
        for q in range((ny - 1) & ~1, -1, -2):
            if flow[back[q]] < theta:
                theta, leave, cut = flow[back[q]], back[q], False
        for q in range(0, nx, 2):
            flow[path[q]] -= theta
        for q in range(1, nx, 2):
            flow[path[q]] += theta
        for q in range(0, ny, 2):
            flow[back[q]] -= theta
        for q in range(1, ny, 2):
            flow[back[q]] += theta
        # the leaving cell cuts off the side of the entering cell's end below it
        for x in (ci[leave], m + cj[leave]):
            q = 0
            while adj[x, q] != leave:
                q += 1
            deg[x] -= 1
            adj[x, q] = adj[x, deg[x]]
        ci[leave], cj[leave], cc[leave], flow[leave] = bi, bj, c[bi, bj], theta
        for x in (bi, m + bj):
            adj[x, deg[x]] = leave
            deg[x] += 1
        e, f = (m + bj, bi) if cut else (bi, m + bj)
        depth[e] = depth[f] + 1
        pot[e] = cc[leave] - pot[f]
        up_cell[e], up_node[e], queue[0], stop = leave, f, e, 1
    return np.nan


@_jit
def _transport_all(src, dst, pair, source, target, cost):  # pragma: no cover - numba
    """Exact unit-mass cost of every problem of a :class:`_Problems` (its flat arrays),
    NaN where the simplex hit its pivot cap."""
    K = len(src) - 1
    big_m, big_n, big_mn = 1, 1, 1
    for k in range(K):
        big_m = max(big_m, src[k + 1] - src[k])
        big_n = max(big_n, dst[k + 1] - dst[k])
        big_mn = max(big_mn, min(pair[k + 1] - pair[k], _MAX_CELLS))
    nodes = big_m + big_n
    keys = np.empty(big_mn, np.int64)
    head = np.empty(big_m, np.int64)
    ci = np.empty(nodes, np.int64)
    cj = np.empty(nodes, np.int64)
    cc = np.empty(nodes)
    flow = np.empty(nodes)
    s = np.empty(big_m)
    d = np.empty(big_n)
    deg = np.empty(nodes, np.int64)
    adj = np.empty((nodes, max(big_m, big_n)), np.int64)
    pot = np.empty(nodes)
    depth = np.empty(nodes, np.int64)
    up_cell = np.empty(nodes, np.int64)
    up_node = np.empty(nodes, np.int64)
    queue = np.empty(nodes, np.int64)
    path = np.empty(nodes, np.int64)
    back = np.empty(nodes, np.int64)
    bb = np.empty(big_n)
    out = np.empty(K)
    for k in range(K):
        a = source[src[k] : src[k + 1]]
        b = target[dst[k] : dst[k + 1]]
        na, nbb = len(a), len(b)
        if na * nbb > _MAX_CELLS:
            out[k] = np.nan
            continue
        scale = a.sum() / b.sum()
        for j in range(nbb):
            bb[j] = b[j] * scale
        c = cost[pair[k] : pair[k + 1]].reshape(na, nbb)
        out[k] = _simplex(
            a,
            bb[:nbb],
            c,
            100 * (na + nbb) + 100,
            keys,
            head,
            ci,
            cj,
            cc,
            flow,
            s,
            d,
            deg,
            adj,
            pot,
            depth,
            up_cell,
            up_node,
            queue,
            path,
            back,
        )
    return out


def _compiled_cells(indptr, indices, weights, reach, share):
    """Cost cells by searches that meet in the middle, compiled by numba (CPU)."""

    def cells(src, dst, src_node, dst_node, src_hop, dst_hop, gap):
        cost, over = _meeting_cells(
            indptr,
            indices,
            weights,
            reach,
            share,
            src,
            dst,
            src_node,
            dst_node,
            src_hop,
            dst_hop,
            gap,
        )
        if over:
            raise RuntimeError("a neighbourhood distance exceeded its three-hop bound")
        return cost

    return cells


def _pairwise_cells(search):
    """Cost cells by a search of ``(source, target, bound)`` requests, one per cell."""

    def cells(src, dst, src_node, dst_node, src_hop, dst_hop, gap):
        u, v, bound = _pair_requests(src, dst, src_node, dst_node, src_hop, dst_hop, gap)
        out = search(u, v, bound)
        if not (out <= bound * (1 + 1e-9) + 1e-300).all():
            raise RuntimeError("a neighbourhood distance exceeded its three-hop bound")
        return out

    return cells


def _edge_distances(cells, x_of: np.ndarray, y_of: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``d(x, y)`` (E,) of each edge, as one-cell problems bounded by the edge's length."""
    one = np.arange(len(w) + 1)
    zero = np.zeros(len(w))
    return cells(one, one, x_of, y_of, zero, zero, w)


def _scipy_search(graph, n, chunk):
    """Dijkstra searches by scipy (CPU) over the whole graph, ``chunk`` sources per call,
    each call cut at the largest reach of its sources."""
    from scipy.sparse.csgraph import dijkstra

    def block_search(block, reach, rows, cols):
        limit = float(reach.max()) * (1 + 1e-9) + 1e-300
        return dijkstra(graph, directed=False, indices=block, limit=limit)[rows, cols]

    return lambda u, v, bound: _blocked(block_search, u, v, bound, n, chunk)


def _torch_search(tail, head, arc_w, n, device, chunk):
    """Bellman-Ford sweeps in torch on ``device``, each source cut at its own reach: a
    path no longer than the reach has every prefix within it, so the pruning is exact."""
    as_t = lambda v: torch.as_tensor(v, device=device)  # noqa: E731
    tail_t, head_t, w_t = as_t(tail), as_t(head), as_t(arc_w)

    def block_search(block, reach, rows, cols):
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

    return lambda u, v, bound: _blocked(block_search, u, v, bound, n, chunk)


def _blocked(block_search, u, v, bound, n: int, chunk: int) -> np.ndarray:
    """``d(u_k, v_k)`` by a search over blocks of ``chunk`` sources at a time.

    Each source is searched as far as its farthest bound; sources of similar reach share
    a block (scipy's ``limit`` is one number per call).
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
        out[picks] = block_search(block, reach[block], slot[u[picks]], v[picks])
    return out


@dataclass(frozen=True)
class _Supports:
    """The net-mass measures of the moving edges, before any distance between them.

    Edge ``k`` (of ``edges``) moves ``source[src[k]:src[k+1]]`` (unit mass, on the nodes
    ``src_node``, each ``src_hop`` from x) onto ``target[dst[k]:dst[k+1]]`` (on
    ``dst_node``, each ``dst_hop`` from y); ``mass`` is the mass that moves, ``distance``
    ``d(x, y)``.
    """

    edges: np.ndarray
    mass: np.ndarray
    distance: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    source: np.ndarray
    target: np.ndarray
    src_node: np.ndarray
    dst_node: np.ndarray
    src_hop: np.ndarray
    dst_hop: np.ndarray

    def passes(self, pairs_per_pass: int, rank: np.ndarray) -> list[np.ndarray]:
        """The problems in groups of about ``pairs_per_pass`` cost entries, taken in the
        order of ``rank`` (of each problem) so that a group's neighbourhoods overlap and
        its searches are shared."""
        pairs = np.diff(self.src) * np.diff(self.dst)
        if pairs.sum() <= pairs_per_pass:
            return [np.arange(len(pairs))]
        order = np.argsort(rank, kind="stable")
        group = (np.cumsum(pairs[order]) - 1) // pairs_per_pass
        return [np.sort(ks) for ks in np.split(order, np.flatnonzero(np.diff(group)) + 1)]

    def take(self, ks: np.ndarray, cells) -> _Problems:
        """The transport problems ``ks`` with their costs (``cells``: one search per node
        the group needs, a distance asked by several edges is found once)."""
        n_src, n_dst = np.diff(self.src)[ks], np.diff(self.dst)[ks]
        _, s_at = _ranges(self.src[ks], n_src)
        _, d_at = _ranges(self.dst[ks], n_dst)
        src = np.concatenate([[0], np.cumsum(n_src)])
        dst = np.concatenate([[0], np.cumsum(n_dst)])
        cost = cells(
            src,
            dst,
            self.src_node[s_at],
            self.dst_node[d_at],
            self.src_hop[s_at],
            self.dst_hop[d_at],
            self.distance[ks],
        )
        pair = np.concatenate([[0], np.cumsum(n_src * n_dst)])
        return _Problems(
            self.edges[ks],
            self.mass[ks],
            self.distance[ks],
            src,
            dst,
            pair,
            self.source[s_at],
            self.target[d_at],
            cost,
        )


def _reaches(start: np.ndarray, head: np.ndarray, arc_w: np.ndarray, n: int):
    """Per node ``u`` (n,): the longest arc from ``u``, and the length of the longest path
    ``u - x - y - v`` (``x`` in ``N[u]``, ``y`` a neighbour of ``x``, ``v`` in ``N[y]``).
    Every edge's distance is at most the first from either end, every distance a transport
    problem asks of ``u`` (a hop, an edge, a hop) at most the second. ``start`` is the CSR
    row start of the arcs (n + 1,)."""
    rows = np.flatnonzero(start[1:] > start[:-1])

    def row_max(values: np.ndarray) -> np.ndarray:
        out = np.zeros(n)
        if len(rows):
            out[rows] = np.maximum.reduceat(values, start[rows])
        return out

    hop = row_max(arc_w)
    two = row_max(arc_w + hop[head])
    return hop, np.maximum(two, row_max(arc_w + two[head]))


def _supports(
    x_of: np.ndarray,
    y_of: np.ndarray,
    w: np.ndarray,
    n: int,
    *,
    alpha: float,
    exp_power: float,
    base: float,
    distances: str,
    chunk: int,
    device: torch.device,
    subset: np.ndarray,
):
    """The net-mass measures of the moving edges of ``subset`` (indices into the edges)
    and a search for the distances between them (numba, scipy, or torch on ``device``).

    Returns ``(supports, cells, d(x, y) of every edge of subset (S,))``: ``cells`` finds the
    cost cells of a group of problems (:meth:`_Supports.take`); the supports'
    ``edges`` index ``subset``.
    """
    import scipy.sparse as sp

    # arcs in both directions, grouped by tail (CSR order), each tail's in increasing length
    tail = np.concatenate([x_of, y_of])
    head = np.concatenate([y_of, x_of])
    arc_w = np.concatenate([w, w])
    order = np.lexsort((head, arc_w, tail))
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
    if distances == "compiled":
        hop, reach = _reaches(start, head, arc_w, n)
        edge_cells = _compiled_cells(start, head, arc_w, hop, 1.0)
        cells = _compiled_cells(start, head, arc_w, reach, _SOURCE_SHARE)
    else:
        if distances == "scipy":
            graph = sp.csr_matrix((arc_w, (tail, head)), shape=(n, n))
            search = _scipy_search(graph, n, chunk)
        else:
            search = _torch_search(tail, head, arc_w, n, device, chunk)
        cells = edge_cells = _pairwise_cells(search)

    # net masses m_x - m_y per (edge, node); sources keep their hop to x, targets to y
    e, ends_x, ends_y = len(subset), x_of[subset], y_of[subset]
    owner, node, net, hop = _net_masses(start, head, arc_w, arc_mass, alpha, ends_x, ends_y)
    is_src, is_dst = net > 0, net < 0
    out_mass = np.bincount(owner[is_src], net[is_src], minlength=e)
    in_mass = np.bincount(owner[is_dst], -net[is_dst], minlength=e)
    d_xy = _edge_distances(edge_cells, ends_x, ends_y, w[subset])
    moving = (np.minimum(out_mass, in_mass) > _TINY_MASS) & (d_xy >= _ZERO_DISTANCE)
    keep = moving[owner]
    edges = np.flatnonzero(moving)
    renumber = np.cumsum(moving) - 1
    src_own, dst_own = renumber[owner[is_src & keep]], renumber[owner[is_dst & keep]]
    supports = _Supports(
        edges=edges,
        mass=(out_mass[edges] + in_mass[edges]) / 2,
        distance=d_xy[edges],
        src=np.concatenate([[0], np.cumsum(np.bincount(src_own, minlength=len(edges)))]),
        dst=np.concatenate([[0], np.cumsum(np.bincount(dst_own, minlength=len(edges)))]),
        source=net[is_src & keep] / out_mass[edges][src_own],
        target=-net[is_dst & keep] / in_mass[edges][dst_own],
        src_node=node[is_src & keep],
        dst_node=node[is_dst & keep],
        src_hop=hop[is_src & keep],
        dst_hop=hop[is_dst & keep],
    )
    return supports, cells, d_xy


def _locality(x_of: np.ndarray, y_of: np.ndarray, n: int) -> np.ndarray:
    """Rank of each edge in a reverse Cuthill-McKee order of its lower end: edges close in
    this order have overlapping neighbourhoods."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    graph = sp.csr_matrix((np.ones(len(x_of)), (x_of, y_of)), shape=(n, n))
    position = np.empty(n, dtype=np.int64)
    position[reverse_cuthill_mckee(graph + graph.T, symmetric_mode=True)] = np.arange(n)
    return np.minimum(position[x_of], position[y_of])


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
    distances: str = "compiled",
    chunk: int = 256,
    pairs_per_pass: int = 1 << 23,
    batch_elements: int = 1 << 22,
    subset: torch.Tensor | None = None,
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
    method : {"auto", "exact", "batched", "pot"}
        Transport solver, see the module docstring: ``"exact"`` compiled simplex per edge
        (``"pot"``: POT's network simplex per edge),
        ``"batched"`` certified batched interior point on the device of ``lengths``;
        ``"auto"`` exact for CPU tensors, batched otherwise.
    accuracy : float
        ``"batched"`` only: bound on each edge's curvature error (its certificate); edges
        whose certificate is wider are solved exactly.
    distances : {"compiled", "scipy", "torch"}
        How the bounded shortest paths are found (module docstring): compiled searches
        that meet in the middle on the CPU, one per node and pass, scipy's Dijkstra, or
        Bellman-Ford sweeps in torch on the device of ``lengths`` (memory ``chunk x 2E``
        floats per sweep; on a GPU they have not been measured).
    chunk : int
        ``"scipy"`` and ``"torch"`` only: sources searched at once (memory ``chunk x
        num_nodes`` floats).
    pairs_per_pass : int
        Cost entries (source x target pairs) whose distances are found and whose
        problems are solved together: memory about 40 bytes each.
    batch_elements : int
        ``"batched"`` only: padded cost entries per interior-point call (memory about
        ten float64 tensors of this size).
    subset : torch.Tensor, shape (S,), long, optional
        Indices of the edges whose curvature is wanted (all when None). Each edge's
        curvature depends on the graph alone, so a subset's values are the same bits as
        in a whole-graph call (how shards of the edges are computed apart).

    Returns
    -------
    torch.Tensor, shape (E,) or (S,)
        Curvature of each edge (of ``subset``), in the dtype and on the device of
        ``lengths``.

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
    if pairs_per_pass < 1:
        raise ValueError(f"pairs_per_pass must be >= 1, got {pairs_per_pass}")
    if subset is None:
        subset = torch.arange(edge_index.shape[1])
    if subset.dim() != 1 or subset.dtype != torch.long:
        raise ValueError(
            f"subset must be a 1-D long tensor, got {subset.dtype} {tuple(subset.shape)}"
        )
    if subset.numel() and (subset.min() < 0 or subset.max() >= edge_index.shape[1]):
        raise ValueError(f"subset must hold edge indices in [0, {edge_index.shape[1]})")
    if method == "auto":
        method = "exact" if lengths.device.type == "cpu" else "batched"
    started = time.perf_counter()
    x_of, y_of = (t.cpu().numpy() for t in edge_index)
    w = lengths.detach().cpu().double().numpy()
    supports, cells, distance = _supports(
        x_of,
        y_of,
        w,
        num_nodes,
        alpha=alpha,
        exp_power=exp_power,
        base=base,
        distances=distances,
        chunk=chunk,
        device=lengths.device,
        subset=subset.cpu().numpy(),
    )
    unit = np.zeros(len(supports.edges))
    timing = {"distances": time.perf_counter() - started, "transport": 0.0}
    groups = supports.passes(
        pairs_per_pass, _locality(x_of, y_of, num_nodes)[subset.cpu().numpy()][supports.edges]
    )
    pairs = 0
    for ks in groups:
        tick = time.perf_counter()
        problems = supports.take(ks, cells)
        tock = time.perf_counter()
        exact = np.ones(len(ks), dtype=bool)
        if method == "batched":
            unit[ks], certified = _batched(problems, lengths.device, accuracy, batch_elements)
            exact = ~certified
        elif method == "exact":
            unit[ks] = _transport_all(*problems.flat())
            exact = np.isnan(unit[ks])
        if exact.any():
            unit[ks[exact]] = emd_many(problems.block(k) for k in np.flatnonzero(exact))
        timing["distances"] += tock - tick
        timing["transport"] += time.perf_counter() - tock
        pairs += len(problems.cost)
    _log.info(
        "sparse curvature (%s, %s distances): %d edges, %d transport problems, %d pairs in "
        "%d passes; distances and problems %.2f s, transport %.2f s",
        method,
        distances,
        len(distance),
        len(unit),
        pairs,
        len(groups),
        timing["distances"],
        timing["transport"],
    )
    kappa = np.where(distance >= _ZERO_DISTANCE, 1.0, 0.0)
    kappa[supports.edges] = 1.0 - supports.mass * unit / supports.distance
    return torch.from_numpy(kappa).to(dtype=lengths.dtype, device=lengths.device)
