"""Load test of ``georag serve`` over loopback: throughput, latency, batch sizes, parity.

Starts the server (127.0.0.1, a free port, one worker on one torch thread) once per
method and batching setting, sends a SciFact workload (real test queries and their
first-stage top-M texts, through georag's first-stage code) at each concurrency, and
records requests/s, p50 / p95 / p99 latency, the batch-size distribution (from the
server's /metrics), errors, and the responses whose ranking differs from the in-process
``georag.Reranker`` ranking of the same input (must be 0).

Embeddings are the server's cache by content hash: the workload's texts are encoded
once, before the timing, into a disk cache that the server and the in-process reference
both read (``--cache-dir``), so the figures time the service and the method, not the
encoder. ``--first-stage dense`` takes the dense MiniLM top-M (it encodes the whole
corpus once, cached); ``bm25`` needs only the workload's texts encoded (for a busy
machine). Bounded: ``--requests`` per cell, ``--timeout`` per server start::

    python scripts/bench/load_serve.py --data-dir ../shared/data --out runs/load_serve.json
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time

import httpx

from georag.perf.bench import bench_parser, positive_int, start


def _workload(args) -> list[tuple[str, list[str]]]:
    """(query, top-M texts) of the first ``--queries`` SciFact test queries."""
    import georag

    data = georag.load_beir("scifact", data_dir=args.data_dir)
    qids = list(data.queries)[: args.queries]
    queries = [data.queries[q] for q in qids]
    if args.first_stage == "dense":
        sub = georag.FirstStage(data, georag.FirstStageConfig(top_m=args.top_m))
        batch = sub.retrieve(qids, queries, with_texts=True)
        return [(q, [t for t in row if t]) for q, row in zip(queries, batch.cand_texts)]
    from georag.retrieval.bm25 import BM25Index

    texts = [doc.full_text for doc in data.corpus.values()]
    _, rows = BM25Index.build(texts).search(queries, args.top_m)
    return [(q, [texts[j] for j in row if j >= 0]) for q, row in zip(queries, rows.tolist())]


def _encode_once(workload, cache_dir: str) -> float:
    """Encode every text of the workload into the disk cache; returns the seconds taken."""
    import georag

    reranker = georag.Reranker("none", cache_dir=cache_dir)
    texts = list(dict.fromkeys([q for q, _ in workload] + [t for _, d in workload for t in d]))
    t0 = time.perf_counter()
    reranker._encode(texts)
    return time.perf_counter() - t0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _histograms(url: str) -> dict:
    """georag_batch_size's buckets (``{"le": cumulative count}``), its ``sum`` and ``count``,
    and the server-side latency's ``latency_sum`` and ``latency_count``."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    pattern = r'georag_batch_size_bucket\{le="([^"]+)"\} (\S+)'
    out = {le: float(n) for le, n in re.findall(pattern, text)}
    names = {"sum": "batch_size_sum", "count": "batch_size_count"}
    names.update(latency_sum="request_latency_seconds_sum")
    names.update(latency_count="request_latency_seconds_count")
    for key, name in names.items():
        out[key] = float(re.search(rf"georag_{name} (\S+)", text).group(1))
    return out


def _distribution(before: dict, after: dict) -> dict:
    """Batches per size bucket (``"<=8": 3``) between two reads of the histogram."""
    bounds = [k for k in after if not k.endswith(("sum", "count"))]
    cumulative = [after[k] - before.get(k, 0.0) for k in bounds]
    counts = [c - p for c, p in zip(cumulative, [0.0, *cumulative[:-1]])]
    return {f"<={k}": int(c) for k, c in zip(bounds, counts) if c}


