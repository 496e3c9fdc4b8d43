"""Servers for the service tests, loopback only: uvicorn in a thread of the test process
(sharing its loaded encoder: fast) or ``georag serve`` in a subprocess (signals, workers)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from georag.data.bundled import DEMO_DIR

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def demo_texts() -> tuple[list[str], list[str]]:
    """Queries and documents of the bundled demo corpus (real texts)."""

    def read(name: str) -> list[str]:
        lines = (DEMO_DIR / name).read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["text"] for line in lines]

    return read("queries.jsonl"), read("corpus.jsonl")


def demo_documents() -> list[dict]:
    """The bundled demo corpus as ``{"id", "title", "text"}`` (what an index takes)."""
    lines = (DEMO_DIR / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    return [{"id": r["_id"], "title": r.get("title", ""), "text": r["text"]} for r in rows]


def wait_ready(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready in {timeout} s")


@contextlib.contextmanager
def thread_server(model, **settings):
    """``create_app`` under uvicorn in a daemon thread; yields its base URL (``model``: a
    georag.Reranker, or a georag.Retriever with ``index=`` among the settings)."""
    import uvicorn

    from georag.serve.app import create_app
    from georag.serve.config import ServeConfig

    port = free_port()
    config = ServeConfig(method=model.method, port=port, **settings)
    server = uvicorn.Server(
        uvicorn.Config(create_app(config, model), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, 120)
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "georag", "serve", *args]


def environment() -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@contextlib.contextmanager
def process_server(*args: str, timeout: float = 240):
    """``georag serve ARGS --port P`` in a subprocess; yields (process, base URL)."""
    port = free_port()
    process = subprocess.Popen(
        serve_command(*args, "--port", str(port)),
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, timeout, process)
        yield process, url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
