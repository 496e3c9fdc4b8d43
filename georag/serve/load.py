"""Load tests of ``georag serve`` over loopback (``scripts/bench/load_serve.py``): the
client, the server processes, the cells of a table, and the rerank workload.

The client is a minimal HTTP/1.1 one on raw sockets (:class:`Connection`): on a shared
two-core machine a full client (httpx) spent more CPU per request than the server and
throttled what it measured. Each cell sends its requests over ``concurrency`` keep-alive
connections, one request in flight on each, and records requests/s, p50 / p95 / p99
latency, the server process's CPU milliseconds per request (user + system), its own mean
request time and batch sizes (read back from ``/metrics``), errors, and mismatches
against the in-process answers. The corpus retrieval workload is
:mod:`georag.serve.load_retrieve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import orjson

__all__ = [
    "Connection",
    "request_bytes",
    "drive",
    "server",
    "measure_cell",
    "rerank_workload",
    "rerank_references",
    "compare_rerank",
    "batching_label",
    "print_table",
    "cell_line",
    "percentile",
    "in_process",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request_bytes(url: str, body: bytes, path: str = "/rerank", method: str = "POST") -> bytes:
    """The whole HTTP/1.1 request of one JSON body, built once."""
    host = url.removeprefix("http://")
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class Connection:
    """One keep-alive connection of the raw client."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> Connection:
        host, port = url.removeprefix("http://").split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def send(self, request: bytes) -> tuple[int, object]:
        """``(status, JSON answer)`` of one request (``request_bytes``)."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        return status, orjson.loads(await self.reader.readexactly(length))

    def close(self) -> None:
        self.writer.close()


async def drive(url: str, requests: list[bytes], concurrency: int) -> list[tuple]:
    """Send ``requests`` over ``concurrency`` connections: ``(seconds, status, answer)``
    per request (the answer only for status 200)."""
    pending = list(enumerate(requests))
    pending.reverse()
    results: list = [None] * len(requests)

    async def worker():
        connection = await Connection.open(url)
        try:
            while pending:
                i, request = pending.pop()
                t0 = time.perf_counter()
                status, answer = await connection.send(request)
                results[i] = (time.perf_counter() - t0, status, answer if status == 200 else None)
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


@contextlib.contextmanager
def server(args: list[str], timeout: float) -> Iterator[tuple[subprocess.Popen, str]]:
    """``georag --threads 1 serve ARGS`` on a free loopback port, until ready; yields
    ``(process, url)`` and ends it with SIGTERM."""
    import httpx

    port = _free_port()
    command = [sys.executable, "-m", "georag", "--threads", "1", "serve", *args]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                message = (process.stderr.read().strip().splitlines() or ["no message"])[-1]
                raise SystemExit(f"load_serve: the server exited: {message}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise SystemExit(f"load_serve: the server was not ready in {timeout} s")
            time.sleep(0.5)
        yield process, url
    finally:
        process.terminate()
        process.wait(120)


def _histograms(url: str, latency: str) -> dict:
    """georag_batch_size's buckets (``{"le": cumulative count}``), its ``sum`` and
    ``count``, and the server-side ``latency`` histogram's ``latency_sum`` and
    ``latency_count``."""
    import httpx

    text = httpx.get(f"{url}/metrics", timeout=30).text
    pattern = r'georag_batch_size_bucket\{le="([^"]+)"\} (\S+)'
    out = {le: float(n) for le, n in re.findall(pattern, text)}
    names = {"sum": "batch_size_sum", "count": "batch_size_count"}
    names.update(latency_sum=f"{latency}_sum", latency_count=f"{latency}_count")
    for key, name in names.items():
        out[key] = float(re.search(rf"georag_{name} (\S+)", text).group(1))
    return out


def _distribution(before: dict, after: dict) -> dict:
    """Batches per size bucket (``"<=8": 3``) between two reads of the histogram."""
    bounds = [k for k in after if not k.endswith(("sum", "count"))]
    cumulative = [after[k] - before.get(k, 0.0) for k in bounds]
    counts = [c - p for c, p in zip(cumulative, [0.0, *cumulative[:-1]])]
    return {f"<={k}": int(c) for k, c in zip(bounds, counts) if c}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def measure_cell(
    url: str,
    pid: int,
    requests: list[bytes],
    check: Callable[[int, object], tuple[bool, bool]],
    concurrency: int,
    latency: str = "request_latency_seconds",
) -> dict:
    """One concurrency level against a running server (``check(i, answer)``: the
    mismatch and same-order flags of the answer to ``requests[i]``)."""
    import psutil

    process = psutil.Process(pid)
    before, cpu0 = _histograms(url, latency), process.cpu_times()
    t0 = time.perf_counter()
    results = asyncio.run(drive(url, requests, concurrency))
    wall = time.perf_counter() - t0
    cpu1, after = process.cpu_times(), _histograms(url, latency)
    ok = [(i, r) for i, r in enumerate(results) if r[1] == 200]
    checks = [check(i, r[2]) for i, r in ok]
    latencies = [r[0] * 1000 for _, r in ok]
    batches = after["count"] - before["count"]
    served = after["latency_count"] - before["latency_count"]
    cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "req_per_s": len(ok) / wall,
        "p50_ms": percentile(latencies, 50) if ok else None,
        "p95_ms": percentile(latencies, 95) if ok else None,
        "p99_ms": percentile(latencies, 99) if ok else None,
        "server_cpu_ms": 1000 * cpu / len(results),
        "server_mean_ms": 1000 * (after["latency_sum"] - before["latency_sum"]) / max(served, 1),
        "mean_batch": (after["sum"] - before["sum"]) / batches if batches else None,
        "batch_sizes": _distribution(before, after),
        "errors": len(results) - len(ok),
        "mismatches": sum(bad for bad, _ in checks),
        "other_order": sum(not same for _, same in checks),
        "load": os.getloadavg()[0],
    }


def batching_label(batch: int, wait_ms: float) -> str:
    return "off (B=1)" if batch == 1 else f"max {batch}, {wait_ms:g} ms"


def cell_line(row: dict) -> str:
    """One printed line of a cell."""

    def ms(key: str) -> str:
        return "-" if row[key] is None else f"{row[key]:7.1f}"

    batch = "-" if row["mean_batch"] is None else f"{row['mean_batch']:5.1f}"
    return (
        f"{row['method']:10s} {row['batching']:16s} c={row['concurrency']:3d} "
        f"{row['req_per_s']:7.1f} req/s  p50 {ms('p50_ms')}  p95 {ms('p95_ms')}  p99 "
        f"{ms('p99_ms')} ms  server cpu {row['server_cpu_ms']:5.1f} ms/req  mean "
        f"{row['server_mean_ms']:6.1f} ms  batch {batch} {row['batch_sizes']}  errors "
        f"{row['errors']}  mismatches {row['mismatches']} (other order {row['other_order']})  "
        f"load {row['load']:.1f}"
    )


def print_table(rows: list[dict]) -> None:
    """The Markdown rows of docs/serve.md."""
    print(
        "\n| method | batching | concurrency | req/s | p50 ms | p95 ms | p99 ms | server CPU "
        "ms/req | server mean ms | mean batch | batch sizes | errors | mismatches | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        sizes = ", ".join(f"{k}: {v}" for k, v in r["batch_sizes"].items())
        print(
            f"| {r['method']} | {r['batching']} | {r['concurrency']} | {r['req_per_s']:.1f} | "
            f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | "
            f"{r['server_cpu_ms']:.1f} | {r['server_mean_ms']:.1f} | {r['mean_batch']:.1f} | "
            f"{sizes} | {r['errors']} | {r['mismatches']} | {r['load']:.1f} |"
        )


# ------------------------------------------------------------------ the rerank workload
def rerank_workload(
    data_dir: str | None,
    queries: int,
    top_m: int,
    first_stage: str,
    cache_dir: str,
    embedding_cache: str | None,
    cache_queries: bool,
    encoder_backend: str = "torch",
) -> tuple[list[tuple[str, list[str]]], object]:
    """(query, top-M texts) of the first ``queries`` SciFact test queries, and the encoder.

    The server's text cache (``cache_dir``) receives the workload's texts with the corpus
    embeddings the first stage holds (the same model, maximum sequence length and device as
    the server's encoder), so no document is encoded while timed; ``first_stage="bm25"``
    takes the BM25 top-M and encodes only its texts (for a machine without the corpus
    embeddings); ``cache_queries`` puts the queries in the cache too; the encoder runs on
    ``encoder_backend``, the server's.
    """
    import georag

    data = georag.load_beir("scifact", data_dir=data_dir)
    qids = list(data.queries)[:queries]
    texts_of_queries = [data.queries[q] for q in qids]
    encoder = georag.TextEncoder(show_progress=False, backend=encoder_backend)
    cache = georag.Reranker("none", encoder=encoder, cache_dir=cache_dir)
    if first_stage == "dense":
        config = georag.FirstStageConfig(top_m=top_m)
        first = georag.FirstStage(data, config, encoder=encoder, cache_dir=embedding_cache)
        batch = first.retrieve(qids, texts_of_queries, with_texts=True)
        workload = [
            (q, [t for t in row if t]) for q, row in zip(texts_of_queries, batch.cand_texts)
        ]
        row_of = {text: i for i, text in enumerate(first.units.texts)}
        texts = list(dict.fromkeys(t for _, docs in workload for t in docs))
        cache.cache.encode(texts, lambda chunk: first.embeddings[[row_of[t] for t in chunk]])
    else:
        from georag.retrieval.bm25 import BM25Index

        corpus = [doc.full_text for doc in data.corpus.values()]
        _, rows = BM25Index.build(corpus).search(texts_of_queries, top_m)
        workload = [
            (q, [corpus[j] for j in r if j >= 0]) for q, r in zip(texts_of_queries, rows.tolist())
        ]
        cache._encode(list(dict.fromkeys(t for _, docs in workload for t in docs)))
    if cache_queries:
        cache._encode(texts_of_queries)
    return workload, encoder


def rerank_references(
    method: str, workload, encoder, cache_dir: str, cache_queries: bool
) -> list[dict[int, float]]:
    """``{index: score}`` of the documents the in-process reranker keeps, per query."""
    import georag

    reference = georag.Reranker(
        method, encoder=encoder, cache_dir=cache_dir, cache_queries=cache_queries
    )
    return [{d.index: d.score for d in reference.rank(q, docs) if d.kept} for q, docs in workload]


def compare_rerank(
    answer: list[dict], expected: dict[int, float], atol: float
) -> tuple[bool, bool]:
    """(mismatch, same order) of one /rerank answer against the reference."""
    got = {x["index"]: x["score"] for x in answer}
    if got.keys() != expected.keys():
        return True, False
    same_order = [x["index"] for x in answer] == sorted(expected, key=lambda i: -expected[i])
    return any(abs(got[i] - s) > atol for i, s in expected.items()), same_order


# ----------------------------------------------------------- in process, no sockets
async def _asgi_post(app, body: bytes) -> int:
    """One POST /rerank straight into the ASGI app; its status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/rerank",
        "raw_path": b"/rerank",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8080),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list = []

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client never leaves

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"]


