"""Latency of every georag method at B=1 and batched, quiet and next to a busy neighbour.

Real SciFact queries (test split), dense all-MiniLM-L6-v2 top-100 pools; each pool
reranker on its default pool (none 100, diffusion top-50, Maniscope 100, Ricci-Filtration
top-20, ``hyte_rescore``: HyTE-H rescoring of the top 50 with its document points cached
as the paper's index stores them; ``hyte_rescore-cold`` encodes them on every call), and
the corpus-level retrievers over the SciFact corpus (``hyte``: BM25 top-50 then Lorentz
from its persistent index; ``iso``, ``ppr_global``: the passage graph), fitted once
before the timing. Each configuration runs in a fresh process, so that OpenMP reads its
environment:

* latency: 1 thread and all usable cores (``OMP_WAIT_POLICY=PASSIVE``, georag's policy),
  quiet, then next to ``--neighbours`` CPU-bound processes that the benchmark starts and
  stops; B=1 (one query per call, median and p90 over ``--queries`` queries) and batched
  (``--batch`` queries per call, median and p90 over ``--repeats`` calls, ms per query).
  Peers in the same run, per query: networkx for diffusion and Maniscope, and
  GraphRicciCurvature 0.6.1 (``.venv-peers``, proc=1) for Ricci-Filtration, whose kept
  sets are compared with georag's.
* policy: batched PPR (the diffusion reranker), Maniscope and Ricci-Filtration, quiet and
  busy, under torch's defaults (all cores, ``OMP_WAIT_POLICY`` unset), 1 thread, all
  cores with ``OMP_WAIT_POLICY=PASSIVE``, and georag's policy (``apply_thread_policy()``:
  the free cores and PASSIVE), with the slowdown each setting suffers.

Default run (under 5 minutes on a quiet 2-core machine)::

    python scripts/bench/bench_latency.py --data-dir ../shared/data --out runs/bench_latency.json
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from georag.experiments.latency import build_inputs, child, run_child
from georag.perf.bench import bench_parser, non_negative_int, peer_python, positive_int, start
from georag.perf.latency_tables import (
    CORPUS_METHODS,
    METHODS,
    POLICIES,
    POLICY_METHODS,
    print_latency,
    print_peers,
    print_policy,
)
from georag.resources import DEFAULT_MODEL


def main() -> None:
    parser = bench_parser(__doc__, repeats=3)
    parser.add_argument(
        "--queries",
        type=positive_int,
        default=48,
        help="queries timed one at a time (B=1) per method",
    )
    parser.add_argument("--batch", type=positive_int, default=256, help="queries per batched call")
    parser.add_argument(
        "--neighbours",
        type=non_negative_int,
        default=1,
        help="CPU-bound neighbour processes in the busy condition",
    )
    parser.add_argument(
        "--peer-queries",
        type=positive_int,
        default=48,
        help="queries run through the networkx peers",
    )
    parser.add_argument(
        "--ricci-peer-graphs",
        type=non_negative_int,
        default=48,
        help="graphs run through GraphRicciCurvature, quiet (0: none)",
    )
    parser.add_argument(
        "--busy-ricci-peer-graphs",
        type=non_negative_int,
        default=12,
        help="graphs run through GraphRicciCurvature next to the neighbour",
    )
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"methods of the latency table (default: {','.join(METHODS)})",
    )
    parser.add_argument(
        "--sections", default="latency,policy", help="latency, policy or both (comma separated)"
    )
    parser.add_argument(
        "--policy-batch",
        type=positive_int,
        default=64,
        help="queries per batched call in the policy section",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    sections = set(args.sections.split(","))
    from georag.perf.threads import usable_cores

    cores = usable_cores()
    bench = start(
        args,
        config={
            "data": f"SciFact test, dense {DEFAULT_MODEL} top-100",
            "B=1 queries": args.queries,
            "batch": args.batch,
            "repeats": args.repeats,
            "neighbours": args.neighbours,
            "peer queries": args.peer_queries,
            "GraphRicciCurvature graphs": (
                f"{args.ricci_peer_graphs} quiet, {args.busy_ricci_peer_graphs} busy"
            ),
            "peers env": str(peer_python() or "absent (make peers)"),
            "child processes": "one per configuration, thread settings applied before torch loads",
            "methods": args.methods,
        },
    )
    results: dict = {"latency": {}, "policy": {}}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        pool_path = tmp / "pool.pt"
        corpus_methods = [m for m in args.methods.split(",") if m in CORPUS_METHODS]
        queries = build_inputs(args.data_dir, pool_path, corpus_methods)
        batch = min(args.batch, queries)
        base = {
            "pool": str(pool_path),
            "queries": min(args.queries, queries),
            "repeats": args.repeats,
            "peer_queries": min(args.peer_queries, queries),
        }
        latency = {}
        if "latency" in sections:
            for threads in sorted({1, cores}):
                for condition, neighbours in (("quiet", 0), ("busy", args.neighbours)):
                    graphs = (
                        args.ricci_peer_graphs
                        if condition == "quiet"
                        else args.busy_ricci_peer_graphs
                    )
                    spec = dict(
                        base,
                        threads=threads,
                        methods=args.methods.split(","),
                        batch=batch,
                        peers=threads == 1,
                        ricci_peer_graphs=graphs,
                        agreement=condition == "quiet",
                    )
                    latency[(threads, condition)] = run_child(
                        spec, script=__file__, neighbours=neighbours, tmp=tmp, env_wait="PASSIVE"
                    )
            print_latency(latency, cores, batch)
            print_peers(latency)
        policy = {}
        if "policy" in sections:
            pbatch = min(args.policy_batch, queries)
            for setting, (threads, wait) in POLICIES.items():
                spec = dict(
                    base,
                    threads=threads,
                    methods=list(POLICY_METHODS),
                    batch=pbatch,
                    queries=min(args.queries, 24, queries),
                )
                policy[setting] = tuple(
                    run_child(spec, script=__file__, neighbours=n, tmp=tmp, env_wait=wait)
                    for n in (0, args.neighbours)
                )
            print_policy(policy, pbatch)
    results["latency"] = {f"{t} threads, {c}": r for (t, c), r in latency.items()}
    results["policy"] = {s: {"quiet": q, "busy": b} for s, (q, b) in policy.items()}
    bench.finish(results)


if __name__ == "__main__":
    main()
