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


def wait_listening(port: int, timeout: float, process: subprocess.Popen) -> None:
    """Wait until ``process`` accepts connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise TimeoutError(f"127.0.0.1:{port} not listening in {timeout} s")


@contextlib.contextmanager
def served_in_thread(model, **settings):
    """``create_app`` under georag's uvicorn server in a daemon thread; yields (server, base
    URL) (``model``: a georag.Reranker, or a georag.Retriever with ``index=`` among the
    settings). ``server.handle_exit(signal.SIGTERM, None)`` starts its shutdown."""
    import uvicorn

    from georag.serve.app import create_app
    from georag.serve.config import ServeConfig
    from georag.serve.drain import DrainingServer

    port = free_port()
    config = ServeConfig(method=model.method, port=port, **settings)
    server = DrainingServer(
        uvicorn.Config(create_app(config, model), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, 120)
        yield server, url
    finally:
        server.should_exit = True
        thread.join(30)


@contextlib.contextmanager
def thread_server(model, **settings):
    """:func:`served_in_thread`, yielding its base URL only."""
    with served_in_thread(model, **settings) as (_, url):
        yield url


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


def send_raw(url: str, path: str, bodies: list[dict]) -> list[socket.socket]:
    """Write each body whole as one ``POST path`` on its own raw connection (no reading)."""
    host, port = url.removeprefix("http://").split(":")
    socks = []
    for body in bodies:
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        )
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(head.encode() + data)
        socks.append(sock)
    return socks


def read_statuses(socks: list[socket.socket], timeout: float = 60) -> list[object]:
    """The status code each connection was answered with, or ``"reset"`` / ``"closed"``
    (no answer), reading until each closes, within ``timeout`` seconds in all."""
    deadline = time.monotonic() + timeout
    out: list[object] = []
    for sock in socks:
        reply = b""
        try:
            while time.monotonic() < deadline:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except ConnectionResetError:
            out.append("reset")
            continue
        except TimeoutError:
            out.append("timeout")
            continue
        finally:
            sock.close()
        out.append(int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else "closed")
    return out
