"""End-to-end retrieval: first stage -> filter(s) -> reranker -> top-k, as one call."""

from __future__ import annotations

from georag.batch import CandidateBatch, RerankResult
from georag.eval.metrics import Run
from georag.rerank.base import PoolReranker
from georag.rerank.pipeline import RerankPipeline
from georag.retrieval.candidates import FirstStage

__all__ = ["RetrievalPipeline"]


class RetrievalPipeline:
    """Retrieve candidates with ``first_stage``, then run ``stages`` in turn and keep ``top_k``.

    Parameters
    ----------
    first_stage : FirstStage
        An indexed corpus.
    stages : list of PoolReranker
        Filters and rerankers, applied in order (each sees only what the previous kept).
    top_k : int, optional
        Final cut-off.
    """

    def __init__(
        self, first_stage: FirstStage, stages: list[PoolReranker], *, top_k: int | None = None
    ) -> None:
        self.first_stage = first_stage
        self.reranker = RerankPipeline(stages, top_k=top_k)

    def search(
        self, query_ids: list[str], query_texts: list[str]
    ) -> tuple[CandidateBatch, RerankResult]:
        """The candidate batch and the final result for a batch of queries."""
        batch = self.first_stage.retrieve(query_ids, query_texts, with_texts=True)
        return batch, self.reranker(batch)

    def run(self, query_ids: list[str], query_texts: list[str]) -> Run:
        """A TREC-style run ``{query_id: {doc_id: score}}`` of the kept candidates."""
        batch, result = self.search(query_ids, query_texts)
        return result.to_run(batch)
