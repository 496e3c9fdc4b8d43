"""The georag.Retriever adapters, with each framework's own objects: LangChain's
BaseRetriever, LlamaIndex's BaseRetriever and a PyTerrier transformer answer what
georag.Retriever answers."""

from __future__ import annotations

import pytest

import georag

QUERIES = ["why do tides rise and fall", "how does the sun make energy"]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, embedding_cache_dir):
    from georag.data.beir import load_beir
    from georag.data.bundled import DEMO_DIR
    from georag.retrievers.index import documents_from_dataset

    docs = documents_from_dataset(load_beir(str(DEMO_DIR)))[::4]
    root = tmp_path_factory.mktemp("adapter-index") / "index"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
        georag.build_index(docs, root)
    return georag.Retriever(root, "hybrid")


def _want(retriever, k=3):
    return [[(d.id, d.score) for d in row] for row in retriever.retrieve_batch(QUERIES, k=k)]


def test_langchain_retriever(retriever):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from georag.integrations.langchain import GeoragRetriever

    adapter = GeoragRetriever(retriever=retriever, k=3)
    assert isinstance(adapter, BaseRetriever)
    got = [adapter.invoke(q) for q in QUERIES]
    assert all(isinstance(d, Document) for row in got for d in row)
    pairs = [[(d.metadata["id"], d.metadata["score"]) for d in row] for row in got]
    assert pairs == _want(retriever)
    batched = adapter.batch(QUERIES)
    assert [[d.metadata["id"] for d in row] for row in batched] == [
        [i for i, _ in row] for row in _want(retriever)
    ]
    assert got[0][0].page_content and "title" in got[0][0].metadata


def test_llama_index_retriever(retriever):
    pytest.importorskip("llama_index.core")
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore

    from georag.integrations.llama_index import GeoragLlamaRetriever

    adapter = GeoragLlamaRetriever(retriever, k=3)
    assert isinstance(adapter, BaseRetriever)
    got = [adapter.retrieve(q) for q in QUERIES]
    assert all(isinstance(n, NodeWithScore) for row in got for n in row)
    assert [[(n.node.node_id, n.score) for n in row] for row in got] == _want(retriever)
    assert got[0][0].node.get_content() and "title" in got[0][0].node.metadata


def test_pyterrier_retrieve(retriever):
    pytest.importorskip("pyterrier")
    import pandas as pd
    import pyterrier as pt

    from georag.integrations.pyterrier import GeoragRetrieve

    adapter = GeoragRetrieve(retriever, k=3)
    assert isinstance(adapter, pt.Transformer)
    out = adapter(pd.DataFrame({"qid": ["q1", "q2"], "query": QUERIES}))
    assert list(out.columns) == ["qid", "query", "docno", "title", "text", "score", "rank"]
    want = _want(retriever)
    for qid, row in zip(["q1", "q2"], want):
        part = out[out["qid"] == qid]
        assert list(zip(part["docno"], part["score"])) == row
        assert part["rank"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="lacks column"):
        adapter(pd.DataFrame({"qid": ["q1"]}))
