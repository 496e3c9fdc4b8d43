"""Pseudo-relevance feedback in the embedding space: Rocchio's query update.

Rocchio, "Relevance feedback in information retrieval" (The SMART Retrieval System,
1971): the query moves towards the documents it ranks first,
``q' = q / |q| + alpha * mean of the unit vectors of the top-k candidates``, and every
candidate is rescored by ``cos(q', c)``. Applied to a batch whose embeddings are under a
learned map, it is pseudo-relevance feedback in the mapped space. ``alpha = 0`` is the
plain cosine.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.baselines.adapter import mapped_cosine
from georag.rerank.registry import register

__all__ = ["RocchioConfig", "Rocchio", "rocchio_scores"]


def rocchio_scores(
    query: torch.Tensor,
    cands: torch.Tensor,
    mask: torch.Tensor,
    scores: torch.Tensor,
    alpha: float | torch.Tensor,
    k: int,
) -> torch.Tensor:
    """Cosine with the Rocchio-updated query.

    Parameters
    ----------
    query : torch.Tensor, shape (B, D)
    cands : torch.Tensor, shape (B, M, D)
    mask : torch.Tensor, shape (B, M), bool
    scores : torch.Tensor, shape (B, M)
        The ranking that picks the feedback documents (its top ``k`` real candidates).
    alpha : float or 0-d tensor
        Weight of the feedback centroid.
    k : int
        Feedback documents, ``k >= 1`` (fewer when a query has fewer candidates).

    Returns
    -------
    torch.Tensor, shape (B, M)
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = min(k, scores.shape[1])
    top = scores.masked_fill(~mask, -torch.inf).topk(k, dim=1).indices
    unit = cands / torch.where(mask, cands.norm(dim=2), 1.0).unsqueeze(2)
    chosen = torch.gather(mask, 1, top).to(unit.dtype).unsqueeze(2)
    feedback = torch.gather(unit, 1, top.unsqueeze(2).expand(-1, -1, unit.shape[2]))
    centroid = (feedback * chosen).sum(1) / chosen.sum(1).clamp_min(1)
    moved = query / query.norm(dim=1, keepdim=True) + alpha * centroid
    return mapped_cosine(moved, cands, mask)


@dataclass(frozen=True)
class RocchioConfig:
    """Parameters
    ----------
    alpha : float
        Weight of the feedback centroid (0: the plain cosine).
    k : int
        Feedback documents: the top ``k`` by the batch's first-stage scores.
    """

    alpha: float = 0.5
    k: int = 5

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if not self.alpha >= 0:
            raise ValueError(f"alpha must be non-negative, got {self.alpha}")


@register
class Rocchio:
    """Rocchio feedback over the pool; every candidate is kept."""

    name = "rocchio"
    config_class = RocchioConfig

    def __init__(self, config: RocchioConfig | None = None) -> None:
        self.config = config or RocchioConfig()

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        cfg = self.config
        scores = rocchio_scores(
            batch.query, batch.cands, batch.mask, batch.scores, cfg.alpha, cfg.k
        )
        return RerankResult.from_scores(scores, batch.mask)
