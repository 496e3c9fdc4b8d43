"""LangChain: any georag reranker as a document compressor.

``GeoragCompressor`` is a :class:`langchain_core.documents.BaseDocumentCompressor`, the hook
LangChain's cross-encoder and Cohere rerankers use: put it in a
``ContextualCompressionRetriever`` or call :meth:`compress_documents` on retrieved
:class:`~langchain_core.documents.Document` objects. The kept documents come back best
first, each a copy with ``metadata["relevance_score"]``; documents that a filter stage
(Ricci-Filtration) drops are left out. Needs the ``langchain`` extra (``langchain-core``).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict

from georag.api import Reranker

__all__ = ["GeoragCompressor"]


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
