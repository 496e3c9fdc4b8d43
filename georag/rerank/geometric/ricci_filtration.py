"""Ricci-Filtration: drop candidates that the normalized Ricci flow pushes away.

Paper: *Ricci-Filtration: Boosting Retrieval-Augmented Generation Reranker to Query-Answer
Tasks by Discrete Ricci Flow*, Tian Qin and Wei-Min Huang, arXiv:2606.15482.

For each query the query and its top-20 candidates are the nodes of a graph; two nodes
are joined when their cosine dissimilarity ``1 - cos`` is at most the 50th percentile
of the graph's off-diagonal dissimilarities, and every query edge is forced. All edges
start at unit length; M = 20 iterations of the normalized discrete Ricci flow
(``alpha = 0.5``, ``p = 2``, see :func:`georag.geometry.ricci.ricci_flow`) follow, and
the surgery keeps the candidates whose final query-edge length is at most ``eta = 1``
(the mean edge length). The survivors go to a second stage; compose with
:class:`~georag.rerank.pipeline.RerankPipeline` (``[RicciFiltration(), stage]``), which
rescores the kept set only, as the paper's pipeline does.

One function, :func:`ricci_filtration_scores` (graph, flow and surgery), whose knobs are
floats or tensors: the fixed :class:`RicciFiltration` calls it with its config's numbers,
the learnable :class:`LearnedRicci` with its parameters, so that untrained it is the fixed
method. The learnable one trains

* ``alpha`` (0.5) in (0, 1), through a sigmoid, and ``exp_power`` (2), through exp: the
  node measures;
* ``length_power`` (0): initial edge lengths ``(r_ij / g) ** length_power`` with ``r`` the
  cosine dissimilarity and ``g`` the geometric mean of the graph's edge dissimilarities,
  so 0 gives the paper's unit lengths exactly and the embeddings reach the flow through it;
* ``eta`` (1) through exp: the surgery threshold;
* ``geometry_weight`` (0): the fusion with the first-stage score ``s``,
  ``s + geometry_weight * (eta - w)`` with ``w`` the final query-edge length;
* optionally a linear map of query and candidate embeddings (identity at start), shared by
  the graph and the lengths. The map reaches the scores through the lengths only, so its
  gradient is 0 until ``length_power`` leaves 0 (one step does it: the exponent's own
  gradient is not 0 there).

The flow ``step`` (1) is a fixed setting, not trained: ``w (1 - step kappa)`` stays
non-negative for every curvature (``kappa <= 1``) only while ``step <= 1``, and no smooth
parameterisation reaches the paper's 1 from inside (0, 1]; a learned ``exp`` step went
above 1 in the first steps on scifact and drove a length negative. The TPE baseline
(``search_space``) searches it in [0.1, 1].

Gradients run through the flow (:func:`georag.geometry.ricci.grad.ricci_flow`: unrolled
steps, implicit Sinkhorn). The threshold graph (which pairs are joined, at ``quantile``) is
recomputed from the current embeddings at each call and is not trained (nor is
``quantile``). Training scores ``s + geometry_weight (eta - w) + log sigmoid((eta - w) / t)``
over every pooled candidate (``t = surgery_temperature``), a smooth surrogate of the cut
that reaches ``eta`` and ``w``; inference keeps ``w <= eta + eta_atol`` exactly as the
fixed method (the ``t -> 0`` limit of the surrogate) and scores the kept
``s + geometry_weight (eta - w)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.geometry.graphs import cosine_dissimilarity, threshold_graph
from georag.geometry.ricci import (
    CURVATURE_METHODS,
    FLOW_BACKENDS,
    RicciConvergenceWarning,
    RicciFlowResult,
    grad,
    ricci_flow,
)
from georag.models.knobs import EmbeddingMap, Interval, Positive, Real
from georag.rerank.learned import LearnableReranker, LearningOptions
from georag.rerank.pool import best_slots
from georag.rerank.registry import register
from georag.rerank.small_pool import SmallPool

__all__ = [
    "LearnedRicci",
    "LearnedRicciConfig",
    "RicciFiltration",
    "RicciFiltrationConfig",
    "RicciFiltrationOutput",
    "query_graphs",
    "ricci_filtration_scores",
]

Knob = float | torch.Tensor
_SMALLEST_DISSIMILARITY = 1e-6  # floor under log r (identical embeddings have r = 0)


@dataclass(frozen=True)
class RicciFiltrationConfig:
    """Defaults of the Ricci-Filtration paper, sections 3.1-3.2 and 4.2.3
    (also configs/rerank/ricci_filtration.yaml).

    Parameters
    ----------
    top_m : int
        Candidates (best first-stage scores) that join the query in the graph (k = 20).
    quantile : float
        Edge threshold tau: this quantile of the off-diagonal dissimilarities (50%).
    iterations : int
        Ricci-flow iterations M (20).
    step : float
        Flow step size (1, GraphRicciCurvature's default).
    alpha, exp_power : float
        Node measures (alpha = 0.5, p = 2).
    eta : float
        Surgery threshold on the final normalized query-edge length (1).
    eta_atol : float
        Slack on ``eta`` so that rounding does not split ties at exactly ``eta`` (a flat
        graph keeps every length at 1).
    method : {"sinkhorn", "exact"}
        Transport solver of the curvature.
    epsilon, max_iter, tol : float, int, float
        Sinkhorn settings, see :func:`georag.geometry.ricci.ricci_flow`.
    backend : {"auto", "tensor", "compiled"}
        Flow implementation, see :func:`georag.geometry.ricci.ricci_flow`: "auto" runs
        the compiled CPU flow on CPU tensors (about 3 ms per query at B=1, one thread;
        docs/performance.md) and batched tensor ops elsewhere.
    """

    top_m: int = 20
    quantile: float = 0.5
    iterations: int = 20
    step: float = 1.0
    alpha: float = 0.5
    exp_power: float = 2.0
    eta: float = 1.0
    eta_atol: float = 1e-5
    method: str = "sinkhorn"
    epsilon: float = 0.1
    max_iter: int = 50
    tol: float = 1e-3
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.top_m < 2:
            raise ValueError(f"top_m must be at least 2, got {self.top_m}")
        if not 0.0 <= self.quantile <= 1.0:
            raise ValueError(f"quantile must lie in [0, 1], got {self.quantile}")
        if self.iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {self.iterations}")
        if self.eta <= 0 or self.eta_atol < 0:
            raise ValueError(
                f"eta must be positive and eta_atol >= 0, got {self.eta}, {self.eta_atol}"
            )
        if self.method not in CURVATURE_METHODS:
            raise ValueError(f"method must be one of {CURVATURE_METHODS}, got {self.method!r}")
        if self.backend not in FLOW_BACKENDS:
            raise ValueError(f"backend must be one of {FLOW_BACKENDS}, got {self.backend!r}")

    def flow_options(self) -> dict:
        """The keyword arguments of :func:`~georag.geometry.ricci.ricci_flow` that run the
        filter's flow: the flow and Sinkhorn fields, uncertified (``accuracy=None``, the
        speed setting)."""
        return dict(
            iterations=self.iterations,
            step=self.step,
            alpha=self.alpha,
            exp_power=self.exp_power,
            method=self.method,
            epsilon=self.epsilon,
            max_iter=self.max_iter,
            tol=self.tol,
            accuracy=None,
            backend=self.backend,
        )


@dataclass(frozen=True)
class RicciFiltrationOutput:
    """The flow behind one call, in the batch's candidate slots.

    Attributes
    ----------
    query_lengths : torch.Tensor, shape (B, M)
        Final normalized query-edge length of each pooled candidate; ``nan`` elsewhere.
    keep : torch.Tensor, shape (B, M), bool
        Kept candidates.
    slots : torch.Tensor, shape (B, W), long
        Batch slot of graph node ``1 + w`` (node 0 is the query).
    flow : RicciFlowResult
        The flow over the (B, 1 + W, 1 + W) graphs, with its history when asked.
    pooled : torch.Tensor, shape (B, W), bool
        Node ``1 + w`` is a real candidate.
    on_flow : torch.Tensor, shape (B, W), bool
        Pooled and in the component that flowed.
    """

    query_lengths: torch.Tensor
    keep: torch.Tensor
    slots: torch.Tensor
    flow: RicciFlowResult
    pooled: torch.Tensor
    on_flow: torch.Tensor

    @property
    def too_small(self) -> torch.Tensor:
        """(B, 1) bool: fewer than two pooled candidates, nothing to separate (all kept)."""
        return self.pooled.sum(1, keepdim=True) < 2


def _check_width(batch: CandidateBatch) -> None:
    if batch.num_candidates < 2:
        raise ValueError(
            f"Ricci-Filtration needs at least 2 candidate slots (M >= 2), "
            f"got M={batch.num_candidates}"
        )


def _graphs(
    batch: CandidateBatch,
    *,
    top_m: int,
    quantile: float,
    embed: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`query_graphs` and the dissimilarities ``r`` (B, 1 + W, 1 + W) it thresholds."""
    _check_width(batch)
    query, cands = batch.query, batch.cands
    if embed is not None:
        query, cands = embed(query), embed(cands)
    slots = best_slots(batch, top_m)
    pooled = torch.gather(batch.mask, 1, slots)
    index = slots.unsqueeze(2).expand(-1, -1, cands.shape[2])
    nodes = torch.cat([query.unsqueeze(1), torch.gather(cands, 1, index)], dim=1)
    node_mask = torch.cat([torch.ones_like(pooled[:, :1]), pooled], dim=1)
    r = cosine_dissimilarity(nodes, mask=node_mask)
    adjacency = threshold_graph(r.detach(), quantile=quantile, force_node=0, mask=node_mask)
    return adjacency, slots, r