def in_process(config, workload, requests: int, passes: int, profile: str | None = None) -> dict:
    """CPU and wall milliseconds per /rerank request through the ASGI app of ``config``
    in this process, ``config.max_batch`` requests at once (the median of ``passes``).

    Parameters
    ----------
    config : ServeConfig
    workload : list of (query, texts)
    requests : int
        Requests per pass (the workload repeated).
    passes : int
    profile : str, optional
        A file for the cProfile statistics of the passes (cumulative, the first 60 rows).
    """
    import cProfile
    import pstats
    import statistics

    from georag.serve.app import create_app

    app = create_app(config)
    bodies = [orjson.dumps({"query": q, "texts": docs}) for q, docs in workload]
    picks = [i % len(bodies) for i in range(requests)]
    wave = config.max_batch

    profiler = cProfile.Profile() if profile else None

    async def measure() -> dict:
        async with app.router.lifespan_context(app):
            await asyncio.gather(*(_asgi_post(app, bodies[i]) for i in picks[:wave]))  # untimed
            cpu, wall, statuses = [], [], []
            for _ in range(passes):
                cpu0, t0 = time.process_time(), time.perf_counter()
                if profiler is not None:
                    profiler.enable()
                for start_at in range(0, len(picks), wave):
                    group = picks[start_at : start_at + wave]
                    statuses += await asyncio.gather(*(_asgi_post(app, bodies[i]) for i in group))
                if profiler is not None:
                    profiler.disable()
                cpu.append(1000 * (time.process_time() - cpu0) / len(picks))
                wall.append(1000 * (time.perf_counter() - t0) / len(picks))
        return {
            "cpu_ms": statistics.median(cpu),
            "wall_ms": statistics.median(wall),
            "cpu_ms_passes": cpu,
            "errors": sum(s != 200 for s in statuses),
        }

    figures = asyncio.run(measure())
    if profiler is not None:
        with open(profile, "w") as handle:
            pstats.Stats(profiler, stream=handle).sort_stats("cumulative").print_stats(60)
    return figures
