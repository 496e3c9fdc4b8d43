"""The transport problems of the moving edges of a sparse graph, flat.

For each edge ``x y`` the net masses ``(m_x - m_y)+`` and ``(m_y - m_x)+`` on the closed
neighbourhoods (:func:`_net_masses`), and the cost cells between them, asked of a search
(:mod:`georag.geometry.ricci._sparse_search`) pass by pass (:class:`_Supports`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from georag.geometry.ricci._sparse_search import (
    _compiled_cells,
    _edge_distances,
    _pairwise_cells,
    _ranges,
    _scipy_search,
    _torch_search,
)
from georag.geometry.ricci.common import (
    _MOVING_EPS,
    _NEIGHBOUR_WEIGHT_FLOOR,
    _ZERO_DISTANCE,
    _jit,
)

_TINY_MASS = _MOVING_EPS * float(np.finfo(np.float64).eps)  # identical measures below this
_SOURCE_SHARE = 0.5  # of a node's reach settled by its search as a source (the rest: target)


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
