"""Entity-passage graph and HippoRAG 2 retrieval: index cost, B=1 latency, batched throughput.

Usage: ``python scripts/bench/bench_entity_graph.py --data-dir ../shared/data [--threads 1]
[--sets musique_qa100] [--extractors title ngram] [--queries 200] [--quick] [--out X.json]``

1. Index cost per corpus (``--sets``) and extractor set (``--extractors``), each case in a
   fresh child process (peak RSS = its own ``VmHWM``; no graph cache, built in a temp
   folder): the graph build without the encoder (wall, process CPU), the phrase encoding +
   synonym edges (the build with the MiniLM encoder minus the build without), peak RSS,
   phrases / passage-phrase edges / synonym edges, the folder size of ``graph.save``.
2. ``--full-index`` (on by default; 2wikimultihopqa_hipporag only, when in ``--sets``): the
   default retriever's whole index from scratch in a child (passage embeddings with an
   empty cache, the graph with the encoder, CSR and BM25): wall time and peak RSS.
3. B=1 latency of the default configuration (``entity_multihop.DEFAULT``) fitted on the
   prepared corpus (embedding and graph caches allowed here), from held query embeddings
   (no query encoding), over the first ``--queries`` questions after a warm-up: the whole
   retrieval, its reset step (dense + linking), georag's PPR step, and HippoRAG 2's own call
   (python-igraph prpack, single-threaded) on the same graph and reset vector; max |georag
   PPR - prpack|.
4. Batched: all questions in one ``retrieve(..., top_k=10)`` call, median of ``--repeats``.
5. Query encoding with MiniLM at B=1 (median over ``--encode-queries``), for the end-to-end.
6. georag's PPR paths beside prpack on the same graph and reset vectors: the power iteration
   (``retriever.ppr``) and ``PPRSolver`` (a sparse LU built once from the retriever's graph),
   B=1 median over ``--queries`` and batched (``--ppr-batch`` resets per call) queries/s.
   ``--ppr-only``: this section alone (no index cost, no sections 3-5).

Retrieval runs on the CPU; ``--device`` places the encoder. ``--quick``: 20 questions, the
title extractor only, one repeat, no full index.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from georag.experiments.entity_bench import (
    DEFAULT_EXTRACTORS,
    SETS,
    encode_latency,
    latency,
    ppr_solvers,
    run_child,
    throughput,
)
from georag.experiments.entity_multihop import DEFAULT, prepare
from georag.perf.bench import bench_parser, data_root, positive_int, start
from georag.perf.timing import timed
from georag.rerank.registry import make_reranker
from georag.resources import default_cache_dir
from georag.retrieval.encoder import TextEncoder

FULL_SET = "2wikimultihopqa_hipporag"
GOAL_INDEX = "goal: under 5 minutes (index), under 60 s (graph alone)"
GOAL_B1 = "goal: under 20 ms per query beyond the query encoding"
GOAL_BATCH = "goal: over 1,000 queries/s"
GOAL_PPR = "goal: solver B=1 <= prpack; batched solver >= 1,000 queries/s"


def ppr_section(name, retriever, queries, args) -> dict:
    r = ppr_solvers(retriever, queries, num_queries=args.queries, batch=args.ppr_batch)
    print(
        f"\n## 6. {name}: PPR paths, {r['nodes']} nodes, {r['igraph_edges']} undirected edges; "
        f"solver built in {r['setup_s'] * 1e3:.1f} ms ({r['lu_fill']} LU entries)"
    )
    print(f"  {'path':<34} {'B=1 median ms':>13} {'p90':>8} {'cpu med':>8} {'batched q/s':>11}")
    for key, label in (
        ("power", "georag power iteration (ppr)"),
        ("solver", "georag PPRSolver (sparse LU)"),
        ("prpack", "igraph prpack (one call a query)"),
    ):
        t, q = r["b1"][key], r["batched"][key]["queries_per_s"]
        print(
            f"  {label:<34} {t['median_ms']:13.3f} {t['p90_ms']:8.3f} "
            f"{t['cpu_median_ms']:8.3f} {q:11.0f}"
        )
    diff = ", ".join(f"{k} {v:.2e}" for k, v in r["max_abs_diff"].items())
    print(
        f"  B=1 over {r['queries']} queries, batched B={r['batch']} (median of {r['repeats']}); "
        f"max |x - prpack|: {diff}   [{GOAL_PPR}]"
    )
    return r


def index_section(args, data_dir, threads, device) -> list[dict]:
    print("\n## 1. index cost (each case in its own process; no cache)")
    print(
        f"{'set':<25} {'extractors':<12} {'build s':>8} {'cpu s':>7} {'enc+syn s':>9} "
        f"{'spacy ld':>8} {'phrases':>8} {'edges':>8} {'synonyms':>8} {'MiB disk':>8} "
        f"{'RSS MiB':>8} {'RSS build':>9}"
    )
    rows = []
    for name in args.sets:
        for extractors in args.extractors:
            r = run_child(
                "index",
                threads=threads,
                name=name,
                extractors=extractors.split(","),
                data_dir=str(data_dir),
                device=device,
            )
            rows.append({"dataset": name, "extractors": extractors, **r})
            if "error" in r:
                print(f"{name:<25} {extractors:<12} error: {r['error']}", flush=True)
                continue
            print(
                f"{name:<25} {extractors:<12} {r['build_s']:8.2f} {r['build_cpu_s']:7.2f} "
                f"{r['encode_synonyms_s']:9.2f} {r.get('spacy_load_s', float('nan')):8.2f} "
                f"{r['phrases']:8d} {r['passage_phrase_edges']:8d} {r['synonym_edges']:8d} "
                f"{r['disk_mib']:8.2f} {r['rss_peak_mib']:8.0f} {r['rss_build_mib']:9.0f}",
                flush=True,
            )
    print(
        "  build = extraction + assembly without the encoder; enc+syn = build with MiniLM "
        "minus build without; RSS MiB = peak of the child (torch, data and model included), "
        "RSS build = its peak before the encoder loads"
    )
    print(f"  [{GOAL_INDEX}]")
    return rows


def full_index_section(data_dir, threads, device) -> dict:
    print(f"\n## 2. whole index of {FULL_SET} from scratch ({DEFAULT[0]} {DEFAULT[1]})")
    r = run_child(
        "full_index", threads=threads, name=FULL_SET, data_dir=str(data_dir), device=device
    )
    if "error" in r:
        print(f"  error: {r['error']}")
        return r
    print(
        f"  {r['passages']} passages: passage embeddings {r['encode_passages_s']:.1f} s, "
        f"graph with encoder {r['graph_s']:.1f} s, fit (CSR + BM25) {r['fit_s']:.2f} s; "
        f"total {r['total_s']:.1f} s (+ model load {r['model_load_s']:.1f} s); "
        f"peak RSS {r['rss_peak_mib']:.0f} MiB   [{GOAL_INDEX}]"
    )
    return r


def retrieval_section(name, args, data_dir, encoder) -> dict:
    p = prepare(name, data_dir, encoder, default_cache_dir())
    method, options = DEFAULT
    retriever, fit_s = timed(lambda: make_reranker(method, {method: options}).fit(p.corpus))
    if args.ppr_only:
        return {"ppr": ppr_section(name, retriever, p.queries, args)}
    config = retriever.config
    lat = latency(retriever, p.queries, num_queries=args.queries)
    batch = throughput(retriever, p.queries, repeats=args.repeats)
    enc = encode_latency(encoder, p.queries.texts, num=args.encode_queries)
    print(
        f"\n## 3-5. {name}: {len(p.corpus.doc_ids)} passages, {lat['nodes']} nodes, "
        f"{lat['igraph_edges']} undirected edges; {method} {options or '(config defaults)'}; "
        f"fit {fit_s:.1f} s (graph cache allowed)"
    )
    print(f"  config: {config}")
    print(f"  B=1 over {lat['queries']} queries (warm-up {lat['warmup']}), ms per query:")
    print(f"  {'step':<44} {'median':>8} {'p90':>8} {'cpu med':>8}")
    for key, label in (
        ("retrieve", "whole retrieval (no query encoding)"),
        ("reset", "  dense + linking + reset vector"),
        ("ppr", "  georag PPR step (retriever.ppr)"),
        ("prpack", "igraph prpack, same graph and reset"),
    ):
        t = lat[key]
        print(f"  {label:<44} {t['median_ms']:8.3f} {t['p90_ms']:8.3f} {t['cpu_median_ms']:8.3f}")
    print(
        f"  {'query encoding (MiniLM, B=1, ' + str(enc['samples']) + ' queries)':<44} "
        f"{enc['median_ms']:8.3f} {enc['p90_ms']:8.3f} {enc['cpu_median_ms']:8.3f}"
    )
    print(
        f"  end-to-end median {lat['retrieve']['median_ms'] + enc['median_ms']:.2f} ms; "
        f"max |georag PPR - prpack| = {lat['max_abs_diff']:.2e} ({lat['ppr_dtype']}), "
        f"{lat['max_abs_diff_float64']:.2e} (same step on a float64 copy); "
        f"igraph graph built once in {lat['igraph_build_s']:.2f} s   [{GOAL_B1}]"
    )
    print(
        f"  batched, B={batch['queries']}: {batch['queries_per_s']:.0f} queries/s "
        f"(median of {batch['repeats']})   [{GOAL_BATCH}]"
    )
    return {
        "config": asdict(config),
        "fit_s": fit_s,
        "latency": lat,
        "throughput": batch,
        "query_encoding": enc,
        "ppr": ppr_section(name, retriever, p.queries, args),
    }


def main() -> None:
    parser = bench_parser(__doc__, repeats=3)
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument(
        "--extractors",
        nargs="+",
        default=list(DEFAULT_EXTRACTORS),
        help="extractor sets, each comma-separated (default: %(default)s)",
    )
    parser.add_argument("--queries", type=positive_int, default=200, help="B=1 questions")
    parser.add_argument(
        "--encode-queries",
        type=positive_int,
        default=50,
        help="questions of the B=1 query-encoding figure",
    )
    parser.add_argument(
        "--full-index",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"whole index of {FULL_SET} from scratch (when in --sets)",
    )
    parser.add_argument("--skip-index", action="store_true", help="no index-cost section")
    parser.add_argument("--ppr-batch", type=positive_int, default=64, help="resets per call")
    parser.add_argument("--ppr-only", action="store_true", help="section 6 alone")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20 questions, title extractor only, 1 repeat, no full index",
    )
    args = parser.parse_args()
    if args.quick:
        args.queries, args.encode_queries = min(args.queries, 20), min(args.encode_queries, 20)
        args.extractors, args.repeats, args.full_index = ["title"], 1, False
    if args.ppr_only:
        args.skip_index, args.full_index = True, False
    data_dir = data_root(args)
    keys = "sets extractors queries encode_queries full_index quick repeats ppr_batch ppr_only"
    config = {k: getattr(args, k) for k in keys.split()}
    bench = start(args, config={**config, "default": DEFAULT, "retrieval device": "cpu"})
    device, threads = bench.device, bench.threads.threads
    results = {"config": config, "default": DEFAULT}
    if not args.skip_index:
        results["index"] = index_section(args, data_dir, threads, device)
    if args.full_index and FULL_SET in args.sets:
        results["full_index"] = full_index_section(data_dir, threads, device)
    encoder = TextEncoder(device=device, show_progress=False)
    results["retrieval"] = {n: retrieval_section(n, args, data_dir, encoder) for n in args.sets}
    bench.finish(results)


if __name__ == "__main__":
    main()
