"""Ollivier-Ricci curvature of every edge of a large sparse graph, without all-pairs paths.

:func:`georag.geometry.ricci.ollivier_ricci` works on dense (B, N, N) batches of small
graphs. A corpus graph (thousands of nodes, a k-NN graph say) needs another route: the
transport problem of an edge ``x y`` moves ``m_x`` (on the closed neighbourhood
``N[x]``) to ``m_y`` (on ``N[y]``), so only the distances between ``N[x]`` and ``N[y]``
matter, never an N x N matrix. Each such distance is at most the three-hop path
``u - x - y - v``; a shortest-path search from ``u`` bounded by the largest such bound
over the pairs it serves (scipy's Dijkstra with ``limit``) finds it exactly, a few
hundred sources at a time. The edge problems are then solved exactly by POT's network
simplex (:func:`georag.geometry.transport.emd_many`), which is the cheaper solver on a
CPU at neighbourhood sizes of tens of nodes (docs/methods/ricci_filtration.md).

The semantics are those of :func:`~georag.geometry.ricci.ollivier_ricci` and of
GraphRicciCurvature 0.6.1 (``method="OTD"``): measures ``alpha`` at the node and
``base ** (-w ** exp_power)`` over the neighbours (evenly when their sum is below 1e-7),
curvature ``1 - W / d(x, y)`` with the graph distance, 0 where ``d < 1e-7``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from georag.geometry.transport import emd_many

__all__ = ["sparse_ollivier_ricci"]

_NEIGHBOUR_WEIGHT_FLOOR = 1e-7  # GraphRicciCurvature's EPSILON
_ZERO_DISTANCE = 1e-7


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


def sparse_ollivier_ricci(
    edge_index: torch.Tensor,
    lengths: torch.Tensor,
    num_nodes: int,
    *,
    alpha: float = 0.5,
    exp_power: float = 2.0,
    base: float = math.e,
    chunk: int = 256,
) -> torch.Tensor:
    """Exact Ollivier-Ricci curvature of every edge of an undirected sparse graph.

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
    chunk : int
        Shortest-path sources searched at once: memory ``chunk x num_nodes`` floats.

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
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    _check_edges(edge_index, lengths, num_nodes)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if not (math.isfinite(exp_power) and exp_power >= 0 and math.isfinite(base) and base > 0):
        raise ValueError(f"exp_power must be >= 0 and base > 0, got {exp_power}, {base}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    x_of, y_of = (t.cpu().numpy() for t in edge_index)
    w = lengths.detach().cpu().double().numpy()
    e, n = len(w), num_nodes
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
    graph = sp.csr_matrix((arc_w, (tail, head)), shape=(n, n))
    # the pairs (u in N[x], v in N[y]) of every edge, N[x] = neighbours then x itself
    kx, ky = degree[x_of] + 1, degree[y_of] + 1
    sizes = kx * ky
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    owner = np.repeat(np.arange(e), sizes)
    local = np.arange(offsets[-1]) - offsets[owner]
    a, b = local // ky[owner], local % ky[owner]
    xs, ys = x_of[owner], y_of[owner]
    last_a, last_b = a == kx[owner] - 1, b == ky[owner] - 1
    arc_a = np.minimum(start[xs] + a, len(tail) - 1)
    arc_b = np.minimum(start[ys] + b, len(tail) - 1)
    u = np.where(last_a, xs, head[arc_a])
    v = np.where(last_b, ys, head[arc_b])
    bound = np.where(last_a, 0.0, arc_w[arc_a]) + w[owner] + np.where(last_b, 0.0, arc_w[arc_b])
    cost = np.empty(offsets[-1])
    # search each source as far as its farthest bound; sources of similar reach share a
    # chunk (scipy's limit is one number per call)
    by_source = np.argsort(u, kind="stable")
    first = np.searchsorted(u[by_source], np.arange(n + 1))
    sources = np.flatnonzero(first[1:] > first[:-1])
    reach = np.zeros(n)
    reach[sources] = np.maximum.reduceat(bound[by_source], first[sources])
    sources = sources[np.argsort(reach[sources], kind="stable")]
    slot = np.full(n, -1)
    for k in range(0, len(sources), chunk):
        block = sources[k : k + chunk]
        picks = np.concatenate([by_source[first[s] : first[s + 1]] for s in block])
        limit = float(reach[block].max()) * (1 + 1e-9) + 1e-300
        rows = dijkstra(graph, directed=False, indices=block, limit=limit)
        slot[block] = np.arange(len(block))
        cost[picks] = rows[slot[u[picks]], v[picks]]
    if not np.isfinite(cost).all():
        raise RuntimeError("a neighbourhood distance exceeded its three-hop bound")
    node_mass_x = [np.append(arc_mass[start[x] : start[x + 1]], alpha) for x in x_of]
    node_mass_y = [np.append(arc_mass[start[y] : start[y + 1]], alpha) for y in y_of]
    problems = (
        (node_mass_x[k], node_mass_y[k], cost[offsets[k] : offsets[k + 1]].reshape(kx[k], ky[k]))
        for k in range(e)
    )
    transport = emd_many(problems)
    distance = cost[offsets[1:] - 1]  # the pair (x, y): last of N[x] and of N[y]
    kappa = np.where(
        distance < _ZERO_DISTANCE, 0.0, 1.0 - transport / np.maximum(distance, _ZERO_DISTANCE)
    )
    return torch.from_numpy(kappa).to(dtype=lengths.dtype, device=lengths.device)
