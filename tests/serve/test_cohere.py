"""Cohere's own SDK against ``georag serve``: ``cohere.ClientV2.rerank`` (``POST /v2/rerank``)
and ``cohere.Client.rerank`` (``POST /v1/rerank``) over loopback, each ranking equal to the
in-process ``georag.Reranker``; the v2 body's limits and its one-line refusals."""

from __future__ import annotations

import json

import httpx
import pytest

from georag.serve.service import truncate_tokens
from tests.serve.harness import demo_texts, thread_server

cohere = pytest.importorskip("cohere")

LIMITS = dict(max_docs=20, max_text_chars=3000)


@pytest.fixture(scope="module")
def texts():
    return demo_texts()


@pytest.fixture(scope="module")
def server(serve_reranker):
    reranker = serve_reranker("maniscope")
    with thread_server(reranker, max_batch=8, max_wait_ms=2, **LIMITS) as url:
        yield url, reranker


def test_the_v2_client_gets_the_in_process_ranking(server, texts):
    url, reranker = server
    queries, docs = texts
    client = cohere.ClientV2(base_url=url, api_key="unused", timeout=60)
    for query, top_n in ((queries[0], 5), (queries[4], None)):
        got = client.rerank(model="maniscope", query=query, documents=docs[:12], top_n=top_n)
        want = [d for d in reranker.rank(query, docs[:12]) if d.kept][:top_n]
        assert [r.index for r in got.results] == [d.index for d in want]
        assert [r.relevance_score for r in got.results] == pytest.approx(
            [d.score for d in want], abs=1e-6
        )
        assert got.id and got.meta.api_version.version == "2"


def test_the_v1_client_gets_the_in_process_ranking(server, texts):
    url, reranker = server
    queries, docs = texts
    client = cohere.Client(base_url=url, api_key="unused", timeout=60)
    got = client.rerank(
        model="maniscope", query=queries[2], documents=docs[:10], top_n=4, return_documents=True
    )
    want = [d for d in reranker.rank(queries[2], docs[:10]) if d.kept][:4]
    assert [r.index for r in got.results] == [d.index for d in want]
    assert [r.document.text for r in got.results] == [d.text for d in want]


def test_max_tokens_per_doc_cuts_each_document(server, texts):
    url, reranker = server
    queries, docs = texts
    tokenizer = reranker.encoder.model.tokenizer
    cut = truncate_tokens(tokenizer, docs[:8], 12)
    assert all(len(tokenizer.tokenize(c)) == 12 for c in cut)
    assert all(d.startswith(c) and len(c) < len(d) for c, d in zip(cut, docs[:8]))
    assert truncate_tokens(tokenizer, ["two words"], 12) == ["two words"]
    body = {"model": "m", "query": queries[3], "documents": docs[:8], "max_tokens_per_doc": 12}
    got = httpx.post(f"{url}/v2/rerank", json=body, timeout=60).json()
    want = [d for d in reranker.rank(queries[3], cut) if d.kept]
    assert [r["index"] for r in got["results"]] == [d.index for d in want]


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"query": "q", "documents": ["a"]}, 422, "model: missing"),
        ({"model": "m", "documents": ["a"]}, 422, "query: missing"),
        ({"model": "m", "query": "q"}, 422, "documents: missing"),
        ({"model": 3, "query": "q", "documents": ["a"]}, 422, "model: expected a string"),
        ({"model": "m", "query": "q", "documents": [{"text": "a"}]}, 422, "documents[0]"),
        ({"model": "m", "query": "q", "documents": "a"}, 422, "documents: expected a list"),
        ({"model": "m", "query": "q", "documents": ["a"], "top_n": "2"}, 422, "top_n"),
        ({"model": "m", "query": "q", "documents": ["a"], "max_tokens_per_doc": 0}, 422, "max_"),
        ({"model": "m", "query": "q", "documents": ["a"], "priority": -1}, 422, "priority"),
        (
            {"model": "m", "query": "q", "documents": ["a"], "relevant_spans": {"mode": "enabled"}},
            422,
            "relevant_spans: georag returns no spans",
        ),
        ({"model": "m", "query": "q", "documents": ["a"] * 21}, 413, "documents: 21 documents"),
        (
            {"model": "m", "query": "q", "documents": ["a" * 3001]},
            413,
            "documents[0]: 3001 characters",
        ),
    ],
)
def test_bad_v2_bodies_get_one_line_and_the_server_answers_after(
    server, texts, body, status, message
):
    url, reranker = server
    response = httpx.post(f"{url}/v2/rerank", content=json.dumps(body), timeout=60)
    assert response.status_code == status
    error = response.json()["error"]
    assert error.startswith(message.split(" ")[0]) and message in error and "\n" not in error
    queries, docs = texts
    good = {"model": "m", "query": queries[1], "documents": docs[:5]}
    answer = httpx.post(f"{url}/v2/rerank", json=good, timeout=60).json()
    assert [r["index"] for r in answer["results"]] == [
        d.index for d in reranker.rank(queries[1], docs[:5]) if d.kept
    ]


def test_the_sdk_raises_the_refusal(server):
    url, _ = server
    client = cohere.ClientV2(base_url=url, api_key="unused", timeout=60)
    with pytest.raises(cohere.core.ApiError) as refused:
        client.rerank(model="m", query="q", documents=["a"] * 21)
    assert refused.value.status_code == 413
    assert "21 documents" in refused.value.body["error"]
