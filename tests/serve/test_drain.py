"""SIGTERM loses nothing that reached the server: requests written whole on raw sockets to
a busy server, the signal 0.2 s later, every one answered; ``/health`` says ``draining``
from the signal on. In the default suite the server runs in a thread and is signalled as
uvicorn's handler would be; under ``-m slow`` ``georag serve`` gets the real signal and
exits with SIGTERM's status."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time

import pytest

from tests.serve.harness import (
    demo_texts,
    process_server,
    read_statuses,
    send_raw,
    served_in_thread,
)

REQUESTS = 32
SIGNAL_AFTER_S = 0.2


def _health_raw(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    return sock


def _traffic(served: str) -> tuple[str, list[dict]]:
    """The route and the ``REQUESTS`` bodies (distinct queries: each one is encoded)."""
    queries, docs = demo_texts()
    if served == "rerank":
        return "/rerank", [
            {"query": f"{queries[i % 30]} {i}", "texts": docs[:40]} for i in range(REQUESTS)
        ]
    return "/retrieve", [{"query": f"{queries[i % 30]} {i}", "top_k": 5} for i in range(REQUESTS)]


def drain(url: str, path: str, bodies: list[dict], terminate) -> tuple[list, bytes]:
    """Write ``bodies`` on raw connections, call ``terminate()`` ``SIGNAL_AFTER_S`` later,
    ask ``/health`` at once; the statuses answered and the health reply."""
    socks = send_raw(url, path, bodies)
    time.sleep(SIGNAL_AFTER_S)
    terminate()
    health = _health_raw(url)
    statuses = read_statuses(socks, timeout=60)
    reply = health.recv(65536)
    health.close()
    return statuses, reply


@pytest.mark.parametrize("served", ["rerank", "index"])
def test_sigterm_answers_every_request_that_reached_the_server(
    served, serve_reranker, corpus_retriever
):
    path, bodies = _traffic(served)
    if served == "rerank":
        model, settings = serve_reranker("maniscope"), {}
    else:
        model = corpus_retriever()
        settings = {"index": str(model.index_dir)}
    with served_in_thread(model, max_batch=4, max_wait_ms=20, **settings) as (server, url):
        statuses, reply = drain(url, path, bodies, lambda: server.handle_exit(signal.SIGTERM, None))
    assert statuses == [200] * REQUESTS
    assert reply.startswith(b"HTTP/1.1 503") and b'"status":"draining"' in reply


@pytest.mark.slow
@pytest.mark.parametrize("served", ["rerank", "index"])
def test_georag_serve_answers_every_request_at_sigterm(served, tiny_index, tmp_path):
    path, bodies = _traffic(served)
    args = ["--max-batch", "4", "--max-wait-ms", "20"]
    if served == "rerank":
        args += ["--method", "maniscope"]
    else:
        shutil.copytree(tiny_index, tmp_path / "index")
        args += ["--method", "dense", "--index", str(tmp_path / "index")]
    with process_server(*args) as (process, url):
        statuses, reply = drain(url, path, bodies, lambda: os.kill(process.pid, signal.SIGTERM))
        print(f"{served}: {statuses.count(200)}/{REQUESTS} answered at SIGTERM")
        assert statuses == [200] * REQUESTS
        assert reply.startswith(b"HTTP/1.1 503") and b'"status":"draining"' in reply
        assert process.wait(60) == -signal.SIGTERM  # uvicorn re-raises the signal at the end
