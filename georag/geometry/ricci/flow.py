"""The normalized Ricci flow as batched tensor ops, on any device, without gradients.

Every graph of the batch flows at once; a graph that stopped (its curvature spread below
``delta``) is frozen while the others go on. The node-measure masks, the edge list and the
distance buffers are built once per flow (:class:`~georag.geometry.ricci.solvers._Graphs`),
Sinkhorn potentials are carried from one step to the next.
"""

from __future__ import annotations

import math

import torch

from georag.geometry.ricci.common import (
    RicciFlowResult,
    _flow_edges,
    _scatter_edges,
    _Trail,
    _warn_missed,
)
from georag.geometry.ricci.solvers import _curvature, _Graphs, _WarmStart


def ricci_flow(
    lengths: torch.Tensor,
    adjacency: torch.Tensor,
    *,
    iterations: int,
    step: float,
    normalize: bool,
    delta: float,
    history: bool,
    restrict: bool,
    **options,
) -> RicciFlowResult:
    """:func:`georag.geometry.ricci.ricci_flow` on the tensor path (same parameters, checked
    by the caller); ``options`` are those of each curvature solve (``alpha``, ``exp_power``,
    ``method``, ``epsilon``, ``max_iter``, ``tol``, ``accuracy``, ``transport_dtype``,
    ``base``, ``nbr_topk``: :func:`~georag.geometry.ricci.solvers._curvature`)."""
    b, n, _ = lengths.shape
    adjacency, edges, w, num_edges = _flow_edges(lengths, adjacency, restrict)
    i, j, valid = edges
    options["warm"] = _WarmStart() if options["method"] == "sinkhorn" else None

    full = bool(valid.all())  # no padded edge (one graph, or graphs of equal size)
    pairs = torch.cat([i * n + j, j * n + i], 1)

    def matrix(values: torch.Tensor) -> torch.Tensor:
        """(B, E) edge values as the symmetric (B, N, N) matrix (:func:`_scatter_edges`)."""
        if not full:
            return _scatter_edges(values, i, j, valid, n)
        return values.new_zeros(b, n * n).scatter_add_(1, pairs, values.repeat(1, 2)).view(b, n, n)

    graphs = _Graphs(adjacency, edges, alpha=options["alpha"])
    kappa, ok, exact = _curvature(matrix(w), graphs, **options)
    converged = ok.all(1)
    exact_solves = torch.zeros(b, dtype=torch.long, device=lengths.device)
    if exact is not None:
        exact_solves += exact.sum(1)
    missed = (~converged).long()  # (graph, step) solves that missed tol
    active = torch.ones(b, dtype=torch.bool, device=lengths.device)
    ran = torch.zeros(b, dtype=torch.long, device=lengths.device)
    trail = _Trail(matrix, history, w, kappa)
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
        trail.add(w, kappa)
    tol, max_iter = options["tol"], options["max_iter"]
    _warn_missed(int(missed.sum()), int((~converged).sum()), b, tol, max_iter, depth=3)
    return trail.result(w, kappa, adjacency, ran, converged, exact_solves)
