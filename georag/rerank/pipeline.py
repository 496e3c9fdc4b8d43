"""Compose stages: first stage -> filter(s) -> reranker -> top-k."""

from __future__ import annotations

from collections.abc import Sequence

from georag.batch import CandidateBatch, RerankResult
from georag.rerank.base import PoolReranker
from georag.rerank.pool import top_k_mask

__all__ = ["RerankPipeline"]


class RerankPipeline:
    """Run stages in turn, each on the candidates the previous one kept.

    A filter stage (such as Ricci-Filtration) narrows the mask; the next stage rescores
    the survivors only. The last stage's scores are the pipeline's.

    Parameters
    ----------
    stages : sequence of PoolReranker
    top_k : int, optional
        Keep only the best ``top_k`` at the end.
    """

    def __init__(self, stages: Sequence[PoolReranker], *, top_k: int | None = None) -> None:
        if not stages:
            raise ValueError("stages: a pipeline needs at least one stage")
        self.stages = list(stages)
        self.top_k = top_k
        self.name = "+".join(stage.name for stage in self.stages)

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        result = None
        for stage in self.stages:
            result = stage(batch)
            batch = batch.restrict(result.keep)
        keep = result.keep & batch.mask
        if self.top_k is not None:
            keep = top_k_mask(result.scores, keep, self.top_k)
        return RerankResult.from_scores(result.scores, keep)
