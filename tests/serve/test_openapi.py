"""``/openapi.json`` documents every route, and schemathesis fuzzes every route from it.

The fuzz sends bodies that follow the schema and bodies that break it (its positive and
negative modes) to a real server over loopback: no answer may be a 5xx, every refusal is
a one-line JSON error, every answer matches its schema, and the server is healthy and
answers as the in-process model afterwards. The default run is bounded to a few
examples per operation; ``-m slow`` runs many more.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.serve.harness import demo_texts, thread_server

RERANK = {("/rerank", "post"), ("/v1/rerank", "post"), ("/v2/rerank", "post")}
CORPUS = {("/retrieve", "post"), ("/documents", "post"), ("/documents", "delete")}
ALWAYS = {("/health", "get"), ("/metrics", "get")}
LIMITS = dict(max_docs=6, max_text_chars=300, max_body_bytes=4096, max_top_k=8)


def _operations(document: dict) -> set[tuple[str, str]]:
    return {(path, verb) for path, item in document["paths"].items() for verb in item}


def _fuzz(url: str, examples: int) -> int:
    """Fuzz every operation of the server at ``url``; the number of requests sent."""
    document = httpx.get(f"{url}/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    checks = [not_a_server_error, status_code_conformance, response_schema_conformance]
    sent = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        modes = [schemathesis.GenerationMode.POSITIVE]
        if "requestBody" in document["paths"][operation.path][operation.method.lower()]:
            modes.append(schemathesis.GenerationMode.NEGATIVE)  # nothing to break otherwise
        for mode in modes:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def call(case):
                nonlocal sent
                sent += 1
                response = case.call_and_validate(base_url=url, checks=checks, timeout=60)
                if response.status_code >= 400:  # headers: lists of values
                    assert response.headers["content-type"] == ["application/json"]
                    error = response.json()["error"]
                    assert error and "\n" not in error

            call()
    return sent


@pytest.fixture(scope="module")
def texts():
    return demo_texts()


def _rerank_server(serve_reranker):
    return thread_server(serve_reranker("maniscope"), max_batch=4, max_wait_ms=1, **LIMITS)


def _corpus_server(retriever):
    return thread_server(retriever, index=str(retriever.index_dir), max_batch=4, **LIMITS)


def test_every_route_is_in_the_schema_with_its_bodies(serve_reranker, corpus_retriever):
    with _rerank_server(serve_reranker) as url:
        rerank = httpx.get(f"{url}/openapi.json").json()
    with _corpus_server(corpus_retriever()) as url:
        corpus = httpx.get(f"{url}/openapi.json").json()
    assert _operations(rerank) == RERANK | ALWAYS
    assert _operations(corpus) == CORPUS | ALWAYS
    for document, posted in ((rerank, RERANK), (corpus, CORPUS)):
        assert document["openapi"] == "3.1.0"
        schemas = document["components"]["schemas"]
        for path, verb in posted:
            operation = document["paths"][path][verb]
            body = operation["requestBody"]["content"]["application/json"]["schema"]
            assert body["$ref"].rsplit("/", 1)[1] in schemas
            assert {"200", "400", "413", "422"} <= set(operation["responses"])
    retrieve = corpus["components"]["schemas"]["RetrieveRequest"]["properties"]
    assert retrieve["query"]["maxLength"] == LIMITS["max_text_chars"]
    assert retrieve["top_k"]["anyOf"][0]["maximum"] == LIMITS["max_top_k"]
    assert corpus["paths"]["/documents"]["delete"]["responses"]["409"]
    assert corpus["paths"]["/documents"]["post"]["responses"]["409"]


def test_the_routes_are_secured_in_the_schema_when_a_key_is_set(corpus_retriever, tmp_path):
    key = tmp_path / "key"
    key.write_text("k")
    retriever = corpus_retriever()
    with thread_server(retriever, index="x", api_key_file=str(key)) as url:
        document = httpx.get(f"{url}/openapi.json").json()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    secured = {(p, v) for p, v in _operations(document) if document["paths"][p][v].get("security")}
    assert secured == CORPUS | {("/metrics", "get")}


def _healthy_rerank(url, reranker, texts):
    queries, docs = texts
    assert httpx.get(f"{url}/health").status_code == 200
    got = httpx.post(f"{url}/rerank", json={"query": queries[1], "texts": docs[:5]}).json()
    assert [r["index"] for r in got] == [d.index for d in reranker.rank(queries[1], docs[:5])]


def _healthy_corpus(url, retriever, texts):
    queries, _ = texts
    assert httpx.get(f"{url}/health").status_code == 200
    got = httpx.post(f"{url}/retrieve", json={"query": queries[1], "top_k": 5}).json()
    assert [r["id"] for r in got["results"]] == [d.id for d in retriever.retrieve(queries[1], k=5)]


@pytest.mark.parametrize("examples", [6, pytest.param(100, marks=pytest.mark.slow)])
def test_fuzzing_every_route_gets_no_server_error(
    examples, serve_reranker, corpus_retriever, texts
):
    reranker = serve_reranker("maniscope")
    with thread_server(reranker, max_batch=4, max_wait_ms=1, **LIMITS) as url:
        assert _fuzz(url, examples) > 0
        _healthy_rerank(url, reranker, texts)
    retriever = corpus_retriever()
    with _corpus_server(retriever) as url:
        assert _fuzz(url, examples) > 0
        _healthy_corpus(url, retriever, texts)
