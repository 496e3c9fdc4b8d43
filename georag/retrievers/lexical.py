"""The non-graph bars of the corpus-level retrievers: BM25 and the fusion of dense and BM25.

``bm25`` scores every corpus row by BM25 (bm25s, Lucene's variant, k1 = 1.2, b = 0.75) over
title and text; ``hybrid`` fuses it with the dense cosine over the whole corpus, by
reciprocal rank (``1 / (rrf_k + rank)`` summed, rrf_k = 60: Cormack, Clarke and Buettcher,
"Reciprocal Rank Fusion outperforms Condorcet and individual Rank Learning Methods") or
linearly (``alpha * minmax(dense) + (1 - alpha) * minmax(BM25)``, alpha = 0.5 fixed a
priori). Every graph retriever is measured against these.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from georag.batch import Corpus, QueryBatch
from georag.rerank.registry import register
from georag.retrieval.bm25 import BM25Index
from georag.retrievers.base import ScoredRetriever, _check_query, _row_ids

__all__ = [
    "BM25Retriever",
    "HybridConfig",
    "HybridRetriever",
    "corpus_bm25",
    "minmax",
    "rrf_scores",
]

FUSIONS = ("rrf", "linear")


def minmax(scores: torch.Tensor) -> torch.Tensor:
    """Each row of ``scores`` (B, N) mapped to [0, 1] by its minimum and maximum (a constant
    row maps to 0)."""
    low = scores.amin(dim=1, keepdim=True)
    span = (scores.amax(dim=1, keepdim=True) - low).clamp_min(torch.finfo(scores.dtype).tiny)
    return (scores - low) / span


def corpus_bm25(titles: list[str], texts: list[str]) -> BM25Index:
    """The BM25 index of passages given by their titles and texts (indexed together)."""
    return BM25Index.build([f"{t} {x}".strip() for t, x in zip(titles, texts)])


def rrf_scores(*scores: torch.Tensor, k: int = 60) -> torch.Tensor:
    """Reciprocal rank fusion of whole-corpus scores: ``sum 1 / (k + rank)``, rank from 1.

    Parameters
    ----------
    *scores : torch.Tensor, shape (B, N)
    k : int

    Returns
    -------
    torch.Tensor, shape (B, N)
    """
    fused = torch.zeros_like(scores[0])
    for s in scores:
        order = s.argsort(dim=1, descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(
            1, order, torch.arange(1, s.shape[1] + 1).expand_as(order)
        )
        fused += 1.0 / (k + rank.to(fused.dtype))
    return fused


class _LexicalRetriever(ScoredRetriever):
    """A retriever holding the corpus' BM25 index (and its embeddings)."""

    def fit(self, corpus: Corpus):
        """Index ``corpus``: BM25 over title and text, and its embeddings."""
        self.embeddings = corpus.embeddings
        self.doc_ids = _row_ids(corpus.doc_ids, len(corpus.doc_ids))
        self.bm25 = corpus_bm25(corpus.titles, corpus.texts)
        return self


@register
class BM25Retriever(_LexicalRetriever):
    """BM25 over the whole corpus (title and text)."""

    name = "bm25"

    def scores(self, queries: QueryBatch) -> torch.Tensor:
        """BM25 score of every corpus row, shape (B, N)."""
        return self.bm25.scores(list(queries.texts))


@dataclass(frozen=True)
class HybridConfig:
    """Dense + BM25 fusion over the whole corpus.

    Attributes
    ----------
    fusion : {"rrf", "linear"}
    alpha : float
        ``linear``: the weight of the dense score.
    rrf_k : int
        ``rrf``: the rank offset.
    """

    fusion: str = "rrf"
    alpha: float = 0.5
    rrf_k: int = 60

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        if not 0.0 <= self.alpha <= 1.0 or self.rrf_k < 0:
            raise ValueError(f"need alpha in [0, 1] and rrf_k >= 0, got {self.alpha}, {self.rrf_k}")


@register
class HybridRetriever(_LexicalRetriever):
    """Dense cosine and BM25 fused over the whole corpus (module docstring)."""

    name = "hybrid"
    config_class = HybridConfig

    def scores(self, queries: QueryBatch) -> torch.Tensor:
        """The fused score of every corpus row, shape (B, N)."""
        _check_query(queries.embeddings, self.embeddings)
        dense = queries.embeddings.to(self.embeddings.dtype) @ self.embeddings.T
        lexical = self.bm25.scores(list(queries.texts)).to(dense.dtype)
        cfg = self.config
        if cfg.fusion == "rrf":
            return rrf_scores(dense, lexical, k=cfg.rrf_k)
        return cfg.alpha * minmax(dense) + (1 - cfg.alpha) * minmax(lexical)
