"""Exact dense retrieval over the corpus rows (cosine to the query): the plain baseline of
the corpus-level retrievers."""

from __future__ import annotations

import torch

from georag.batch import Corpus
from georag.rerank.registry import register
from georag.retrievers.base import (
    EmbeddingRetriever,
    IsoRagOutput,
    _check_query,
    _row_ids,
    _topk,
)

__all__ = ["DenseRetriever"]


@register
class DenseRetriever(EmbeddingRetriever):
    """Dense baseline: the top-k passages by cosine (no graph)."""

    name = "dense"

    def fit(self, corpus: Corpus) -> DenseRetriever:
        """Index ``corpus`` by its embeddings."""
        return self.fit_embeddings(corpus.embeddings, doc_ids=corpus.doc_ids)

    def fit_embeddings(
        self, embeddings: torch.Tensor, *, doc_ids: list[str] | None = None
    ) -> DenseRetriever:
        """Index unit-norm embeddings (N, D)."""
        if embeddings.dim() != 2 or not torch.isfinite(embeddings).all():
            raise ValueError(f"embeddings must be finite (N, D), got {tuple(embeddings.shape)}")
        self.embeddings = embeddings
        self.doc_ids = _row_ids(doc_ids, embeddings.shape[0])
        return self

    def search(self, query: torch.Tensor, *, top_k: int = 10) -> IsoRagOutput:
        """Rank passages for each query by cosine."""
        self._check_fitted()
        _check_query(query, self.embeddings)
        similarity = query.to(self.embeddings.dtype) @ self.embeddings.T
        rows = torch.arange(similarity.shape[1]).expand_as(similarity)
        best, indices = _topk(similarity, rows, top_k)
        b = query.shape[0]
        zero = torch.zeros(b, dtype=torch.long)
        return IsoRagOutput(best, indices, zero, zero, torch.full((b,), similarity.shape[1]))
