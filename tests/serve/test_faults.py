"""Bad and hostile requests over loopback: each gets its JSON error and status, and the
server stays healthy and keeps answering correctly afterwards."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest

from tests.serve.harness import demo_texts, thread_server

KEY = "s3cret-key"


@pytest.fixture(scope="module")
def texts():
    return demo_texts()


@pytest.fixture(scope="module")
def server(tmp_path_factory, serve_reranker):
    key_file = tmp_path_factory.mktemp("key") / "key.txt"
    key_file.write_text(KEY + "\n")
    reranker = serve_reranker("maniscope")
    limits = dict(max_docs=50, max_text_chars=2000, max_body_bytes=64 * 1024, max_queue=4)
    settings = dict(max_batch=2, max_wait_ms=1, api_key_file=str(key_file), **limits)
    with thread_server(reranker, **settings) as url:
        yield url, reranker


def _post(url, path, content=None, json_body=None, key=KEY, **kw):
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return httpx.post(f"{url}{path}", content=content, json=json_body, headers=headers, **kw)


def _healthy(url, reranker, texts):
    queries, docs = texts
    assert httpx.get(f"{url}/health").status_code == 200
    response = _post(url, "/rerank", json_body={"query": queries[2], "texts": docs[:8]})
    assert response.status_code == 200
    assert [r["index"] for r in response.json()] == [
        d.index for d in reranker.rank(queries[2], docs[:8])
    ]


@pytest.mark.parametrize(
    "path, body, status, message",
    [
        ("/rerank", b'{"query": "x", "texts": [', 400, "malformed JSON"),
        ("/rerank", b"\xff\xfe", 400, "malformed JSON"),
        ("/rerank", b"[1, 2]", 422, "expected a JSON object"),
        ("/rerank", b'{"query": 7, "texts": ["a"]}', 422, "query: expected a string"),
        ("/rerank", b'{"query": "q", "texts": "a"}', 422, "texts: expected a list"),
        ("/rerank", b'{"query": "q", "texts": []}', 422, "texts: empty list"),
        ("/rerank", b'{"query": "q", "texts": ["a", "  "]}', 422, "texts[1]: empty text"),
        ("/rerank", b'{"query": "q", "texts": ["a"], "return_text": "yes"}', 422, "true or false"),
        ("/v1/rerank", b'{"query": "q", "documents": [{"id": 1}]}', 422, "documents[0]"),
        ("/v1/rerank", b'{"query": "q", "documents": ["a"], "top_n": 0}', 422, "top_n"),
        ("/v1/rerank", b'{"query": "", "documents": ["a"]}', 422, "query: empty text"),
        ("/rerank", json.dumps({"query": "q", "texts": ["a"] * 51}).encode(), 413, "51 documents"),
        ("/rerank", json.dumps({"query": "q", "texts": ["a" * 2001]}).encode(), 413, "characters"),
        ("/rerank", b" " * (64 * 1024 + 1), 413, "over the limit"),
    ],
)
def test_bad_requests_get_their_status_and_the_server_stays_healthy(
    server, texts, path, body, status, message
):
    url, reranker = server
    response = _post(url, path, content=body)
    assert response.status_code == status
    assert message in response.json()["error"] and response.json()["status"] == status
    _healthy(url, reranker, texts)


def test_truncate_cuts_long_texts_instead(server, texts):
    url, _ = server
    body = {"query": "q", "texts": ["a" * 2001, "b"], "truncate": True}
    assert _post(url, "/rerank", json_body=body).status_code == 200


def test_the_api_key_is_required(server, texts):
    url, reranker = server
    body = {"query": "q", "texts": ["a", "b"]}
    for key in (None, "wrong", KEY + "x"):
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        response = httpx.post(f"{url}/v1/rerank", json=body, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/health").status_code == 200  # open, for load balancers
    _healthy(url, reranker, texts)


def test_a_flood_past_the_queue_gets_429_and_the_rest_is_answered(server, texts):
    url, reranker = server
    queries, docs = texts
    headers = {"Authorization": f"Bearer {KEY}"}
    body = {"query": queries[0], "texts": docs[:30]}

    async def flood():
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as c:
            return await asyncio.gather(*(c.post("/rerank", json=body) for _ in range(32)))

    responses = asyncio.run(flood())
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 429} and 429 in codes and 200 in codes
    want = [d.index for d in reranker.rank(queries[0], docs[:30])]
    assert all([x["index"] for x in r.json()] == want for r in responses if r.status_code == 200)
    assert "queue full" in next(r for r in responses if r.status_code == 429).json()["error"]
    _healthy(url, reranker, texts)


def _raw_request(url: str, body: bytes, length: int | None = None) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = (
        f"POST /rerank HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length or len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode())
    return sock


def test_a_slow_client_does_not_hold_up_the_others(server, texts):
    url, reranker = server
    queries, docs = texts
    body = json.dumps({"query": queries[0], "texts": docs[:5]}).encode()
    sock = _raw_request(url, body)
    start = time.monotonic()
    for i in range(0, len(body), 40):  # the body trickles in over ~1.5 s ...
        sock.sendall(body[i : i + 40])
        if i == 40 * 3:
            _healthy(url, reranker, texts)  # ... while others are answered
        time.sleep(1.5 / (len(body) / 40))
    reply = sock.recv(65536).decode()
    sock.close()
    assert time.monotonic() - start >= 1.0
    assert reply.startswith("HTTP/1.1 200")
    _healthy(url, reranker, texts)


def test_a_client_that_disconnects_mid_request(server, texts):
    url, reranker = server
    queries, docs = texts
    body = json.dumps({"query": queries[3], "texts": docs[:30]}).encode()
    half = _raw_request(url, body)
    half.sendall(body[: len(body) // 2])  # gone before its body ends
    half.close()
    whole = _raw_request(url, body)
    whole.sendall(body)  # gone before its answer
    whole.close()
    time.sleep(0.5)
    _healthy(url, reranker, texts)
