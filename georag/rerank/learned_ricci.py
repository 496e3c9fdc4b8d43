"""Learnable Ricci-Filtration: seed 000's Ricci-flow filter with trained knobs.

The fixed method (:class:`~georag.rerank.ricci_filtration.RicciFiltration`) builds, per
query, the graph of the query and its ``top_m`` candidates (percentile threshold on the
cosine dissimilarity ``r``, query edges forced), runs M steps of the normalized Ricci flow
from unit lengths and keeps the candidates whose final query-edge length ``w`` is at most
``eta``; their score is the first-stage score ``s``. Learned here, initialised at its
defaults:

* ``alpha`` (0.5) in (0, 1), through a sigmoid, and ``exp_power`` (2), through exp: the
  node measures;
* ``length_power`` (0): initial edge lengths ``(r_ij / g) ** length_power`` with ``g`` the
  geometric mean of the graph's edge dissimilarities, so 0 gives the paper's unit lengths
  exactly and the embeddings reach the flow through it;
* ``eta`` (1) through exp: the surgery threshold;
* ``geometry_weight`` (0): the fusion with the first-stage score, ``s + geometry_weight *
  (eta - w)``;
* optionally a learned linear map of query and candidate embeddings (identity at start),
  shared by the graph and the lengths. The map reaches the scores through the lengths
  only, so its gradient is 0 until ``length_power`` leaves 0 (one step does it: the
  exponent's own gradient is not 0 there).

The flow ``step`` (1) is a fixed setting, not trained: ``w (1 - step kappa)`` stays
non-negative for every curvature (``kappa <= 1``) only while ``step <= 1``, and no smooth
parameterisation reaches the paper's 1 from inside (0, 1]; a learned ``exp`` step went
above 1 in the first steps on scifact and drove a length negative. The TPE baseline
(``search_space``) searches it in [0.1, 1].

Gradients run through the flow (:func:`georag.geometry.ricci.grad.ricci_flow`: unrolled
steps, implicit Sinkhorn). Discrete decisions, and what each phase uses:

* the threshold graph (which pairs are joined, at ``quantile``) is recomputed from the
  current embeddings at each call and is not trained (nor is ``quantile``);
* surgery: training scores ``s + geometry_weight (eta - w) + log sigmoid((eta - w) / t)``
  over every pooled candidate (``t = surgery_temperature``), a smooth surrogate of the cut
  that reaches ``eta`` and ``w``; inference keeps ``w <= eta + eta_atol`` exactly as the
  fixed method (the ``t -> 0`` limit of the surrogate) and scores the kept
  ``s + geometry_weight (eta - w)``;
* inference runs the fixed solver (:func:`georag.geometry.ricci.ricci_flow` with the
  current knobs as numbers), so an untrained reranker returns RicciFiltration's scores and
  keep mask.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch
from georag.geometry.graphs import cosine_dissimilarity, threshold_graph
from georag.geometry.ricci import CURVATURE_METHODS, RicciConvergenceWarning, ricci_flow
from georag.models.knobs import EmbeddingMap, Interval, Positive, Real
from georag.rerank.learned import LearnableReranker
from georag.rerank.ricci_filtration import RicciFiltrationConfig

__all__ = ["LearnedRicciConfig", "LearnedRicci"]

_DEFAULTS = RicciFiltrationConfig()
_SMALLEST_DISSIMILARITY = 1e-6  # floor under log r (identical embeddings have r = 0)


@dataclass(frozen=True)
class LearnedRicciConfig:
    """Initial knobs (seed 000's defaults, from RicciFiltrationConfig) and fixed settings.

    Parameters
    ----------
    top_m, quantile, iterations, eta_atol, method, epsilon, max_iter, tol :
        As :class:`~georag.rerank.ricci_filtration.RicciFiltrationConfig` (fixed).
    step : float
        Flow step (fixed; searched by the TPE baseline, not trained).
    alpha, exp_power, eta : float
        Initial values of the measure and surgery knobs.
    length_power, geometry_weight : float
        Initial exponent of the initial lengths and fusion weight (0: the fixed method).
    surgery_temperature : float
        ``t`` of the training surrogate ``log sigmoid((eta - w) / t)``.
    checkpoint : bool
        Recompute each flow step in the backward pass (less memory).
    embedding_map : bool
        Learn a linear map of the embeddings (identity at start).
    dim : int
        Embedding width D (for the map).
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    top_m: int = _DEFAULTS.top_m
    quantile: float = _DEFAULTS.quantile
    iterations: int = _DEFAULTS.iterations
    step: float = _DEFAULTS.step
    alpha: float = _DEFAULTS.alpha
    exp_power: float = _DEFAULTS.exp_power
    eta: float = _DEFAULTS.eta
    eta_atol: float = _DEFAULTS.eta_atol
    method: str = _DEFAULTS.method
    epsilon: float = _DEFAULTS.epsilon
    max_iter: int = _DEFAULTS.max_iter
    tol: float = _DEFAULTS.tol
    length_power: float = 0.0
    geometry_weight: float = 0.0
    surgery_temperature: float = 0.05
    checkpoint: bool = False
    embedding_map: bool = False
    dim: int = 384
    weights: str | None = None

    def __post_init__(self) -> None:
        # the shared fields are checked by the fixed method's config
        RicciFiltrationConfig(
            top_m=self.top_m,
            quantile=self.quantile,
            iterations=self.iterations,
            eta=self.eta,
            eta_atol=self.eta_atol,
            method=self.method,
        )
        if self.method not in CURVATURE_METHODS:
            raise ValueError(f"method must be one of {CURVATURE_METHODS}, got {self.method!r}")
        if not (self.step > 0 and self.exp_power > 0 and self.surgery_temperature > 0):
            raise ValueError(
                f"step, exp_power and surgery_temperature must be positive, got "
                f"{self.step}, {self.exp_power}, {self.surgery_temperature}"
            )
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")


class LearnedRicci(LearnableReranker):
    """Ricci-flow filter with learned measures, lengths, surgery and fusion."""

    name = "learned_ricci"
    config_class = LearnedRicciConfig
    fixed_method = "ricci"
    search_space = {
        "alpha": (0.05, 0.95, False),
        "exp_power": (0.25, 4.0, True),
        # kappa <= 1, so w (1 - step kappa) stays >= 0 for any curvature only if step <= 1
        "step": (0.1, 1.0, True),
        "eta": (0.5, 2.0, True),
        "length_power": (-2.0, 2.0, False),
        "geometry_weight": (-2.0, 2.0, False),
    }

    def __init__(self, config: LearnedRicciConfig | None = None) -> None:
        super().__init__(config or LearnedRicciConfig())
        cfg = self.config
        self.alpha = Interval(cfg.alpha)
        self.exp_power = Positive(cfg.exp_power)
        self.eta = Positive(cfg.eta)
        self.length_power = Real(cfg.length_power)
        self.geometry_weight = Real(cfg.geometry_weight)
        self.embed = EmbeddingMap(cfg.dim) if cfg.embedding_map else None
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores over the pooled candidates (training) or the kept ones (inference)."""
        cfg = self.config
        if batch.num_candidates < 2:
            raise ValueError(
                f"Ricci-Filtration needs at least 2 candidate slots (M >= 2), "
                f"got M={batch.num_candidates}"
            )
        query, cands = batch.query, batch.cands
        if self.embed is not None:
            query, cands = self.embed(query), self.embed(cands)
        dtype = cands.dtype
        width = min(cfg.top_m, batch.num_candidates)
        ranked = batch.scores.masked_fill(~batch.mask, -torch.inf)
        slots = torch.argsort(ranked, dim=1, descending=True, stable=True)[:, :width]
        pooled = torch.gather(batch.mask, 1, slots)
        index = slots.unsqueeze(2).expand(-1, -1, cands.shape[2])
        nodes = torch.cat([query.unsqueeze(1), torch.gather(cands, 1, index)], dim=1)
        node_mask = torch.cat([torch.ones_like(pooled[:, :1]), pooled], dim=1)
        r = cosine_dissimilarity(nodes, mask=node_mask)
        adjacency = threshold_graph(r.detach(), quantile=cfg.quantile, force_node=0, mask=node_mask)

        log_r = torch.log(torch.where(adjacency, r, 1.0).clamp_min(_SMALLEST_DISSIMILARITY))
        count = adjacency.sum((1, 2), keepdim=True).clamp_min(1)
        centred = log_r - log_r.masked_fill(~adjacency, 0.0).sum((1, 2), keepdim=True) / count
        lengths = torch.where(adjacency, torch.exp(self.length_power().to(dtype) * centred), 0.0)

        knobs = dict(
            alpha=self.alpha().to(dtype),
            exp_power=self.exp_power().to(dtype),
        )
        if not torch.is_grad_enabled():
            knobs = {k: float(v) for k, v in knobs.items()}  # the fixed solver, as numbers
        options = dict(
            iterations=cfg.iterations,
            step=cfg.step,
            method=cfg.method,
            epsilon=cfg.epsilon,
            max_iter=cfg.max_iter,
            tol=cfg.tol,
        )
        if torch.is_grad_enabled():
            from georag.geometry.ricci import grad

            flow = grad.ricci_flow(
                lengths, adjacency, checkpoint=cfg.checkpoint, **knobs, **options
            )
        else:
            with warnings.catch_warnings():  # uncertified Sinkhorn, as RicciFiltration
                warnings.simplefilter("ignore", RicciConvergenceWarning)
                flow = ricci_flow(lengths, adjacency, accuracy=None, **knobs, **options)

        w = flow.lengths[:, 0, 1:]
        eta = self.eta().to(dtype)
        on_flow = pooled & flow.adjacency[:, 0, 1:]
        too_small = pooled.sum(1, keepdim=True) < 2
        first = torch.gather(batch.scores, 1, slots).to(dtype)
        margin = torch.where(on_flow, eta - w, 0.0)
        scores = first + self.geometry_weight().to(dtype) * margin
        if self.training and torch.is_grad_enabled():
            t = cfg.surgery_temperature
            soft = torch.nn.functional.logsigmoid(margin / t)
            scores = scores + torch.where(too_small, 0.0, soft)
            chosen = torch.where(too_small, pooled, on_flow)
        else:
            kept = on_flow & (w <= eta + cfg.eta_atol)
            chosen = torch.where(too_small, pooled, kept)
        out = torch.zeros_like(batch.scores).scatter(1, slots, scores.to(batch.scores.dtype))
        keep = torch.zeros_like(batch.mask).scatter(1, slots, chosen)
        return out, keep
