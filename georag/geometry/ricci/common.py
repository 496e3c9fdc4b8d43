"""What the Ricci solvers and flows share: options and their checks, the padded edge list
of a batch of graphs, the largest component, the flow's result and warning, and the
numba compilation of the sparse kernels."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numba
import torch

from georag.geometry.graphs import shortest_paths

CURVATURE_METHODS = ("auto", "exact", "sinkhorn", "batched", "average")
FLOW_BACKENDS = ("auto", "tensor", "compiled")
#: ``method="auto"`` solves every edge exactly (network simplex) when both closed
#: neighbourhoods have at most this many nodes, and by Sinkhorn otherwise (the rule of
#: GraphRicciCurvature's "OTDSinkhornMix", with its threshold). On a CPU the exact solve
#: is the cheaper one at these sizes (docs/methods/ricci_filtration.md, "Choosing the
#: solver").
EXACT_MAX_SUPPORT = 2000

#: Certified Sinkhorn within 1e-8 of the exact curvature on every edge
#: (``ollivier_ricci(lengths, adjacency, **SINKHORN_ACCURACY)``, also for
#: :func:`ricci_flow`): a smaller regularization and more iterations than the defaults.
#: The flow amplifies each step's curvature error, mostly a few hundred times over 40
#: steps, and up to ten thousand times where edges shrink to 1e-7 of the mean
#: (docs/methods/ricci_filtration.md, "Accuracy through the whole flow"): 1e-6 per step
#: reached 3.4e-2 on one held-out graph, 1e-7 followed it to 1.4e-9; 1e-8 leaves a
#: tenfold margin. Entropic transport at this epsilon certifies few edges that tightly;
#: the others are solved exactly, so on a CPU this setting is slower than
#: ``method="exact"``; off the CPU, ``method="batched"`` is the exact-grade batched solver.
SINKHORN_ACCURACY = {
    "method": "sinkhorn",
    "epsilon": 0.01,
    "max_iter": 3000,
    "tol": 1e-7,
    "accuracy": 1e-8,
}
_NEIGHBOUR_WEIGHT_FLOOR = 1e-7  # GraphRicciCurvature's EPSILON
_ZERO_DISTANCE = 1e-7
_MOVING_EPS = 64  # machine epsilons: a side of m_x - m_y with less mass is rounding
_GAP_FLOOR = 1e-13  # the interior point's duality gap is not resolved below rounding
_KERNEL_SPAN = 1.6  # widest cost / epsilon, in units of max_cost_over_epsilon


def _jit(fn):
    """``fn`` compiled by numba (cached on disk, without the GIL, numpy's error model)."""
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)


class RicciConvergenceWarning(RuntimeWarning):
    """A flow step's Sinkhorn solves missed their tolerance (``accuracy=None`` only)."""


def _check_graph(lengths: torch.Tensor, adjacency: torch.Tensor, directed: bool = False) -> None:
    if lengths.dim() != 3 or lengths.shape[1] != lengths.shape[2]:
        raise ValueError(f"lengths must have shape (B, N, N), got {tuple(lengths.shape)}")
    if not lengths.is_floating_point():
        raise ValueError(f"lengths must be a floating tensor, got {lengths.dtype}")
    if adjacency.shape != lengths.shape or adjacency.dtype != torch.bool:
        raise ValueError(
            f"adjacency must be a bool tensor of shape {tuple(lengths.shape)}, "
            f"got {adjacency.dtype} {tuple(adjacency.shape)}"
        )
    if not directed and not torch.equal(adjacency, adjacency.transpose(1, 2)):
        raise ValueError(
            "adjacency must be symmetric (undirected graphs; directed=True for directed ones)"
        )
    if adjacency.diagonal(dim1=1, dim2=2).any():
        raise ValueError("adjacency must be False on the diagonal (no self loops)")
    edge_lengths = lengths[adjacency]
    if not torch.isfinite(edge_lengths).all() or (edge_lengths < 0).any():
        raise ValueError("lengths must be finite and non-negative on every edge")
    upper = lengths.masked_fill(~adjacency, 0.0)
    if not directed and not torch.equal(upper, upper.transpose(1, 2)):
        raise ValueError("lengths must be symmetric on the edges")


