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

import numpy as np
import torch

from georag.geometry.ricci._sparse_search import _ranges
from georag.geometry.ricci._sparse_simplex import _transport_all
from georag.geometry.ricci._sparse_supports import _Problems, _supports
from georag.geometry.ricci.common import _GAP_FLOOR, _ZERO_DISTANCE
from georag.geometry.transport import emd_many
from georag.geometry.transport_ipm import transport_ipm

__all__ = ["SPARSE_METHODS", "sparse_ollivier_ricci"]

#: Transport solvers of :func:`sparse_ollivier_ricci` ("auto": exact on CPU tensors,
#: batched elsewhere).
SPARSE_METHODS = ("auto", "exact", "batched", "pot")
_DISTANCES = ("compiled", "scipy", "torch")

_log = logging.getLogger(__name__)
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
