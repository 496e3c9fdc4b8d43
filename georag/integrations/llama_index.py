"""LlamaIndex: any georag reranker as a node postprocessor, a georag index as a retriever.

``GeoragNodePostprocessor`` is a
:class:`llama_index.core.postprocessor.types.BaseNodePostprocessor`, the hook LlamaIndex's
``SentenceTransformerRerank`` uses: pass it in ``node_postprocessors`` of a query engine or
call :meth:`postprocess_nodes`. The kept nodes come back best first as new
:class:`~llama_index.core.schema.NodeWithScore` objects whose ``score`` is the georag score;
nodes that a filter stage (Ricci-Filtration) drops are left out. The first-stage order the
geometry starts from is the cosine under the reranker's encoder, not the retriever's score.
``GeoragLlamaRetriever`` is a :class:`llama_index.core.retrievers.BaseRetriever` over a
:class:`georag.Retriever`: ``retrieve(query)`` answers its top ``k`` as
:class:`~llama_index.core.schema.NodeWithScore` of :class:`~llama_index.core.schema.TextNode`
(``id_`` the document id, ``metadata["title"]``). Needs the ``llama-index`` extra
(``llama-index-core``).
"""

from __future__ import annotations

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from pydantic import ConfigDict

from georag.api import Reranker
from georag.retrievers.retriever import Retriever

__all__ = ["GeoragLlamaRetriever", "GeoragNodePostprocessor"]


class GeoragNodePostprocessor(BaseNodePostprocessor):
    """Rerank LlamaIndex nodes with a :class:`georag.Reranker`.

    Parameters
    ----------
    reranker : georag.Reranker
    top_n : int, optional
        Return at most this many nodes.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: Reranker
    top_n: int | None = None

    @classmethod
    def class_name(cls) -> str:
        return "GeoragNodePostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("query_bundle: the georag postprocessor needs the query")
        if not nodes:
            return []
        docs = [
            {"id": str(i), "text": n.node.get_content(metadata_mode=MetadataMode.EMBED)}
            for i, n in enumerate(nodes)
        ]
        ranked = self.reranker.rank(query_bundle.query_str, docs, top_k=self.top_n)
        return [NodeWithScore(node=nodes[r.index].node, score=r.score) for r in ranked if r.kept]


class GeoragLlamaRetriever(BaseRetriever):
    """A georag index as a LlamaIndex retriever.

    Parameters
    ----------
    retriever : georag.Retriever
    k : int
        Nodes per query.
    """

    def __init__(self, retriever: Retriever, k: int = 10, **kwargs) -> None:
        super().__init__(**kwargs)
        self.retriever, self.k = retriever, k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(
                node=TextNode(id_=d.id, text=d.text, metadata={"title": d.title}), score=d.score
            )
            for d in self.retriever.retrieve(query_bundle.query_str, k=self.k)
        ]