def _check_measure_options(
    alpha: float, exp_power: float, base: float = math.e, nbr_topk: int | None = None
) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if not math.isfinite(exp_power) or exp_power < 0:
        raise ValueError(f"exp_power must be finite and non-negative, got {exp_power}")
    if not (math.isfinite(base) and base > 0):
        raise ValueError(f"base must be positive and finite, got {base}")
    if nbr_topk is not None and nbr_topk < 1:
        raise ValueError(f"nbr_topk must be >= 1 or None, got {nbr_topk}")


def _check_accuracy(accuracy: float | None, method: str) -> None:
    if accuracy is not None and not (math.isfinite(accuracy) and accuracy > 0):
        raise ValueError(f"accuracy must be positive and finite or None, got {accuracy}")
    if accuracy is None and method == "batched":
        raise ValueError(
            "accuracy must be positive with method='batched' (it certifies every edge)"
        )


def _check_method(method: str) -> None:
    if method not in CURVATURE_METHODS:
        raise ValueError(f"method must be one of {CURVATURE_METHODS}, got {method!r}")


def _edge_index(
    adjacency: torch.Tensor, directed: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded list of the edges of each graph: ``i < j`` (undirected) or every ``i -> j``.

    Returns ``(i, j, valid)``, each of shape (B, E) with E the largest edge count.
    """
    b, n, _ = adjacency.shape
    upper = (adjacency if directed else torch.triu(adjacency, diagonal=1)).reshape(b, n * n)
    counts = upper.sum(1)
    e = int(counts.max()) if b else 0
    order = torch.argsort((~upper).to(torch.int8), dim=1, stable=True)[:, :e]
    valid = torch.arange(e, device=adjacency.device).unsqueeze(0) < counts.unsqueeze(1)
    return order // n, order % n, valid


def _flow_edges(
    lengths: torch.Tensor, adjacency: torch.Tensor, restrict: bool
) -> tuple[
    torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor
]:
    """What a flow starts from: the adjacency (cut to the largest component of each graph when
    ``restrict``), its padded edge list ``(i, j, valid)``, the edge lengths ``w`` (B, E), 0 on
    padding, and the number of real edges per graph (B, 1), at least 1."""
    if restrict:
        core = largest_component(adjacency)
        adjacency = adjacency & core.unsqueeze(2) & core.unsqueeze(1)
    edges = _edge_index(adjacency)
    i, j, valid = edges
    rows = torch.arange(lengths.shape[0], device=lengths.device).unsqueeze(1)
    w = lengths[rows, i, j].masked_fill(~valid, 0.0)
    num_edges = valid.sum(1, keepdim=True).clamp_min(1).to(lengths.dtype)
    return adjacency, edges, w, num_edges


def _scatter_edges(
    values: torch.Tensor,
    i: torch.Tensor,
    j: torch.Tensor,
    valid: torch.Tensor,
    n: int,
    directed: bool = False,
) -> torch.Tensor:
    b = values.shape[0]
    out = values.new_zeros(b, n * n)
    values = values.masked_fill(~valid, 0.0)
    out.scatter_add_(1, i * n + j, values)
    if not directed:
        out.scatter_add_(1, j * n + i, values)
    return out.view(b, n, n)


def largest_component(adjacency: torch.Tensor) -> torch.Tensor:
    """Nodes of the largest connected component of each graph.

    Ties go to the component holding the lowest node index, as ``max(nx.connected_
    components(G), key=len)`` picks them.

    Parameters
    ----------
    adjacency : torch.Tensor, shape (B, N, N), bool

    Returns
    -------
    torch.Tensor, shape (B, N), bool
    """
    b, n, _ = adjacency.shape
    hops = torch.where(adjacency, 1.0, math.inf)
    reach = torch.isfinite(shortest_paths(hops, adjacency))
    size = reach.sum(2)
    first = size.argmax(1)
    return reach[torch.arange(b, device=adjacency.device), first]


@dataclass(frozen=True)
class RicciFlowResult:
    """Outcome of :func:`ricci_flow`.

    Attributes
    ----------
    lengths : torch.Tensor, shape (B, N, N)
        Final edge lengths on ``adjacency``, 0 elsewhere.
    curvature : torch.Tensor, shape (B, N, N)
        Curvature on the final lengths, 0 off the edges.
    adjacency : torch.Tensor, shape (B, N, N), bool
        The edges that flowed: those of each graph's largest connected component.
    iterations : torch.Tensor, shape (B,), long
        Flow iterations each graph ran (fewer than asked when it stopped early).
    converged : torch.Tensor, shape (B,), bool
        Whether every curvature of that graph, at every step, is within its stated
        accuracy: with ``accuracy`` set, certified within it or solved exactly (always
        True unless the network simplex failed); with ``accuracy=None``, every Sinkhorn
        solve reached its marginal tolerance ``tol``.
    exact_solves : torch.Tensor, shape (B,), long
        Edge transport problems of that graph solved by the network simplex over the
        whole flow (method "exact": all; Sinkhorn: those not certified, or not finite).
    history_lengths, history_curvature : torch.Tensor, shape (T + 1, B, N, N), optional
        Lengths and curvature before the first and after every iteration (frozen after
        a graph stops), when ``history=True``.
    """

    lengths: torch.Tensor
    curvature: torch.Tensor
    adjacency: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor
    exact_solves: torch.Tensor
    history_lengths: torch.Tensor | None = None
    history_curvature: torch.Tensor | None = None


class _Trail:
    """A flow's lengths and curvature as (B, N, N) matrices: every step's with
    ``history``, and the outcome.

    ``matrix`` turns (B, E) edge values into the symmetric (B, N, N) matrix; the trail
    starts at the lengths ``w`` and curvature ``kappa`` before the first step.
    """

    def __init__(self, matrix, history: bool, w: torch.Tensor, kappa: torch.Tensor) -> None:
        self.matrix, self.history = matrix, history
        self.lengths, self.curvature = [], []
        self.add(w, kappa)

    def add(self, w: torch.Tensor, kappa: torch.Tensor) -> None:
        """Keep the (B, E) lengths and curvature after a step (with ``history``)."""
        if self.history:
            self.lengths.append(self.matrix(w))
            self.curvature.append(self.matrix(kappa))

    def result(
        self,
        w: torch.Tensor,
        kappa: torch.Tensor,
        adjacency: torch.Tensor,
        iterations: torch.Tensor,
        converged: torch.Tensor,
        exact_solves: torch.Tensor,
    ) -> RicciFlowResult:
        """The flow's outcome, ending at the (B, E) lengths ``w`` and curvature ``kappa``."""
        return RicciFlowResult(
            lengths=self.matrix(w),
            curvature=self.matrix(kappa),
            adjacency=adjacency,
            iterations=iterations,
            converged=converged,
            exact_solves=exact_solves,
            history_lengths=torch.stack(self.lengths) if self.history else None,
            history_curvature=torch.stack(self.curvature) if self.history else None,
        )


def _warn_missed(
    steps_missed: int, graphs_missed: int, b: int, tol: float, max_iter: int, depth: int
) -> None:
    """Warn (once per call) that ``steps_missed`` solves missed ``tol``; ``depth``: calls
    between the user's and this one."""
    if steps_missed:
        warnings.warn(
            f"ricci_flow: {steps_missed} (graph, step) curvature solves missed the Sinkhorn "
            f"tolerance tol={tol} within max_iter={max_iter} (converged=False on "
            f"{graphs_missed} of {b} graphs); pass accuracy= for certified curvature",
            RicciConvergenceWarning,
            stacklevel=depth + 1,
        )
