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
graph after graph (``backend=``). Large sparse graphs: :mod:`georag.geometry.ricci.sparse`.

The package, imported one way (each module only from those above it):

- :mod:`~georag.geometry.ricci.common`: options and their checks, edge indexing, the
  largest component, :class:`RicciFlowResult`;
- :mod:`~georag.geometry.ricci.measures`: node measures and the per-edge surplus;
- :mod:`~georag.geometry.ricci.solvers`: the curvature solvers (no gradient);
- :mod:`~georag.geometry.ricci.flow`: the tensor flow;
- :mod:`~georag.geometry.ricci.grad`: curvature and flow under autograd;
- :mod:`~georag.geometry.ricci.compiled`: the uncertified flow compiled for the CPU (numba);
- this module: the public dispatchers, which pick the path from the inputs and options.
"""

from __future__ import annotations

import math

import torch

from georag.geometry.ricci import compiled, flow, grad, solvers
from georag.geometry.ricci.common import (
    CURVATURE_METHODS,
    EXACT_MAX_SUPPORT,
    FLOW_BACKENDS,
    SINKHORN_ACCURACY,
    RicciConvergenceWarning,
    RicciFlowResult,
    _check_accuracy,
    _check_graph,
    _check_measure_options,
    _check_method,
    largest_component,
)
from georag.geometry.ricci.measures import node_measures

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
    base: float = math.e,
    nbr_topk: int | None = None,
    directed: bool = False,
    edge_mask: torch.Tensor | None = None,
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
        grad (:mod:`georag.geometry.ricci.grad`).
    """
    options = dict(
        method=method,
        epsilon=epsilon,
        max_iter=max_iter,
        tol=tol,
        transport_dtype=transport_dtype,
        directed=directed,
        edge_mask=edge_mask,
    )
    if grad.wants_grad(lengths, alpha, exp_power):
        return grad.ollivier_ricci(lengths, adjacency, alpha=alpha, exp_power=exp_power, **options)
    return solvers.ollivier_ricci(
        lengths,
        adjacency,
        alpha=float(alpha),  # tensors without grad
        exp_power=float(exp_power),
        accuracy=accuracy,
        base=base,
        nbr_topk=nbr_topk,
        **options,
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
        loop over the graphs (:mod:`georag.geometry.ricci.compiled`, numba), several
        times faster on small graphs and iterating in float64; ``"tensor"``: batched
        tensor ops on any device; ``"auto"``: compiled where it applies.

    Returns
    -------
    RicciFlowResult
        Differentiable in ``lengths``, ``step``, ``alpha`` and ``exp_power`` when one of
        them is a tensor that requires grad (:func:`georag.geometry.ricci.grad.ricci_flow`,
        which can also checkpoint the steps).
    """
    options = dict(
        iterations=iterations,
        normalize=normalize,
        delta=delta,
        epsilon=epsilon,
        max_iter=max_iter,
        tol=tol,
        transport_dtype=transport_dtype,
        history=history,
        base=base,
        restrict=restrict,
    )
    if grad.wants_grad(lengths, step, alpha, exp_power):
        return grad.ricci_flow(
            lengths,
            adjacency,
            step=step,
            alpha=alpha,
            exp_power=exp_power,
            method=method,
            nbr_topk=nbr_topk,
            **options,
        )
    knobs = dict(step=float(step), alpha=float(alpha), exp_power=float(exp_power))  # no grad
    _check_graph(lengths, adjacency)
    _check_measure_options(knobs["alpha"], knobs["exp_power"], base, nbr_topk)
    _check_method(method)
    if method == "average":
        raise ValueError("method 'average' is not a flow method; use auto, exact or sinkhorn")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    _check_accuracy(accuracy, method)
    if backend not in FLOW_BACKENDS:
        raise ValueError(f"backend must be one of {FLOW_BACKENDS}, got {backend!r}")
    fits = compiled.applies(lengths, method=method, accuracy=accuracy, nbr_topk=nbr_topk)
    if backend == "compiled" and not fits:
        raise ValueError(
            "backend='compiled' runs method='sinkhorn', accuracy=None, nbr_topk=None on CPU tensors"
        )
    if fits and backend != "tensor":
        result = compiled.ricci_flow(lengths, adjacency, **knobs, **options)
        if result is not None:
            return result
    return flow.ricci_flow(
        lengths,
        adjacency,
        **knobs,
        **options,
        method=method,
        accuracy=accuracy,
        nbr_topk=nbr_topk,
    )
