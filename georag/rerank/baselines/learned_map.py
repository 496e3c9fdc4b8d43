"""The ablation "learned embedding map alone, no geometry".

Scores each candidate by ``cos(W q, W c) + fusion * first-stage score`` with the same
learned linear map ``W`` (identity at start) and fusion weight (0 at start) as the
learnable geometric rerankers, so that their gain can be told apart from the gain of
adapting the embeddings. Untrained it is the cosine of the first stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import CandidateBatch
from georag.models.knobs import EmbeddingMap, Real
from georag.rerank.learned import LearnableReranker
from georag.rerank.registry import register

__all__ = ["LearnedMapConfig", "LearnedMap"]


@dataclass(frozen=True)
class LearnedMapConfig:
    """Parameters
    ----------
    fusion : float
        Initial weight of the first-stage score.
    dim : int
        Embedding width D.
    weights : str, optional
        A file written by :meth:`LearnableReranker.save`; its config replaces this one.
    """

    fusion: float = 0.0
    dim: int = 384
    weights: str | None = None


@register
class LearnedMap(LearnableReranker):
    """Cosine under a learned linear map of the embeddings (no graph)."""

    name = "learned_map"
    config_class = LearnedMapConfig

    def __init__(self, config: LearnedMapConfig | None = None) -> None:
        super().__init__(config or LearnedMapConfig())
        self.fusion = Real(self.config.fusion)
        self.embed = EmbeddingMap(self.config.dim)
        self._load_if_given()

    def score(self, batch: CandidateBatch) -> tuple[torch.Tensor, torch.Tensor]:
        query, cands = self.embed(batch.query), self.embed(batch.cands)
        qnorm = query.norm(dim=1)
        if (qnorm == 0).any():
            raise ValueError("query holds zero vectors; cosine similarity is undefined")
        cos = torch.bmm(cands, query.unsqueeze(2)).squeeze(2) / (
            torch.where(batch.mask, cands.norm(dim=2), 1.0) * qnorm.unsqueeze(1)
        )
        return cos + self.fusion().to(cos.dtype) * batch.scores.to(cos.dtype), batch.mask