def _request(url: str, body: bytes) -> bytes:
    """The whole HTTP/1.1 request of one body, built once."""
    host = url.removeprefix("http://")
    head = (
        f"POST /rerank HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _drive(
    url: str, requests: list[bytes], concurrency: int
) -> list[tuple[float, int, object]]:
    """Send ``requests`` over ``concurrency`` keep-alive connections, one request in flight
    on each: (seconds, status, answer) per request.

    A minimal HTTP/1.1 client on raw sockets: on a shared 2-core machine a full client
    (httpx) spent more CPU per request than the server and throttled what it measured.
    """
    host, port = url.removeprefix("http://").split(":")
    pending = list(enumerate(requests))
    results: list = [None] * len(requests)

    async def worker():
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while pending:
                i, request = pending.pop(0)
                t0 = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                body = await reader.readexactly(length)
                answer = json.loads(body) if status == 200 else None
                results[i] = (time.perf_counter() - t0, status, answer)
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def _server(method: str, batch: int, args) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    command = [sys.executable, "-m", "georag", "--threads", "1", "serve", "--method", method]
    command += [
        "--port",
        str(port),
        "--max-batch",
        str(batch),
        "--max-wait-ms",
        str(args.max_wait_ms),
    ]
    command += ["--max-queue", "4096", "--cache-dir", args.cache_dir]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"load_serve: the server exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit(f"load_serve: the server was not ready in {args.timeout} s")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--methods", default="maniscope,diffusion,ricci")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--requests", type=positive_int, default=128, help="requests per cell")
    parser.add_argument("--queries", type=positive_int, default=300, help="SciFact test queries")
    parser.add_argument("--top-m", type=positive_int, default=100, help="documents per request")
    parser.add_argument("--first-stage", choices=["dense", "bm25"], default="dense")
    parser.add_argument("--max-batch", type=positive_int, default=64, help="micro-batched setting")
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--cache-dir", default="runs/load_serve_cache", help="text cache")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per server start")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    levels = [int(c) for c in args.concurrency.split(",") if c]
    config = {k: getattr(args, k) for k in ("requests", "queries", "top_m", "first_stage")}
    config.update(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, workers=1)
    config.update(server_threads=1, methods=methods, concurrency=levels)
    bench = start(args, config=config)

    import georag

    workload = _workload(args)
    print(
        f"# workload: {len(workload)} queries x {args.top_m} texts; encoding (cached) took "
        f"{_encode_once(workload, args.cache_dir):.1f} s",
        flush=True,
    )
    rows = []
    for method in methods:
        reference = georag.Reranker(method, cache_dir=args.cache_dir)
        expected = [[d.index for d in reference.rank(q, docs) if d.kept] for q, docs in workload]
        encoded = [json.dumps({"query": q, "texts": docs}).encode() for q, docs in workload]
        for batch in (1, args.max_batch):
            process, url = _server(method, batch, args)
            try:
                for concurrency in levels:
                    picks = [i % len(workload) for i in range(args.requests)]
                    bodies = [_request(url, encoded[i]) for i in picks]
                    before = _histograms(url)
                    t0 = time.perf_counter()
                    results = asyncio.run(_drive(url, bodies, concurrency))
                    wall = time.perf_counter() - t0
                    after = _histograms(url)
                    ok = [r for r in results if r[1] == 200]
                    latencies = [r[0] * 1000 for r in ok]
                    mismatches = sum(
                        [x["index"] for x in r[2]] != expected[i]
                        for i, r in zip(picks, results)
                        if r[1] == 200
                    )
                    batches = after["count"] - before["count"]
                    served = after["latency_count"] - before["latency_count"]
                    server_ms = 1000 * (after["latency_sum"] - before["latency_sum"]) / served
                    row = {
                        "method": method,
                        "batching": "off (B=1)"
                        if batch == 1
                        else f"max {batch}, {args.max_wait_ms:g} ms",
                        "concurrency": concurrency,
                        "requests": len(results),
                        "req_per_s": len(ok) / wall,
                        "p50_ms": _percentile(latencies, 50) if ok else None,
                        "p95_ms": _percentile(latencies, 95) if ok else None,
                        "p99_ms": _percentile(latencies, 99) if ok else None,
                        "server_mean_ms": server_ms,
                        "mean_batch": (after["sum"] - before["sum"]) / batches if batches else None,
                        "batch_sizes": _distribution(before, after),
                        "errors": len(results) - len(ok),
                        "mismatches": mismatches,
                        "load": os.getloadavg()[0],
                    }
                    rows.append(row)
                    print(
                        f"{method:10s} {row['batching']:16s} c={concurrency:3d} "
                        f"{row['req_per_s']:7.1f} req/s  p50 {row['p50_ms']:7.1f}  p95 "
                        f"{row['p95_ms']:7.1f}  p99 {row['p99_ms']:7.1f} ms  server "
                        f"{server_ms:6.1f} ms  batch "
                        f"{row['mean_batch']:5.1f} {row['batch_sizes']}  errors {row['errors']}  "
                        f"mismatches {mismatches}  load {row['load']:.1f}",
                        flush=True,
                    )
            finally:
                process.terminate()
                process.wait(120)
    _table(rows)
    bench.finish(rows)


def _table(rows: list[dict]) -> None:
    print(
        "\n| method | batching | concurrency | req/s | p50 ms | p95 ms | p99 ms | server mean ms "
        "| mean batch | batch sizes | errors | mismatches | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        sizes = ", ".join(f"{k}: {v}" for k, v in r["batch_sizes"].items())
        print(
            f"| {r['method']} | {r['batching']} | {r['concurrency']} | {r['req_per_s']:.1f} | "
            f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | "
            f"{r['server_mean_ms']:.1f} | {r['mean_batch']:.1f} | "
            f"{sizes} | {r['errors']} | {r['mismatches']} | {r['load']:.1f} |"
        )


if __name__ == "__main__":
    main()
