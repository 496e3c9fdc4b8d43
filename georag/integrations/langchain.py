"""LangChain: any georag reranker as a document compressor, a georag index as a retriever.

``GeoragCompressor`` is a :class:`langchain_core.documents.BaseDocumentCompressor`, the hook
LangChain's cross-encoder and Cohere rerankers use: put it in a
``ContextualCompressionRetriever`` or call :meth:`compress_documents` on retrieved
:class:`~langchain_core.documents.Document` objects. The kept documents come back best
first, each a copy with ``metadata["relevance_score"]``; documents that a filter stage
(Ricci-Filtration) drops are left out. ``GeoragRetriever`` is a
:class:`langchain_core.retrievers.BaseRetriever` over a :class:`georag.Retriever` (an index
and a corpus method): ``invoke(query)`` answers its top ``k`` as documents with
``metadata`` ``id``, ``title`` and ``score``; ``batch`` goes through one batched call.
Needs the ``langchain`` extra (``langchain-core``).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from georag.api import Reranker
from georag.retrievers.retriever import RetrievedDoc, Retriever

__all__ = ["GeoragCompressor", "GeoragRetriever"]


class GeoragCompressor(BaseDocumentCompressor):
    """Rerank LangChain documents with a :class:`georag.Reranker`.

    Parameters
    ----------
    reranker : georag.Reranker
        E.g. ``Reranker("maniscope")`` or ``Reranker("ricci+bi")``.
    top_n : int, optional
        Return at most this many documents.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: Reranker
    top_n: int | None = None

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The kept ``documents`` for ``query``, best first (see the module doc)."""
        if not documents:
            return []
        docs = [{"id": str(i), "text": d.page_content} for i, d in enumerate(documents)]
        ranked = self.reranker.rank(query, docs, top_k=self.top_n)
        return [
            documents[r.index].model_copy(
                update={"metadata": {**documents[r.index].metadata, "relevance_score": r.score}}
            )
            for r in ranked
            if r.kept
        ]


def _document(doc: RetrievedDoc) -> Document:
    return Document(
        page_content=doc.text, metadata={"id": doc.id, "title": doc.title, "score": doc.score}
    )


class GeoragRetriever(BaseRetriever):
    """A georag index as a LangChain retriever.

    Parameters
    ----------
    retriever : georag.Retriever
        E.g. ``Retriever("runs/index", method="hipporag2")``.
    k : int
        Documents per query.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Retriever
    k: int = 10

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [_document(d) for d in self.retriever.retrieve(query, k=self.k)]

    def batch(self, inputs, config=None, **kwargs) -> list[list[Document]]:
        """Every query of ``inputs`` (strings) in one batched retrieval."""
        if not all(isinstance(q, str) for q in inputs):
            return super().batch(inputs, config, **kwargs)
        found = self.retriever.retrieve_batch(list(inputs), k=self.k)
        return [[_document(d) for d in row] for row in found]
