"""Load test of ``georag serve`` over loopback: throughput, latency, server CPU, parity.

``--mode rerank`` (the default): the first ``--queries`` SciFact test queries (300: all of
them) with their dense MiniLM top-``--top-m`` texts, through georag's first stage, to
``POST /rerank``. Documents are cached, queries are not, as in traffic whose queries are
new: before the timing, the server's text cache (``--cache-dir``) receives the workload's
texts with the corpus embeddings the first stage holds, so no document is encoded while
timed, and the server encodes every request's query itself (``--cache-queries``: queries
cached too). ``--first-stage bm25`` takes the BM25 top-M and encodes only its texts (for
a machine without the corpus embeddings). Parity: in-process ``georag.Reranker``, same cache.

``--mode retrieve``: an index of the ``--dataset`` corpus less its last ``--adds x
--add-batch`` documents (built once; each server gets a copy), the data set's queries to
``POST /retrieve`` with ``top_k`` ``--top-k``; parity: the in-process
``georag.Retriever.retrieve``. Then, per server, updates under load: the held-out
documents added ``--add-batch`` at a time while ``--update-concurrency`` clients send
probe queries, every answer checked against the states of the index before and after
each update (``georag.serve.load_retrieve``).

Per method the server starts twice (one worker, one torch thread): ``--max-batch 1`` (no
micro-batching) and ``--max-batch B --max-wait-ms W``. At each concurrency, ``--requests``
requests go over keep-alive connections (after an untimed pass); each cell records
requests/s, p50 / p95 / p99 latency, the server's CPU milliseconds per request, its mean
request time and batch sizes (from ``/metrics``), errors and mismatches. Prints the
settings, threads and load average at the start and the end, a line per cell and the
Markdown rows of docs/serve.md; writes all of it to ``--out`` (JSON).

``--in-process`` (rerank): no sockets and no client; the requests go into the ASGI app in
this process, one at a time, then ``--max-batch`` at once, and the CPU milliseconds per
request (the median of ``--passes``) are printed; ``--profile FILE`` also writes cProfile
statistics. ``--quick``: a smoke run (rerank: maniscope, concurrency 1 and 4, 8 queries of
20 texts, 16 requests per cell; retrieve: the bundled demo corpus, 4 updates of 2).

    python scripts/bench/load_serve.py --data-dir ../shared/data --out runs/load_serve.json
    python scripts/bench/load_serve.py --mode retrieve --data-dir ../shared/data
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from georag.perf.bench import bench_parser, positive_int, start
from georag.retrieval.backends import BACKENDS
from georag.serve import load
from georag.serve.load_retrieve import (
    compare_retrieve,
    copy_index,
    retrieve_references,
    retrieve_workload,
    update_states,
    updates_under_load,
)

DEFAULTS = {
    "rerank": {"methods": "maniscope,diffusion,ricci", "concurrency": "1,4,16,64"},
    "retrieve": {"methods": "dense", "concurrency": "1,16,64"},
}


def _serve_args(method: str, batch: int, args) -> list[str]:
    out = ["--method", method, "--max-batch", str(batch), "--max-wait-ms", str(args.max_wait_ms)]
    return out + ["--max-queue", "4096", "--encoder-backend", args.encoder_backend]


def _cells(method, batch, served, requests, expected, compare, latency, args) -> list[dict]:
    """The cells of one server ``served`` (process, url) at each ``--concurrency``."""
    process, url = served
    asyncio.run(load.drive(url, requests[:64], 64))  # untimed: the first batches
    rows = []
    picks = [i % len(requests) for i in range(args.requests)]
    for concurrency in args.levels:
        cell = load.measure_cell(
            url,
            process.pid,
            [requests[i] for i in picks],
            lambda i, answer: compare(answer, expected[picks[i]], args.atol),
            concurrency,
            latency,
        )
        rows.append(
            {"method": method, "batching": load.batching_label(batch, args.max_wait_ms), **cell}
        )
        print(load.cell_line(rows[-1]), flush=True)
    return rows


def _rerank(args, methods) -> list[dict]:
    t0 = time.perf_counter()
    names = ("data_dir", "queries", "top_m", "first_stage", "cache_dir", "embedding_cache")
    names += ("cache_queries", "encoder_backend")
    workload, encoder = load.rerank_workload(*(getattr(args, n) for n in names))
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
        return _in_process(args, methods, workload)
    rows = []
    for method in methods:
        expected = load.rerank_references(
            method, workload, encoder, args.cache_dir, args.cache_queries
        )
        for batch in (1, args.max_batch):
            serve = _serve_args(method, batch, args) + ["--cache-dir", args.cache_dir]
            serve += ["--cache-queries"] if args.cache_queries else []
            with load.server(serve, args.timeout) as served:
                bodies = [orjson.dumps({"query": q, "texts": docs}) for q, docs in workload]
                requests = [load.request_bytes(served[1], b) for b in bodies]
                compare, latency = load.compare_rerank, "request_latency_seconds"
                rows += _cells(method, batch, served, requests, expected, compare, latency, args)
    return rows


def _retrieve(args, methods) -> tuple[list[dict], list[dict]]:
    work = Path(tempfile.mkdtemp(prefix="load_serve_"))
    held, t0 = args.adds * args.add_batch, time.perf_counter()
    where = (args.dataset, args.data_dir, held, work / "index", args.encoder_backend)
    queries, held_out = retrieve_workload(*where)
    queries = queries[: args.queries]
    groups = [held_out[i : i + args.add_batch] for i in range(0, held, args.add_batch)]
    probes = [d["text"] for d in held_out]
    print(
        f"# workload: {args.dataset}, {len(queries)} queries, top_k {args.top_k}, "
        f"{args.adds} updates of {args.add_batch} held-out documents; index built in "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    rows, updates = [], []
    for method in methods:
        expected = retrieve_references(work / "index", method, queries, args.top_k)
        states_at = copy_index(work / "index", work / "states")
        states = update_states(states_at, method, probes, groups, args.top_k)
        for batch in (1, args.max_batch):
            serve = _serve_args(method, batch, args)
            serve += ["--index", copy_index(work / "index", work / "served")]
            with load.server(serve, args.timeout) as served:
                url = served[1]
                bodies = [orjson.dumps({"query": q, "top_k": args.top_k}) for q in queries]
                requests = [load.request_bytes(url, b, "/retrieve") for b in bodies]
                latency = "retrieve_latency_seconds"
                rows += _cells(
                    method, batch, served, requests, expected, compare_retrieve, latency, args
                )
                figures = updates_under_load(
                    url, probes, groups, states, args.top_k, args.update_concurrency, args.atol
                )
            label = load.batching_label(batch, args.max_wait_ms)
            updates.append({"method": method, "batching": label, **figures})
            print(f"{method:10s} {label:16s} updates under load: {figures}", flush=True)
    return rows, updates


def _in_process(args, methods, workload) -> list[dict]:
    from georag.serve.config import ServeConfig

    rows = []
    for method in methods:
        for batch in (1, args.max_batch):
            config = ServeConfig(
                method=method,
                max_batch=batch,
                max_wait_ms=args.max_wait_ms,
                max_queue=4096,
                cache_dir=args.cache_dir,
                cache_queries=args.cache_queries,
                encoder_backend=args.encoder_backend,
            )
            profile = f"{args.profile}.{method}.b{batch}.txt" if args.profile else None
            figures = load.in_process(config, workload, args.requests, args.passes, profile)
            row = {"method": method, "batching": load.batching_label(batch, args.max_wait_ms)}
            rows.append({**row, **figures})
            print(
                f"{method:10s} {row['batching']:16s} {figures['cpu_ms']:6.2f} CPU ms/request "
                f"(of {' '.join(f'{x:.2f}' for x in figures['cpu_ms_passes'])})  "
                f"{figures['wall_ms']:6.2f} wall ms/request  errors {figures['errors']}"
                + (f"\n# profile: {profile}" if profile else ""),
                flush=True,
            )
    return rows


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--mode", choices=list(DEFAULTS), default="rerank")
    parser.add_argument("--methods", help="rerank: maniscope,diffusion,ricci; retrieve: dense")
    parser.add_argument("--concurrency", help="rerank: 1,4,16,64; retrieve: 1,16,64")
    parser.add_argument("--requests", type=positive_int, default=300, help="requests per cell")
    parser.add_argument("--queries", type=positive_int, default=300, help="queries of the set")
    parser.add_argument("--top-m", type=positive_int, default=100, help="rerank: texts each")
    parser.add_argument("--first-stage", choices=["dense", "bm25"], default="dense")
    parser.add_argument("--max-batch", type=positive_int, default=64, help="micro-batched setting")
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--encoder-backend", choices=BACKENDS, default="torch")
    parser.add_argument("--cache-dir", default="runs/load_serve_cache", help="server text cache")
    parser.add_argument("--embedding-cache", help="corpus embeddings (default $GEORAG_CACHE)")
    parser.add_argument("--cache-queries", action="store_true", help="queries cached too")
    parser.add_argument("--dataset", default="scifact", help="retrieve: the corpus and queries")
    parser.add_argument("--top-k", type=positive_int, default=10, help="retrieve: top_k")
    parser.add_argument("--adds", type=positive_int, default=20, help="retrieve: updates")
    parser.add_argument("--add-batch", type=positive_int, default=2, help="documents per update")
    parser.add_argument("--update-concurrency", type=positive_int, default=16)
    parser.add_argument("--atol", type=float, default=1e-4, help="score tolerance of parity")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per server start")
    parser.add_argument("--in-process", action="store_true", help="CPU per request, no sockets")
    parser.add_argument("--passes", type=positive_int, default=3, help="with --in-process")
    parser.add_argument("--profile", help="with --in-process: cProfile statistics to FILE.*")
    parser.add_argument("--quick", action="store_true", help="a smoke run (a minute)")
    args = parser.parse_args()
    defaults = DEFAULTS[args.mode]
    if args.quick:
        args.concurrency, args.requests, args.queries = "1,4", 16, 8
        args.methods, args.top_m = ("maniscope", 20) if args.mode == "rerank" else (None, 20)
        if args.mode == "retrieve":
            from georag.data.bundled import DEMO_DIR

            args.dataset, args.adds, args.update_concurrency = str(DEMO_DIR), 4, 4
    methods = [m for m in (args.methods or defaults["methods"]).split(",") if m]
    args.levels = [int(c) for c in (args.concurrency or defaults["concurrency"]).split(",") if c]
    names = ("mode", "requests", "queries", "max_batch", "max_wait_ms", "atol")
    names += ("top_m", "first_stage", "cache_queries", "in_process", "passes")
    if args.mode == "retrieve":
        names = (*names[:6], "dataset", "top_k", "adds", "add_batch", "update_concurrency")
    config = {k: getattr(args, k) for k in names}
    config.update(workers=1, server_threads=1, methods=methods, concurrency=args.levels)
    bench = start(args, config=config)
    if args.mode == "retrieve":
        rows, updates = _retrieve(args, methods)
        load.print_table(rows)
        bench.finish({"cells": rows, "updates": updates})
        return
    rows = _rerank(args, methods)
    if not args.in_process:
        load.print_table(rows)
    bench.finish(rows)


if __name__ == "__main__":
    main()
