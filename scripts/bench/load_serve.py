"""Load test of ``georag serve`` over loopback: throughput, latency, server CPU, parity.

Workload: the first ``--queries`` SciFact test queries (300: all of them) with their dense
MiniLM top-``--top-m`` texts, through georag's first stage. Documents are cached, queries
are not, as in traffic whose queries are new: before the timing, the server's text cache
(``--cache-dir``) receives the workload's texts with the corpus embeddings the first stage
holds (the same model, maximum sequence length and device as the server's encoder), so no
document is encoded while timed, and the server encodes every request's query itself
(``--cache-queries``: the server caches queries too, and they are in the cache
beforehand). ``--first-stage bm25`` takes the BM25 top-M and encodes only its texts (for a
machine without the corpus embeddings).

Per method the server starts twice (one worker, one torch thread): ``--max-batch 1`` (no
micro-batching) and ``--max-batch B --max-wait-ms W``. At each concurrency, ``--requests``
requests go over keep-alive connections (after an untimed pass); each cell records
requests/s, p50 / p95 / p99 latency, the server's CPU milliseconds per request (its
process's user + system time), its mean request time and batch sizes (from ``/metrics``),
errors, and the mismatches against the in-process ``georag.Reranker`` reading the same
cache: a response mismatches when it keeps other documents or a score differs by more
than ``--atol`` (a query encoded within a batch differs from one encoded alone in the last
float bits; responses with another order are counted too). Prints the settings, threads
and load average at the start and the end, a line per cell and the Markdown rows of
docs/serve.md; writes all of it to ``--out`` (JSON).

``--in-process``: no sockets and no client; the requests go into the ASGI app in this
process, one at a time, then ``--max-batch`` at once, and the CPU milliseconds per request
(``time.process_time``, the median of ``--passes``) are printed; ``--profile FILE`` also
writes cProfile statistics.
``--quick``: a smoke run (maniscope, concurrency 1 and 4, 8 queries of 20 texts, 16
requests per cell).

    python scripts/bench/load_serve.py --data-dir ../shared/data --out runs/load_serve.json
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import re
import socket
import statistics
import subprocess
import sys
import time

import httpx
import orjson
import psutil

from georag.perf.bench import bench_parser, positive_int, start


def _workload(args) -> tuple[list[tuple[str, list[str]]], object]:
    """(query, top-M texts) of the first ``--queries`` SciFact test queries, and the
    reranker of the cache (encoder, cache folder, cache key) that both sides read."""
    import georag

    data = georag.load_beir("scifact", data_dir=args.data_dir)
    qids = list(data.queries)[: args.queries]
    queries = [data.queries[q] for q in qids]
    encoder = georag.TextEncoder(show_progress=False)
    cache = georag.Reranker("none", encoder=encoder, cache_dir=args.cache_dir)
    if args.first_stage == "dense":
        config = georag.FirstStageConfig(top_m=args.top_m)
        first = georag.FirstStage(data, config, encoder=encoder, cache_dir=args.embedding_cache)
        batch = first.retrieve(qids, queries, with_texts=True)
        workload = [(q, [t for t in row if t]) for q, row in zip(queries, batch.cand_texts)]
        row_of = {text: i for i, text in enumerate(first.units.texts)}
        texts = list(dict.fromkeys(t for _, docs in workload for t in docs))
        cache.cache.encode(texts, lambda chunk: first.embeddings[[row_of[t] for t in chunk]])
    else:
        from georag.retrieval.bm25 import BM25Index

        corpus = [doc.full_text for doc in data.corpus.values()]
        _, rows = BM25Index.build(corpus).search(queries, args.top_m)
        workload = [(q, [corpus[j] for j in r if j >= 0]) for q, r in zip(queries, rows.tolist())]
        cache._encode(list(dict.fromkeys(t for _, docs in workload for t in docs)))
    if args.cache_queries:
        cache._encode(queries)
    return workload, encoder


def _references(method: str, workload, encoder, args) -> list[dict[int, float]]:
    """``{index: score}`` of the documents the in-process reranker keeps, per query."""
    import georag

    reference = georag.Reranker(
        method, encoder=encoder, cache_dir=args.cache_dir, cache_queries=args.cache_queries
    )
    return [{d.index: d.score for d in reference.rank(q, docs) if d.kept} for q, docs in workload]


def _compare(answer: list[dict], expected: dict[int, float], atol: float) -> tuple[bool, bool]:
    """(mismatch, same order) of one /rerank answer against the reference."""
    got = {x["index"]: x["score"] for x in answer}
    if got.keys() != expected.keys():
        return True, False
    same_order = [x["index"] for x in answer] == sorted(expected, key=lambda i: -expected[i])
    return any(abs(got[i] - s) > atol for i, s in expected.items()), same_order


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
    pending.reverse()
    results: list = [None] * len(requests)

    async def worker():
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while pending:
                i, request = pending.pop()
                t0 = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                body = await reader.readexactly(length)
                answer = orjson.loads(body) if status == 200 else None
                results[i] = (time.perf_counter() - t0, status, answer)
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


def _server(method: str, batch: int, args) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    command = [sys.executable, "-m", "georag", "--threads", "1", "serve", "--method", method]
    command += ["--port", str(port), "--max-batch", str(batch)]
    command += ["--max-wait-ms", str(args.max_wait_ms), "--max-queue", "4096"]
    command += ["--cache-dir", args.cache_dir] + (["--cache-queries"] if args.cache_queries else [])
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


def _batching(batch: int, args) -> str:
    return "off (B=1)" if batch == 1 else f"max {batch}, {args.max_wait_ms:g} ms"


def _cell(url, server, bodies, picks, expected, concurrency, args) -> dict:
    """One concurrency level against a running server."""
    before, cpu0 = _histograms(url), server.cpu_times()
    t0 = time.perf_counter()
    results = asyncio.run(_drive(url, [bodies[i] for i in picks], concurrency))
    wall = time.perf_counter() - t0
    cpu1, after = server.cpu_times(), _histograms(url)
    ok = [(i, r) for i, r in zip(picks, results) if r[1] == 200]
    checks = [_compare(r[2], expected[i], args.atol) for i, r in ok]
    latencies = [r[0] * 1000 for _, r in ok]
    batches = after["count"] - before["count"]
    served = after["latency_count"] - before["latency_count"]
    cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "req_per_s": len(ok) / wall,
        "p50_ms": _percentile(latencies, 50) if ok else None,
        "p95_ms": _percentile(latencies, 95) if ok else None,
        "p99_ms": _percentile(latencies, 99) if ok else None,
        "server_cpu_ms": 1000 * cpu / len(results),
        "server_mean_ms": 1000 * (after["latency_sum"] - before["latency_sum"]) / max(served, 1),
        "mean_batch": (after["sum"] - before["sum"]) / batches if batches else None,
        "batch_sizes": _distribution(before, after),
        "errors": len(results) - len(ok),
        "mismatches": sum(bad for bad, _ in checks),
        "other_order": sum(not same for _, same in checks),
        "load": os.getloadavg()[0],
    }


def _over_http(args, methods, levels, workload, encoder) -> list[dict]:
    rows = []
    picks = [i % len(workload) for i in range(args.requests)]
    for method in methods:
        expected = _references(method, workload, encoder, args)
        for batch in (1, args.max_batch):
            process, url = _server(method, batch, args)
            bodies = [
                _request(url, orjson.dumps({"query": q, "texts": docs})) for q, docs in workload
            ]
            try:
                asyncio.run(_drive(url, bodies[:64], 64))  # untimed: the first batches
                for concurrency in levels:
                    cell = _cell(
                        url, psutil.Process(process.pid), bodies, picks, expected, concurrency, args
                    )
                    row = {"method": method, "batching": _batching(batch, args), **cell}
                    rows.append(row)
                    print(
                        f"{method:10s} {row['batching']:16s} c={concurrency:3d} "
                        f"{row['req_per_s']:7.1f} req/s  p50 {row['p50_ms']:7.1f}  p95 "
                        f"{row['p95_ms']:7.1f}  p99 {row['p99_ms']:7.1f} ms  server cpu "
                        f"{row['server_cpu_ms']:5.1f} ms/req  mean {row['server_mean_ms']:6.1f} "
                        f"ms  batch {row['mean_batch']:5.1f} {row['batch_sizes']}  errors "
                        f"{row['errors']}  mismatches {row['mismatches']} (other order "
                        f"{row['other_order']})  load {row['load']:.1f}",
                        flush=True,
                    )
            finally:
                process.terminate()
                process.wait(120)
    return rows


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


def _in_process(args, methods, workload) -> list[dict]:
    """CPU milliseconds per request through the ASGI app, one at a time and batched."""
    from georag.serve.app import create_app
    from georag.serve.config import ServeConfig

    bodies = [orjson.dumps({"query": q, "texts": docs}) for q, docs in workload]
    picks = [i % len(bodies) for i in range(args.requests)]
    rows = []

    async def measure(app, wave: int, profile: cProfile.Profile | None) -> dict:
        async with app.router.lifespan_context(app):
            await asyncio.gather(*(_asgi_post(app, bodies[i]) for i in picks[:wave]))  # untimed
            cpu, wall, statuses = [], [], []
            for _ in range(args.passes):
                cpu0, t0 = time.process_time(), time.perf_counter()
                if profile is not None:
                    profile.enable()
                for start_at in range(0, len(picks), wave):
                    group = picks[start_at : start_at + wave]
                    statuses += await asyncio.gather(*(_asgi_post(app, bodies[i]) for i in group))
                if profile is not None:
                    profile.disable()
                cpu.append(1000 * (time.process_time() - cpu0) / len(picks))
                wall.append(1000 * (time.perf_counter() - t0) / len(picks))
        return {
            "cpu_ms": statistics.median(cpu),
            "wall_ms": statistics.median(wall),
            "cpu_ms_passes": cpu,
            "errors": sum(s != 200 for s in statuses),
        }

    for method in methods:
        for batch in (1, args.max_batch):
            config = ServeConfig(
                method=method,
                max_batch=batch,
                max_wait_ms=args.max_wait_ms,
                max_queue=4096,
                cache_dir=args.cache_dir,
                cache_queries=args.cache_queries,
            )
            profile = cProfile.Profile() if args.profile else None
            figures = asyncio.run(measure(create_app(config), batch, profile))
            row = {"method": method, "batching": _batching(batch, args), **figures}
            row["load"] = os.getloadavg()[0]
            rows.append(row)
            print(
                f"{method:10s} {row['batching']:16s} {row['cpu_ms']:6.2f} CPU ms/request (of "
                f"{' '.join(f'{x:.2f}' for x in row['cpu_ms_passes'])})  "
                f"{row['wall_ms']:6.2f} wall ms/request  errors {row['errors']}  "
                f"load {row['load']:.2f}",
                flush=True,
            )
            if profile is not None:
                path = f"{args.profile}.{method}.b{batch}.txt"
                with open(path, "w") as handle:
                    stats = pstats.Stats(profile, stream=handle)
                    stats.sort_stats("cumulative").print_stats(60)
                print(f"# profile: {path}")
    return rows


def _table(rows: list[dict]) -> None:
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


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--methods", default="maniscope,diffusion,ricci")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--requests", type=positive_int, default=300, help="requests per cell")
    parser.add_argument("--queries", type=positive_int, default=300, help="SciFact test queries")
    parser.add_argument("--top-m", type=positive_int, default=100, help="documents per request")
    parser.add_argument("--first-stage", choices=["dense", "bm25"], default="dense")
    parser.add_argument("--max-batch", type=positive_int, default=64, help="micro-batched setting")
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--cache-dir", default="runs/load_serve_cache", help="server text cache")
    parser.add_argument(
        "--embedding-cache", help="corpus embeddings (default $GEORAG_CACHE/embeddings)"
    )
    parser.add_argument("--cache-queries", action="store_true", help="queries cached too")
    parser.add_argument("--atol", type=float, default=1e-4, help="score tolerance of parity")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per server start")
    parser.add_argument("--in-process", action="store_true", help="CPU per request, no sockets")
    parser.add_argument("--passes", type=positive_int, default=3, help="with --in-process")
    parser.add_argument("--profile", help="with --in-process: cProfile statistics to FILE.*")
    parser.add_argument("--quick", action="store_true", help="a smoke run (seconds)")
    args = parser.parse_args()
    if args.quick:
        args.methods, args.concurrency, args.requests = "maniscope", "1,4", 16
        args.queries, args.top_m = 8, 20
    methods = [m for m in args.methods.split(",") if m]
    levels = [int(c) for c in args.concurrency.split(",") if c]
    names = ("requests", "queries", "top_m", "first_stage", "max_batch", "max_wait_ms")
    config = {
        k: getattr(args, k) for k in (*names, "cache_queries", "atol", "in_process", "passes")
    }
    config.update(workers=1, server_threads=1, methods=methods, concurrency=levels)
    bench = start(args, config=config)

    t0 = time.perf_counter()
    workload, encoder = _workload(args)
    sizes = [len(orjson.dumps({"query": q, "texts": docs})) for q, docs in workload]
    print(
        f"# workload: {len(workload)} queries x {args.top_m} texts ({args.first_stage}; "
        f"{len({t for _, docs in workload for t in docs})} distinct, bodies of "
        f"{statistics.mean(sizes) / 1000:.0f} kB on average), queries "
        f"{'cached' if args.cache_queries else 'encoded per request'}; "
        f"built in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    if args.in_process:
        bench.finish(_in_process(args, methods, workload))
        return
    rows = _over_http(args, methods, levels, workload, encoder)
    _table(rows)
    bench.finish(rows)


if __name__ == "__main__":
    main()
