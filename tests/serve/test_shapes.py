"""The two API shapes over real HTTP (httpx, loopback), against the in-process ranking.

Neither langchain-core nor llama-index-core ships an HTTP rerank client (their Cohere /
Jina / TEI rerankers are separate packages), so the client here is httpx.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import httpx
import pytest

from georag.serve.config import ServeConfig
from georag.serve.metrics import Metrics
from georag.serve.service import Service
from tests.rerank.test_small_pool import METHODS
from tests.serve.harness import demo_texts, thread_server

DEFAULT = ("none", "diffusion", "maniscope")  # ricci compiles its flow in the server: slow


@pytest.fixture(scope="module")
def texts():
    return demo_texts()


@pytest.fixture(scope="module")
def maniscope(serve_reranker):
    reranker = serve_reranker("maniscope")
    with thread_server(reranker, max_batch=8, max_wait_ms=5) as url:
        yield url, reranker


def test_tei_shape_equals_the_in_process_ranking(maniscope, texts):
    url, reranker = maniscope
    queries, docs = texts
    body = {"query": queries[0], "texts": docs[:12], "return_text": True, "raw_scores": False}
    response = httpx.post(f"{url}/rerank", json=body)
    assert response.status_code == 200
    assert response.headers["x-georag-fallback"] == "false"
    want = reranker.rank(queries[0], docs[:12])
    got = response.json()
    assert [r["index"] for r in got] == [d.index for d in want]
    assert [r["score"] for r in got] == pytest.approx([d.score for d in want], abs=1e-6)
    assert [r["text"] for r in got] == [d.text for d in want]
    bare = httpx.post(f"{url}/rerank", json={"query": queries[0], "texts": docs[:3]}).json()
    assert all(set(r) == {"index", "score"} for r in bare)


def test_v1_shape_equals_the_in_process_ranking(maniscope, texts):
    url, reranker = maniscope
    queries, docs = texts
    documents = [{"text": d} for d in docs[:6]] + docs[6:12]  # both forms
    body = {"model": "any", "query": queries[1], "documents": documents, "top_n": 4}
    response = httpx.post(f"{url}/v1/rerank", json={**body, "return_documents": True})
    assert response.status_code == 200
    got = response.json()
    want = reranker.rank(queries[1], docs[:12])[:4]
    assert [r["index"] for r in got["results"]] == [d.index for d in want]
    assert [r["relevance_score"] for r in got["results"]] == pytest.approx(
        [d.score for d in want], abs=1e-6
    )
    assert [r["document"]["text"] for r in got["results"]] == [d.text for d in want]
    assert got["model"] == "maniscope" and got["meta"]["fallback"] is False
    assert got["meta"]["documents"] == 12


def test_concurrent_requests_are_batched_and_answered_in_order(maniscope, texts):
    import asyncio

    url, reranker = maniscope
    queries, docs = texts
    cases = [(queries[i % len(queries)], docs[i : i + 5 + i % 7]) for i in range(24)]

    async def send():
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            return await asyncio.gather(
                *(client.post("/rerank", json={"query": q, "texts": d}) for q, d in cases)
            )

    responses = asyncio.run(send())
    for (query, documents), response in zip(cases, responses):
        assert response.status_code == 200
        want = reranker.rank(query, documents)
        assert [r["index"] for r in response.json()] == [d.index for d in want]
    metrics = httpx.get(f"{url}/metrics").text
    count = float(metrics.split("georag_batch_size_count ")[1].split()[0])
    total = float(metrics.split("georag_batch_size_sum ")[1].split()[0])
    assert total / count > 1  # some requests shared a batch
    for name in ("georag_requests_total", "georag_queue_wait_seconds_bucket"):
        assert name in metrics
    assert 'georag_request_latency_seconds_bucket{le="+Inf"}' in metrics


@pytest.mark.parametrize(
    "method",
    [m if m in DEFAULT else pytest.param(m, marks=pytest.mark.slow) for m in METHODS],
)
def test_small_pools_through_the_service(method, serve_reranker, texts):
    """Both shapes answer 1, 2 and 3 documents as the text API does, fallback flag included."""
    queries, docs = texts
    reranker = serve_reranker(method)
    with thread_server(reranker) as url:
        for n in (1, 2, 3):
            want = reranker.rank(queries[0], docs[:n])
            tei = httpx.post(f"{url}/rerank", json={"query": queries[0], "texts": docs[:n]})
            v1 = httpx.post(f"{url}/v1/rerank", json={"query": queries[0], "documents": docs[:n]})
            assert tei.status_code == v1.status_code == 200
            kept = [d for d in want if d.kept]
            assert [r["index"] for r in tei.json()] == [d.index for d in kept]
            assert [r["index"] for r in v1.json()["results"]] == [d.index for d in kept]
            flag = want[0].fallback
            assert tei.headers["x-georag-fallback"] == str(flag).lower()
            assert v1.json()["meta"]["fallback"] is flag


def test_health_is_not_ready_before_warm_up():
    status, body = Service(ServeConfig()).health()
    assert status == 503 and body["status"] == "warming up"


def test_metrics_render_prometheus_text():
    metrics = Metrics()
    metrics.requests["/rerank"] += 2
    metrics.responses[429] += 1
    metrics.batch_size.observe(3)
    text = metrics.render(waiting=5)
    assert 'georag_requests_total{route="/rerank"} 2' in text
    assert 'georag_responses_total{code="429"} 1' in text
    assert 'georag_batch_size_bucket{le="2"} 0' in text
    assert 'georag_batch_size_bucket{le="4"} 1' in text
    assert "georag_queue_depth 5" in text


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
def test_the_readme_curl_lines_run_as_written(maniscope):
    from tests.test_readme import readme_blocks

    url, reranker = maniscope
    lines = [x for b in readme_blocks("bash") for x in b.splitlines() if x.startswith("curl ")]
    assert [("/v1/rerank" in x) for x in lines] == [False, True]
    for line in lines:  # the README's port is the test server's here
        line = line.replace("localhost:8080", url.removeprefix("http://"))
        done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60)
        answer = json.loads(done.stdout)
        results = answer["results"] if isinstance(answer, dict) else answer
        assert results and results[0]["index"] == 0  # the vitamin D sentence first
