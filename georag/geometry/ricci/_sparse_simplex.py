"""The transportation simplex of the sparse curvature, compiled by numba.

:func:`_transport_all` solves every problem of a
:class:`~georag.geometry.ricci._sparse_supports._Problems` one after another in one call
(least-cost start, block-search pivots; tested equal to POT's network simplex within
rounding), NaN where a problem hit its pivot cap.
"""

from __future__ import annotations

import numpy as np

from georag.geometry.ricci.common import _jit

_MAX_CELLS = 1 << 16  # the compiled simplex packs a cell's index in 16 bits
_CLOSED = np.iinfo(np.int64).max  # the compiled simplex's key of a cell out of the start


@_jit
def _row_min(keys, lo, hi):  # pragma: no cover - numba
    """Smallest of ``keys[lo:hi]``."""
    best = keys[lo]
    for q in range(lo + 1, hi):
        best = min(best, keys[q])
    return best


@_jit
def _simplex(a, b, c, max_pivots, work):  # pragma: no cover - numba
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
    re-hung, each potential still computed along its path from node 0. ``work`` holds the
    work buffers (:func:`_workspace`).
    """
    keys, head, ci, cj, cc, flow, s, d, deg, adj, pot, depth = work[:12]
    up_cell, up_node, queue, path, back = work[12:]
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
def _workspace(big_m, big_n, big_mn):  # pragma: no cover - numba
    """The work buffers of :func:`_simplex` for problems of at most ``big_m`` sources,
    ``big_n`` targets and ``big_mn`` cells, in the order it unpacks them."""
    nodes = big_m + big_n
    return (
        np.empty(big_mn, np.int64),  # keys: each cell's packed cost and index
        np.empty(big_m, np.int64),  # head: each row's cheapest open cell
        np.empty(nodes, np.int64),  # ci, cj, cc, flow: the basis cells
        np.empty(nodes, np.int64),
        np.empty(nodes),
        np.empty(nodes),
        np.empty(big_m),  # s, d: what each row and column still holds
        np.empty(big_n),
        np.empty(nodes, np.int64),  # deg, adj: the tree's incident cells per node
        np.empty((nodes, max(big_m, big_n)), np.int64),
        np.empty(nodes),  # pot, depth, up_cell, up_node: potential, depth and parent
        np.empty(nodes, np.int64),
        np.empty(nodes, np.int64),
        np.empty(nodes, np.int64),
        np.empty(nodes, np.int64),  # queue, path, back: the walks of a pivot
        np.empty(nodes, np.int64),
        np.empty(nodes, np.int64),
    )


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
    work = _workspace(big_m, big_n, big_mn)
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
        out[k] = _simplex(a, bb[:nbb], c, 100 * (na + nbb) + 100, work)
    return out
