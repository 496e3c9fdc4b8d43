"""Bounded shortest-path searches: the cost cells of the sparse transport problems.

A cost cell is ``d(u, v)`` for a source ``u`` in ``N[x]`` and a target ``v`` in ``N[y]``
of an edge ``x y``, bounded by the three-hop path ``u - x - y - v``
(:mod:`georag.geometry.ricci.sparse` explains the bounds). Three searches give the same
cells: searches that meet in the middle, compiled by numba (:func:`_compiled_cells`, the
default); scipy's Dijkstra over blocks of sources (:func:`_scipy_search`); Bellman-Ford
sweeps in torch on any device (:func:`_torch_search`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from georag.geometry.ricci.common import _jit


def _ranges(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, position)`` of the concatenated ranges ``start[k] + arange(count[k])``."""
    owner = np.repeat(np.arange(len(count)), count)
    offsets = np.concatenate([[0], np.cumsum(count)])
    return owner, start[owner] + np.arange(offsets[-1]) - offsets[owner]


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
