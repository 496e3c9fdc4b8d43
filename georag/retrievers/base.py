"""What the corpus-level retrievers over passage embeddings share (ISO-RAG, whole-graph
PPR, dense): checks of the query and corpus, the top-k over corpus rows, and their output
as a :class:`~georag.batch.RerankResult` or a run."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import Corpus, QueryBatch, RerankResult, scores_to_run
from georag.rerank.base import CorpusRetriever
from georag.rerank.pool import top_k_mask
from georag.retrieval.passage_graph import PassageGraph, corpus_graph

__all__ = ["CorpusRows", "EmbeddingRetriever", "IsoRagOutput", "ScoredRetriever", "output_to_run"]


@dataclass(frozen=True)
class IsoRagOutput:
    """Ranked passages and what the local graphs looked like.

    Attributes
    ----------
    scores : torch.Tensor, shape (B, K)
        Final scores, best first (``-inf`` past a short local graph).
    indices : torch.Tensor, shape (B, K), long
        Corpus rows (``-1`` where ``scores`` is ``-inf``).
    edges : torch.Tensor, shape (B,), long
        Undirected edges of each local graph before pruning (0 for the baselines).
    removed : torch.Tensor, shape (B,), long
        Undirected edges pruning removed.
    nodes : torch.Tensor, shape (B,), long
        Nodes of each local graph (N for a whole-graph method).
    """

    scores: torch.Tensor
    indices: torch.Tensor
    edges: torch.Tensor
    removed: torch.Tensor
    nodes: torch.Tensor


def _check_query(query: torch.Tensor, embeddings: torch.Tensor) -> None:
    if query.dim() != 2 or query.shape[1] != embeddings.shape[1] or query.shape[0] == 0:
        raise ValueError(
            f"query must have shape (B, {embeddings.shape[1]}) with B > 0, got {tuple(query.shape)}"
        )
    if not torch.isfinite(query).all():
        raise ValueError("query holds NaN or inf")


def _check_corpus(embeddings: torch.Tensor, graph: PassageGraph) -> None:
    if embeddings.dim() != 2 or embeddings.shape[0] != graph.num_nodes:
        raise ValueError(
            f"embeddings must have shape ({graph.num_nodes}, D), got {tuple(embeddings.shape)}"
        )
    if not torch.isfinite(embeddings).all():
        raise ValueError("embeddings hold NaN or inf")


def _sources(similarity: torch.Tensor, num_sources: int) -> torch.Tensor:
    n = similarity.shape[1]
    if num_sources > n:
        raise ValueError(f"num_sources ({num_sources}) is larger than the corpus ({n} passages)")
    return similarity.topk(num_sources, dim=1).indices


def _topk(scores: torch.Tensor, rows: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    k = min(k, scores.shape[1])
    best, at = scores.topk(k, dim=1)
    return best, torch.where(best > -torch.inf, rows.gather(1, at), -1)


def _as_result(output: IsoRagOutput, num_rows: int) -> RerankResult:
    """Scatter the top-k of ``output`` into scores over all ``num_rows`` corpus rows."""
    b = output.indices.shape[0]
    scores = torch.full(
        (b, num_rows), -torch.inf, dtype=output.scores.dtype, device=output.scores.device
    )
    valid = output.indices >= 0
    scores.scatter_(1, output.indices.clamp_min(0), output.scores.masked_fill(~valid, -torch.inf))
    return RerankResult(scores=scores, keep=scores > -torch.inf)


class CorpusRows:
    """The corpus rows of a fitted retriever (``doc_ids``, set by its ``fit``)."""

    name: str
    doc_ids: list[str]

    @property
    def row_ids(self) -> list[str]:
        """The document id of each corpus row."""
        self._check_fitted()
        return self.doc_ids

    def _check_fitted(self) -> None:
        if not hasattr(self, "doc_ids"):
            raise ValueError(f"{self.name}: call fit(corpus) before retrieving")


class EmbeddingRetriever(CorpusRows, CorpusRetriever):
    """What the corpus-level retrievers over passage embeddings share: the config, the
    corpus rows and the Retriever contract."""

    name: str
    config_class: type | None = None  # the config dataclass; None: the method takes none
    embeddings: torch.Tensor

    def __init__(self, config=None) -> None:
        if self.config_class is None:
            if config is not None:
                raise ValueError(f"{self.name}: takes no config, got {config!r}")
        elif config is None:
            config = self.config_class()
        self.config = config

    def fit(self, corpus: Corpus):
        """Index ``corpus`` (its passage graph is built or loaded from the cache)."""
        self.fit_graph(corpus.embeddings, corpus_graph(corpus), doc_ids=corpus.doc_ids)
        return self

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult:
        """Scores over the corpus rows; the ``top_k`` best of each query are kept."""
        return _as_result(self.search(queries.embeddings, top_k=top_k), len(self.row_ids))


class ScoredRetriever(EmbeddingRetriever):
    """A retriever that scores every corpus row (:meth:`scores`, shape (B, N));
    :meth:`retrieve` keeps each query's ``top_k`` best finite scores."""

    def scores(self, queries: QueryBatch) -> torch.Tensor:
        """The score of every corpus row for each query, shape (B, N) (``-inf``: unranked)."""
        raise NotImplementedError

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult:
        """Scores over the corpus rows; the ``top_k`` best of each query are kept."""
        self._check_fitted()
        scores = self.scores(queries)
        keep = top_k_mask(scores, scores > -torch.inf, top_k)
        return RerankResult.from_scores(scores, keep)


def _row_ids(doc_ids: list[str] | None, n: int) -> list[str]:
    if doc_ids is None:
        return [str(i) for i in range(n)]
    if len(doc_ids) != n:
        raise ValueError(f"doc_ids has {len(doc_ids)} ids for {n} passages")
    return list(doc_ids)


def output_to_run(
    output: IsoRagOutput, query_ids: list[str], doc_ids: list[str]
) -> dict[str, dict[str, float]]:
    """``{query id: {doc id: score}}`` for :func:`georag.eval.metrics.evaluate`, by the one
    rule of :func:`~georag.batch.scores_to_run`."""
    result = _as_result(output, len(doc_ids))
    return scores_to_run(result.scores, result.keep, query_ids, doc_ids)
