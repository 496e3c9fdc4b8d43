"""LangChain, LlamaIndex and PyTerrier adapters, with each framework's own objects, on real
scifact abstracts: the ranking equals georag.Reranker's."""

from __future__ import annotations

import pytest

import georag


@pytest.fixture(scope="module")
def case(data_dir):
    """Two real claims, each with its cited abstract and nine more scifact abstracts."""
    from georag.data.beir import load_beir

    data = load_beir("scifact", data_dir=data_dir, download=False)
    qids = list(data.qrels)[:2]
    pool = list(data.corpus)[:12]
    cases = []
    for qid in qids:
        ids = list(data.qrels[qid])[:1] + [d for d in pool if d not in data.qrels[qid]][:9]
        cases.append((data.queries[qid], [(d, data.corpus[d].full_text) for d in ids]))
    return cases


@pytest.fixture(scope="module")
def encoder(text_encoder):
    return text_encoder  # the test run's one encoder (tests/conftest.py)


@pytest.fixture(scope="module", params=["maniscope", pytest.param("ricci", marks=pytest.mark.slow)])
def reranker(request, encoder, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "adapter-cache"  # shared: each text encoded once
    return georag.Reranker(request.param, encoder=encoder, cache_dir=cache)


def _expected(reranker, query, docs):
    ranked = reranker.rank(query, [{"id": d, "text": t} for d, t in docs])
    return [r.id for r in ranked if r.kept], [r.score for r in ranked if r.kept]


@pytest.mark.data
def test_langchain_document_compressor(reranker, case):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from georag.integrations.langchain import GeoragCompressor

    query, docs = case[0]
    documents = [Document(page_content=t, metadata={"doc_id": d}) for d, t in docs]
    out = GeoragCompressor(reranker=reranker).compress_documents(documents, query)
    ids, scores = _expected(reranker, query, docs)
    assert [d.metadata["doc_id"] for d in out] == ids
    assert [d.metadata["relevance_score"] for d in out] == pytest.approx(scores)
    assert all(isinstance(d, Document) for d in out)
    assert "relevance_score" not in documents[0].metadata  # the inputs are not mutated
    top = GeoragCompressor(reranker=reranker, top_n=3).compress_documents(documents, query)
    assert [d.metadata["doc_id"] for d in top] == ids[:3]


@pytest.mark.data
def test_llama_index_node_postprocessor(reranker, case):
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from georag.integrations.llama_index import GeoragNodePostprocessor

    query, docs = case[0]
    nodes = [NodeWithScore(node=TextNode(text=t, id_=d), score=1.0) for d, t in docs]
    post = GeoragNodePostprocessor(reranker=reranker)
    out = post.postprocess_nodes(nodes, query_bundle=QueryBundle(query))
    ids, scores = _expected(reranker, query, docs)
    assert [n.node.node_id for n in out] == ids
    assert [n.score for n in out] == pytest.approx(scores)
    assert [n.node.node_id for n in post.postprocess_nodes(nodes, query_str=query)] == ids
    with pytest.raises(ValueError, match="query_bundle"):
        post.postprocess_nodes(nodes)


@pytest.mark.data
def test_pyterrier_transformer(reranker, case):
    pd = pytest.importorskip("pandas")
    pt = pytest.importorskip("pyterrier")

    from georag.integrations.pyterrier import GeoragTransformer

    frame = pd.DataFrame(
        [
            {"qid": f"q{i}", "query": query, "docno": d, "text": t, "score": 0.0, "rank": r}
            for i, (query, docs) in enumerate(case)
            for r, (d, t) in enumerate(docs)
        ]
    )
    pipeline = pt.Transformer.from_df(frame) >> GeoragTransformer(reranker)
    out = pipeline(pd.DataFrame({"qid": ["q0", "q1"], "query": [q for q, _ in case]}))
    for i, (query, docs) in enumerate(case):
        got = out[out["qid"] == f"q{i}"]
        ids, scores = _expected(reranker, query, docs)
        assert list(got["docno"]) == ids and list(got["rank"]) == list(range(len(ids)))
        assert list(got["score"]) == pytest.approx(scores)
    with pytest.raises(ValueError, match="inp: the frame lacks"):
        GeoragTransformer(reranker)(frame.drop(columns=["text"]))