def query_graphs(
    batch: CandidateBatch, *, top_m: int = 20, quantile: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's graphs: query (node 0) and its ``top_m`` candidates, percentile edges.

    Parameters
    ----------
    batch : CandidateBatch
    top_m, quantile
        See :class:`RicciFiltrationConfig`.

    Returns
    -------
    adjacency : torch.Tensor, shape (B, 1 + W, 1 + W), bool
        ``W = min(top_m, M)``; nodes of padded slots are isolated, and node 0 (the
        query) is joined to every real candidate.
    slots : torch.Tensor, shape (B, W), long
        Batch slot of node ``1 + w``: the candidates by decreasing first-stage score.
    """
    adjacency, slots, _ = _graphs(batch, top_m=top_m, quantile=quantile)
    return adjacency, slots


def _initial_lengths(adjacency: torch.Tensor, r: torch.Tensor, length_power: Knob) -> torch.Tensor:
    """``(r / g) ** length_power`` on the edges (g: the geometric mean of the edge
    dissimilarities), 0 elsewhere; unit lengths at a float power of 0."""
    if not isinstance(length_power, torch.Tensor) and length_power == 0:
        return adjacency.to(r.dtype)
    log_r = torch.log(torch.where(adjacency, r, 1.0).clamp_min(_SMALLEST_DISSIMILARITY))
    count = adjacency.sum((1, 2), keepdim=True).clamp_min(1)
    centred = log_r - log_r.masked_fill(~adjacency, 0.0).sum((1, 2), keepdim=True) / count
    power = length_power.to(r.dtype) if isinstance(length_power, torch.Tensor) else length_power
    return torch.where(adjacency, torch.exp(power * centred), 0.0)


def ricci_filtration_scores(
    batch: CandidateBatch,
    *,
    top_m: int,
    quantile: float,
    iterations: int,
    step: float,
    alpha: Knob,
    exp_power: Knob,
    eta: Knob,
    eta_atol: float,
    method: str,
    epsilon: float,
    max_iter: int,
    tol: float,
    backend: str = "auto",
    length_power: Knob = 0.0,
    embed: Callable[[torch.Tensor], torch.Tensor] | None = None,
    checkpoint: bool = False,
    history: bool = False,
) -> RicciFiltrationOutput:
    """The filter's graphs, flow and surgery (see the module docstring).

    The flow runs uncertified Sinkhorn (``accuracy=None``, the speed setting, its
    convergence warnings silenced); with a knob that requires grad it runs under autograd
    (:mod:`georag.geometry.ricci.grad`, ``checkpoint`` recomputing each step in the
    backward pass).

    Parameters
    ----------
    batch : CandidateBatch
    top_m, quantile, iterations, step, alpha, exp_power, eta, eta_atol, method, epsilon,
    max_iter, tol, backend
        See :class:`RicciFiltrationConfig`; ``alpha``, ``exp_power`` and ``eta`` may be
        tensors (learned knobs).
    length_power : float or torch.Tensor
        Exponent of the initial lengths (0: the paper's unit lengths).
    embed : callable, optional
        A map applied to the query (B, D) and candidate (B, M, D) embeddings first.
    checkpoint, history
        Recompute flow steps in the backward pass; keep every step of the flow.

    Returns
    -------
    RicciFiltrationOutput
        ``keep`` is ``w <= eta + eta_atol`` on the flowed candidates (every pooled one
        when fewer than two are pooled).

    Raises
    ------
    ValueError
        When the batch holds fewer than 2 candidate slots (M < 2).
    """
    adjacency, slots, r = _graphs(batch, top_m=top_m, quantile=quantile, embed=embed)
    pooled = adjacency[:, 0, 1:]
    lengths = _initial_lengths(adjacency, r, length_power)
    options = dict(
        iterations=iterations,
        step=step,
        alpha=alpha,
        exp_power=exp_power,
        method=method,
        epsilon=epsilon,
        max_iter=max_iter,
        tol=tol,
        history=history,
    )
    if checkpoint and grad.wants_grad(lengths, alpha, exp_power):
        flow = grad.ricci_flow(lengths, adjacency, checkpoint=True, **options)
    else:
        with warnings.catch_warnings():  # uncertified Sinkhorn on purpose: the speed setting
            warnings.simplefilter("ignore", RicciConvergenceWarning)
            flow = ricci_flow(lengths, adjacency, accuracy=None, backend=backend, **options)

    query_edges = flow.lengths[:, 0, 1:]
    on_flow = pooled & flow.adjacency[:, 0, 1:]
    kept = on_flow & (query_edges <= eta + eta_atol)
    too_small = pooled.sum(1, keepdim=True) < 2
    kept = torch.where(too_small, pooled, kept)

    keep = torch.zeros_like(batch.mask).scatter(1, slots, kept)
    nan = torch.full(
        batch.scores.shape, torch.nan, dtype=query_edges.dtype, device=query_edges.device
    )
    lengths = nan.scatter(1, slots, query_edges.masked_fill(~pooled, torch.nan))
    return RicciFiltrationOutput(
        query_lengths=lengths, keep=keep, slots=slots, flow=flow, pooled=pooled, on_flow=on_flow
    )


def ricci_small_pool(config: RicciFiltrationConfig) -> SmallPool:
    """Two documents or more: the flow on the query and its documents; one: the first-stage
    order."""
    return SmallPool(
        slots=2,
        fewest=2,
        rule="n >= 2: the flow on the query and its n documents; n = 1: first-stage order "
        "(fallback)",
    )


@register
class RicciFiltration:
    """Ricci-flow filter: keeps the candidates near the query after the flow
    (:func:`ricci_filtration_scores` with the config's numbers).

    Scores are the first-stage scores of the kept candidates (``-inf`` elsewhere), so on
    its own it is the first-stage order restricted to the survivors.

    Behaviour at the edges (tested):

    - candidates outside the ``top_m`` pool and padded slots are never kept; padded
      nodes are isolated in the graph;
    - a query with fewer than two real candidates (a graph of under 3 nodes) has nothing
      to separate: its candidates are all kept;
    - identical embeddings (all dissimilarities equal) give the complete graph, whose
      curvature is flat: the flow stops with every length 1 and every candidate is kept;
    - zero embedding vectors raise ``ValueError`` (cosine is undefined); NaN ones are
      rejected by :class:`~georag.batch.CandidateBatch`.

    Raises
    ------
    ValueError
        When the batch holds fewer than 2 candidate slots (M < 2).
    """

    name = "ricci"
    config_class = RicciFiltrationConfig

    def small_pool_rule(self) -> SmallPool:
        """What a query with only 1, 2 or 3 documents gets (:mod:`georag.rerank.small_pool`)."""
        return ricci_small_pool(self.config)

    def __init__(self, config: RicciFiltrationConfig | None = None) -> None:
        self.config = config or RicciFiltrationConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        out = self.filtrate(batch)
        return RerankResult.from_scores(batch.scores.clone(), out.keep)

    def filtrate(self, batch: CandidateBatch, *, history: bool = False) -> RicciFiltrationOutput:
        """Run the graph construction, flow and surgery; return the details."""
        return ricci_filtration_scores(batch, **asdict(self.config), history=history)


@dataclass(frozen=True)
class LearnedRicciConfig(LearningOptions):
    """The fixed method's config (graph, flow, initial measures and ``eta``) and the
    learning options.

    Parameters
    ----------
    fixed : RicciFiltrationConfig
        Every setting of the fixed method; ``alpha``, ``exp_power`` and ``eta`` are the
        initial knobs, ``step`` is fixed (searched by the TPE baseline, not trained).
    length_power, geometry_weight : float
        Initial exponent of the initial lengths and fusion weight (0: the fixed method).
    surgery_temperature : float
        ``t`` of the training surrogate ``log sigmoid((eta - w) / t)``.
    checkpoint : bool
        Recompute each flow step in the backward pass (less memory).
    embedding_map, dim, weights
        See :class:`~georag.rerank.learned.LearningOptions`.
    """

    fixed: RicciFiltrationConfig = field(default_factory=RicciFiltrationConfig)
    length_power: float = 0.0
    geometry_weight: float = 0.0
    surgery_temperature: float = 0.05
    checkpoint: bool = False

    def __post_init__(self) -> None:
        fixed = self.fixed
        if not (fixed.step > 0 and fixed.exp_power > 0 and self.surgery_temperature > 0):
            raise ValueError(
                f"step, exp_power and surgery_temperature must be positive, got "
                f"{fixed.step}, {fixed.exp_power}, {self.surgery_temperature}"
            )
        if not 0.0 < fixed.alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {fixed.alpha}")


@register
class LearnedRicci(LearnableReranker):
    """Ricci-flow filter with learned measures, lengths, surgery and fusion."""

    name = "learned_ricci"
    config_class = LearnedRicciConfig
    fixed_method = "ricci"
    search_space = {
        "fixed.alpha": (0.05, 0.95, False),
        "fixed.exp_power": (0.25, 4.0, True),
        # kappa <= 1, so w (1 - step kappa) stays >= 0 for any curvature only if step <= 1
        "fixed.step": (0.1, 1.0, True),
        "fixed.eta": (0.5, 2.0, True),
        "length_power": (-2.0, 2.0, False),
        "geometry_weight": (-2.0, 2.0, False),
    }

    def small_pool_rule(self) -> SmallPool:
        """What a query with only 1, 2 or 3 documents gets (:mod:`georag.rerank.small_pool`)."""
        return ricci_small_pool(self.config.fixed)

    def __init__(self, config: LearnedRicciConfig | None = None) -> None:
        super().__init__(config or LearnedRicciConfig())
        cfg = self.config
        self.alpha = Interval(cfg.fixed.alpha)
        self.exp_power = Positive(cfg.fixed.exp_power)
        self.eta = Positive(cfg.fixed.eta)
        self.length_power = Real(cfg.length_power)
        self.geometry_weight = Real(cfg.geometry_weight)
        self.embed = EmbeddingMap(cfg.dim) if cfg.embedding_map else None
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores over the pooled candidates (training) or the kept ones (inference)."""
        cfg = self.config
        dtype = batch.cands.dtype
        eta = self.eta().to(dtype)
        knobs = dict(alpha=self.alpha().to(dtype), exp_power=self.exp_power().to(dtype), eta=eta)
        out = ricci_filtration_scores(
            batch,
            **{**asdict(cfg.fixed), **knobs},
            length_power=self.length_power().to(dtype),
            embed=self.embed,
            checkpoint=cfg.checkpoint,
        )
        w = out.flow.lengths[:, 0, 1:]
        first = torch.gather(batch.scores, 1, out.slots).to(dtype)
        margin = torch.where(out.on_flow, eta - w, 0.0)
        scores = first + self.geometry_weight().to(dtype) * margin
        keep = out.keep
        if self.training and torch.is_grad_enabled():
            soft = torch.nn.functional.logsigmoid(margin / cfg.surgery_temperature)
            scores = scores + torch.where(out.too_small, 0.0, soft)
            chosen = torch.where(out.too_small, out.pooled, out.on_flow)
            keep = torch.zeros_like(batch.mask).scatter(1, out.slots, chosen)
        scored = torch.zeros_like(batch.scores).scatter(1, out.slots, scores.to(batch.scores.dtype))
        return scored, keep
