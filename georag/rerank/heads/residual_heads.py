"""Residual geometric heads: geometry added to a score, starting at zero change.

Each head maps a base score ``s`` (any second stage: the mapped cosine, the mapped cosine
with BM25, a learning-to-rank model) to ``s + residual``, and its parameters start where
the residual is exactly 0, so an untrained head returns the base scores and training can
always fall back to them ("Regularizing ad hoc retrieval scores", Diaz; centrality
integrated into the score rather than replacing it, as in "PageRank without hyperlinks",
Kurland and Lee). No head cuts a candidate.

* :func:`smoothing_scores`: score regularization over the pool's k-NN graph,
  ``s' = s + beta (S s - s)`` with ``S`` the row-normalized k-NN operator
  ``S_ij = softmax_j(cos(e_i, e_j) / temperature)`` over the ``k`` nearest pool
  neighbours of ``i`` (``beta = 0`` at start);
* :func:`feature_scores`: ``s' = s + sum_f w_f * standardized feature_f``, a listwise
  linear head over per-candidate geometric features (``w = 0`` at start;
  :mod:`georag.rerank.heads.geo_features` computes them).

Called on a :class:`~georag.batch.CandidateBatch` alone, a head sits on the first-stage
scores; :meth:`residual` puts it on any other base.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from georag.batch import CandidateBatch
from georag.models.knobs import Positive, Real
from georag.rerank.baselines.adapter import require_features, standardized
from georag.rerank.learned import LearnableReranker
from georag.rerank.registry import register

__all__ = [
    "GraphSmoothingConfig",
    "GraphSmoothing",
    "FeatureHeadConfig",
    "FeatureHead",
    "smoothing_scores",
    "feature_scores",
]


def smoothing_scores(
    scores: torch.Tensor,
    cands: torch.Tensor,
    mask: torch.Tensor,
    beta: float | torch.Tensor,
    temperature: float | torch.Tensor,
    k: int,
) -> torch.Tensor:
    """``s + beta (S s - s)`` over each query's pool k-NN graph.

    Parameters
    ----------
    scores : torch.Tensor, shape (B, M)
        Base scores (finite where ``mask``).
    cands : torch.Tensor, shape (B, M, D)
        Candidate embeddings (non-zero where ``mask``).
    mask : torch.Tensor, shape (B, M), bool
    beta : float or 0-d tensor
        Smoothing weight (0: the base scores exactly).
    temperature : float or 0-d tensor
        Softmax temperature of the neighbour weights, > 0.
    k : int
        Neighbours per candidate (the k nearest other real candidates; which ones is
        discrete and not differentiated).

    Returns
    -------
    torch.Tensor, shape (B, M)
        A candidate without a real neighbour keeps its base score.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    m = scores.shape[1]
    if m < 2:
        return scores
    unit = cands / torch.where(mask, cands.norm(dim=2), 1.0).unsqueeze(2)
    gram = torch.bmm(unit, unit.transpose(1, 2))
    eye = torch.eye(m, dtype=torch.bool, device=mask.device)
    linkable = mask.unsqueeze(1) & mask.unsqueeze(2) & ~eye
    kk = min(k, m - 1)
    near = gram.detach().masked_fill(~linkable, -torch.inf).topk(kk, dim=2).indices
    valid = torch.gather(linkable, 2, near)
    logits = (torch.gather(gram, 2, near) / temperature).masked_fill(~valid, -torch.inf)
    has = valid.any(dim=2)
    weights = torch.softmax(logits.masked_fill(~has.unsqueeze(2), 0.0), dim=2)
    neighbours = torch.gather(scores.unsqueeze(1).expand(-1, m, -1), 2, near)
    smoothed = (weights * torch.where(valid, neighbours, 0.0)).sum(dim=2)
    smoothed = torch.where(has & mask, smoothed, scores)
    return scores + beta * (smoothed - scores)


def feature_scores(
    scores: torch.Tensor, features: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """``scores + standardized(features) @ weights``.

    Parameters
    ----------
    scores : torch.Tensor, shape (B, M)
    features : torch.Tensor, shape (B, M, F)
        Raw feature values (standardized per query here).
    mask : torch.Tensor, shape (B, M), bool
    weights : torch.Tensor, shape (F,)
    """
    if features.shape[-1] == 0:
        return scores
    return scores + standardized(features.to(scores.dtype), mask) @ weights.to(scores.dtype)


@dataclass(frozen=True)
class GraphSmoothingConfig:
    """Parameters
    ----------
    k : int
        Neighbours per candidate in the pool graph (discrete: chosen on training folds).
    beta : float
        Initial smoothing weight (0: the base scores).
    temperature : float
        Initial softmax temperature of the neighbour weights (learned).
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    k: int = 10
    beta: float = 0.0
    temperature: float = 0.1
    weights: str | None = None

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")


@register
class GraphSmoothing(LearnableReranker):
    """Score smoothing over the pool's k-NN graph; see :func:`smoothing_scores`."""

    name = "graph_smoothing"
    config_class = GraphSmoothingConfig

    def __init__(self, config: GraphSmoothingConfig | None = None) -> None:
        super().__init__(config or GraphSmoothingConfig())
        self.beta = Real(self.config.beta)
        self.temperature = Positive(self.config.temperature)
        self._load_if_given()

    def residual(self, scores: torch.Tensor, cands: torch.Tensor, mask: torch.Tensor):
        """The head over base ``scores`` (B, M) of candidates ``cands`` (B, M, D)."""
        beta, temperature = self.beta().to(scores.dtype), self.temperature().to(scores.dtype)
        return smoothing_scores(scores, cands, mask, beta, temperature, self.config.k)

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        return self.residual(batch.scores, batch.cands, batch.mask), batch.mask


@dataclass(frozen=True)
class FeatureHeadConfig:
    """Parameters
    ----------
    features : tuple of str
        Per-candidate features, each with a learned weight (0 at start).
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    features: tuple[str, ...] = ()
    weights: str | None = None


@register
class FeatureHead(LearnableReranker):
    """A listwise linear head over soft features; see :func:`feature_scores`."""

    name = "feature_head"
    config_class = FeatureHeadConfig

    def __init__(self, config: FeatureHeadConfig | None = None) -> None:
        super().__init__(config or FeatureHeadConfig())
        self.feature_weights = nn.Parameter(torch.zeros(len(self.config.features)))
        self._load_if_given()

    def residual(
        self,
        scores: torch.Tensor,
        mask: torch.Tensor,
        features: Mapping[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        """The head over base ``scores`` (B, M)."""
        stacked = require_features(features, self.config.features, self.name, mask.shape)
        return feature_scores(scores, stacked, mask, self.feature_weights)

    def score(
        self, batch: CandidateBatch, features: Mapping[str, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.residual(batch.scores, batch.mask, features), batch.mask
