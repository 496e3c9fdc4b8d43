"""The method contract: the two protocols every registered method follows.

A :class:`PoolReranker` maps a :class:`~georag.batch.CandidateBatch` to a
:class:`~georag.batch.RerankResult`; a corpus-level :class:`Retriever` is fitted on a
:class:`~georag.batch.Corpus` and ranks its rows for a :class:`~georag.batch.QueryBatch`;
a :class:`PoolExpander` is a retriever that starts from a first-stage pool.
The data types themselves live in :mod:`georag.batch`, the bottom module. (The text API's
:class:`georag.Reranker` is another thing: it ranks strings with a whole pipeline.)
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from georag.batch import (
    CandidateBatch,
    Corpus,
    QueryBatch,
    RerankResult,
)

__all__ = ["CorpusRetriever", "IdentityReranker", "PoolExpander", "PoolReranker", "Retriever"]


@runtime_checkable
class PoolReranker(Protocol):
    """Anything that maps a :class:`CandidateBatch` to a :class:`RerankResult`.

    A reranker never mutates its input, holds no global state and is deterministic.
    """

    name: str

    def __call__(self, batch: CandidateBatch) -> RerankResult: ...


@runtime_checkable
class Retriever(Protocol):
    """A corpus-level method: indexes a :class:`Corpus`, then ranks its rows per query.

    Built as ``cls(config)`` like every reranker; :meth:`fit` indexes a corpus and returns
    the retriever; :meth:`retrieve` returns a :class:`RerankResult` over the rows named by
    :attr:`row_ids` (the corpus' passages, or the retriever's own chunks of them).
    """

    name: str

    def fit(self, corpus: Corpus) -> Retriever: ...

    @property
    def row_ids(self) -> list[str]: ...

    def retrieve(self, queries: QueryBatch, *, top_k: int) -> RerankResult: ...


@runtime_checkable
class PoolExpander(Retriever, Protocol):
    """A corpus-level stage that starts from a first-stage pool and may add corpus rows
    the pool lacks (adaptive reranking over a corpus graph).

    Fitted on a :class:`Corpus` like a :class:`Retriever`; :meth:`expand` takes the pool
    (a :class:`CandidateBatch` of the corpus' documents) and returns a
    :class:`RerankResult` over :attr:`row_ids`. The evaluation runner hands it the shared
    first-stage pool; :meth:`Retriever.retrieve` builds a pool of its own.
    """

    def expand(self, pool: CandidateBatch) -> RerankResult: ...


class CorpusRetriever:
    """Base of the built-in corpus-level retrievers: called on a candidate pool, it says
    so in one line, naming its own entry points and the pool variant of the method."""

    name: ClassVar[str]
    #: registry name of the method's pool reranker ("" for none)
    pool_variant: ClassVar[str] = ""

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        variant = f", or rerank a pool with {self.pool_variant!r}" if self.pool_variant else ""
        raise ValueError(
            f"{self.name}: ranks a whole corpus, not a candidate pool: "
            f"call fit(corpus) then retrieve(queries, top_k=...){variant}"
        )


class IdentityReranker:
    """Keeps the first-stage order: scores are the first-stage scores."""

    name = "none"
    config_class = None

    def __call__(self, batch: CandidateBatch) -> RerankResult:
        return RerankResult.from_scores(batch.scores.clone(), batch.mask.clone())
