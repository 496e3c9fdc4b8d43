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
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from georag.perf.bench import (
    bench_parser,
    busy_neighbours,
    non_negative_int,
    peer_python,
    positive_int,
    start,
)
from georag.resources import DEFAULT_MODEL

ROOT = Path(__file__).resolve().parents[2]
POOL_METHODS = ("none", "diffusion", "maniscope", "ricci", "hyte_rescore", "hyte_rescore-cold")
# the learnable rerankers at their initial knobs (the fixed methods' defaults): inference
# costs the same at any knobs but learned_diffusion's damping (docs/methods/learned.md)
LEARNED_METHODS = ("learned_diffusion", "learned_maniscope", "learned_map", "learned_ricci")
CORPUS_METHODS = ("hyte", "iso", "ppr_global")
METHODS = POOL_METHODS + LEARNED_METHODS + CORPUS_METHODS
GOAL_MS = {"none": 1.0, "diffusion": 1.0, "maniscope": 1.0, "hyte_rescore": 1.0, "ricci": 3.0}
GOAL_MS.update({name: 1.0 for name in LEARNED_METHODS} | {"learned_ricci": 3.0})
POLICY_METHODS = ("diffusion", "maniscope", "ricci")
# name -> (threads, OMP_WAIT_POLICY); threads None: torch's default, "policy": georag's
POLICIES = {
    "torch default": (None, None),
    "1 thread": (1, "PASSIVE"),
    "all cores, PASSIVE": ("all", "PASSIVE"),
    "georag policy": ("policy", None),
}


# --------------------------------------------------------------------------- child side


def _rerankers(methods: list[str]) -> dict:
    from georag.rerank.hyte import HyTEReranker
    from georag.rerank.registry import make_reranker

    out = {}
    for name in methods:
        if name.startswith("hyte_rescore"):
            out[name] = out.get("hyte_rescore") or HyTEReranker()
        elif name in POOL_METHODS + LEARNED_METHODS:
            out[name] = make_reranker(name)
    return out


def _ricci_kept(batch, count: int, single: bool, backend: str = "auto"):
    """Georag's kept mask in graph-node order (nodes 1..20) for the first ``count`` queries."""
    import torch

    from georag.rerank.ricci_filtration import RicciFiltration, RicciFiltrationConfig

    ricci = RicciFiltration(RicciFiltrationConfig(backend=backend))
    cfg = ricci.config
    parts = [batch.slice(i, i + 1) for i in range(count)] if single else [batch.slice(0, count)]
    kept = []
    for part in parts:
        out = ricci.filtrate(part)
        pooled = torch.gather(part.mask, 1, out.slots)
        kept.append(
            pooled
            & (out.flow.lengths[:, 0, 1:] <= cfg.eta + cfg.eta_atol)
            & out.flow.adjacency[:, 0, 1:]
        )
    return torch.cat(kept).numpy()


def _peers(pool, spec: dict, bench) -> dict:
    """networkx and GraphRicciCurvature per query, in this process's condition."""
    from bench_ricci import run_peer  # imports torch: not before the thread policy

    from georag.eval.references import networkx_diffusion, networkx_maniscope
    from georag.eval.synthetic import top_pool
    from georag.rerank.ricci_filtration import query_graphs

    n = spec["peer_queries"]
    rows = {}

    def diffusion(i: int) -> object:
        slots, emb = top_pool(pool, i, 50)
        return networkx_diffusion(emb, pool.scores[i].numpy()[slots])

    def maniscope(i: int) -> object:
        _, emb = top_pool(pool, i, 100)
        return networkx_maniscope(pool.query[i].numpy(), emb)

    rows["diffusion"] = bench.time(diffusion, repeats=n, warmup=1).as_dict()
    rows["maniscope"] = bench.time(maniscope, repeats=n, warmup=1).as_dict()
    graphs = spec["ricci_peer_graphs"]
    if peer_python() is not None and graphs:
        adjacency = query_graphs(pool.slice(0, graphs))[0].numpy()
        ref = run_peer(adjacency, "flow", 1)
        seconds = sorted(ref["seconds"] * 1e3)
        from georag.perf.timing import Timing

        rows["ricci"] = Timing(tuple(seconds)).as_dict()
        if spec.get("agreement"):
            real = adjacency[:, 0, 1:]
            theirs = (ref["lengths"][:, 0, 1:] <= 1.0 + 1e-5) & real & ref["adjacency"][:, 0, 1:]
            runs = (("B=1", True, "auto"), ("batched", False, "auto"))
            for label, single, backend in (*runs, ("batched, tensor backend", False, "tensor")):
                ours = _ricci_kept(pool, graphs, single, backend)
                rows[f"ricci_agreement_{label}"] = {
                    "equal_share": float((ours == theirs)[real].mean()),
                    "kept_mean": [float(ours.sum(1).mean()), float(theirs.sum(1).mean())],
                    "graphs": graphs,
                }
    return rows


def child(spec_path: str) -> None:
    """Measure one configuration (threads, wait policy, condition) and write JSON."""
    import torch

    spec = json.loads(Path(spec_path).read_text())
    args = bench_parser(None).parse_args(["--device", "cpu"])
    if spec["threads"] == "policy":
        args.threads = None
    elif spec["threads"] == "all":
        from georag.perf.threads import usable_cores

        args.threads = usable_cores()
    else:
        args.threads = spec["threads"]
    if spec["threads"] is None:  # torch's defaults: no policy at all
        from georag.perf.bench import Bench
        from georag.perf.threads import ThreadSettings, usable_cores

        bench = Bench(
            script="bench_latency.py (child)",
            device="cpu",
            config={},
            threads=ThreadSettings(
                torch.get_num_threads(),
                "torch default",
                torch.get_num_interop_threads(),
                os.environ.get("OMP_WAIT_POLICY", "unset"),
                usable_cores(),
                os.getloadavg(),
            ),
        )
    else:
        bench = start(args)
    pool, corpus, queries = torch.load(spec["pool"], weights_only=False)
    big = pool.slice(0, spec["batch"])
    rerankers = _rerankers(spec["methods"])
    results: dict = {
        "threads": torch.get_num_threads(),
        "wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "methods": {},
    }
    q = spec["queries"]
    with torch.inference_mode():
        for name, reranker in rerankers.items():
            row = {}
            if name == "hyte_rescore-cold":

                def call(i: int, r=reranker) -> object:
                    r.clear_points()
                    return r(pool.slice(i, i + 1))

                row["b1"] = bench.time(call, repeats=min(q, 16), warmup=1).as_dict()
            else:
                if name == "hyte_rescore":
                    reranker(big)  # the index: document points computed ahead
                row["b1"] = bench.time(
                    lambda i, r=reranker: r(pool.slice(i, i + 1)), repeats=q, warmup=2
                ).as_dict()
                row["batched"] = bench.time(
                    lambda i, r=reranker: r(big),
                    repeats=spec["repeats"],
                    warmup=1,
                    per=big.batch_size,
                ).as_dict()
            results["methods"][name] = row
        k, several = pool.num_candidates, queries.slice(0, big.batch_size)
        for name in (m for m in spec["methods"] if m in CORPUS_METHODS):
            from georag.rerank.registry import make_reranker

            method = make_reranker(name).fit(corpus)  # the index, cached by the parent's fit

            def one(i: int, m=method) -> object:
                return m.retrieve(queries.slice(i, i + 1), top_k=k)

            def many(i: int, m=method) -> object:
                return m.retrieve(several, top_k=k)

            results["methods"][name] = {
                "b1": bench.time(one, repeats=q, warmup=2).as_dict(),
                "batched": bench.time(
                    many, repeats=spec["repeats"], warmup=1, per=big.batch_size
                ).as_dict(),
            }
        if spec.get("peers"):
            results["peers"] = _peers(pool, spec, bench)
    results["load_end"] = list(os.getloadavg())
    Path(spec["result"]).write_text(json.dumps(results))


# -------------------------------------------------------------------------- parent side


def run_child(
    spec: dict, *, neighbours: int, tmp: Path, env_wait: str | None, threads_env: bool = False
) -> dict:
    """Start a child with its own environment, next to ``neighbours`` busy processes."""
    spec = dict(spec, result=str(tmp / f"r{len(list(tmp.iterdir()))}.json"))
    path = tmp / f"s{len(list(tmp.iterdir()))}.json"
    path.write_text(json.dumps(spec))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "GEORAG_THREADS", "OMP_WAIT_POLICY")
    }
    if env_wait:
        env["OMP_WAIT_POLICY"] = env_wait
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with busy_neighbours(neighbours):
        subprocess.run(
            [sys.executable, __file__, "--child", str(path)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL if not threads_env else None,
        )
    return json.loads(Path(spec["result"]).read_text())


def build_inputs(data_dir: str | None, path: Path, corpus_methods: list[str]) -> int:
    """SciFact test pools (with texts), the corpus rows and the queries, saved for the
    children; each corpus method is fitted once so that its index is cached."""
    import torch

    from georag.batch import Corpus, QueryBatch
    from georag.data.beir import load_beir
    from georag.rerank.registry import make_reranker
    from georag.resources import default_cache_dir
    from georag.retrieval.candidates import FirstStage, FirstStageConfig

    dataset = load_beir("scifact", split="test", data_dir=data_dir)
    stage = FirstStage(dataset, FirstStageConfig(first_stage="dense", top_m=100))
    ids = list(dataset.queries)
    pool = stage.retrieve(ids, [dataset.queries[q] for q in ids], with_texts=True)
    docs = [dataset.corpus[d] for d in stage.units.doc_ids]
    corpus = Corpus(
        doc_ids=list(stage.units.doc_ids),
        titles=[d.title for d in docs],
        texts=[d.text for d in docs],
        embeddings=stage.embeddings,
        cache_dir=str(default_cache_dir()),
    )
    queries = QueryBatch(pool.query_ids, pool.query_texts, pool.query)
    for name in corpus_methods:
        make_reranker(name).fit(corpus)
    torch.save((pool, corpus, queries), path)
    return pool.batch_size


def fmt(row: dict | None, key: str = "median_ms") -> str:
    if not row or row.get(key) is None:
        return ""
    value = row[key]
    return f"{value:.4f}" if value < 0.1 else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def print_latency(table: dict, cores: int, batch: int) -> None:
    print(
        f"\n## Latency, ms per query (B=1: one query per call; B={batch}: batched; CPU: "
        f"process CPU time of the B=1 calls, all threads)\n"
    )
    print(
        f"| method | goal B=1, 1 thread | threads | condition | B=1 median | B=1 p90 | "
        f"B=1 CPU | B={batch} median | B={batch} p90 |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for name in METHODS:
        for (_, condition), res in table.items():
            row = res["methods"].get(name)
            if row is None:
                continue
            goal = GOAL_MS.get(name)
            print(
                f"| {name} | {'' if goal is None else f'< {goal:g} ms'} | {res['threads']} "
                f"| {condition} | {fmt(row['b1'])} | {fmt(row['b1'], 'p90_ms')} | "
                f"{fmt(row['b1'], 'cpu_median_ms')} | {fmt(row.get('batched'))} | "
                f"{fmt(row.get('batched'), 'p90_ms')} |"
            )


def print_peers(table: dict) -> None:
    peers = [(cond, res) for (_, cond), res in table.items() if "peers" in res]
    if not peers:
        return
    print("\n## Peers, per query, 1 thread, same run\n")
    print(
        "| method | peer | condition | peer median ms | peer p90 ms | georag B=1 | "
        "georag batched | speed-up B=1 | speed-up batched |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    names = {
        "diffusion": "networkx pagerank (complete graph, per query)",
        "maniscope": "numpy k-NN + networkx Dijkstra (per query)",
        "ricci": "GraphRicciCurvature 0.6.1 OTD, proc=1 (per graph)",
    }
    for cond, res in peers:
        for name, label in names.items():
            peer = res["peers"].get(name)
            ours = res["methods"].get(name)
            if peer is None or ours is None:
                continue
            b1, bb = ours["b1"]["median_ms"], ours.get("batched", {}).get("median_ms")
            p = peer["median_ms"]
            print(
                f"| {name} | {label} ({peer['samples']} queries) | {cond} | {fmt(peer)} | "
                f"{fmt(peer, 'p90_ms')} | {fmt(ours['b1'])} | {fmt(ours.get('batched'))} | "
                f"{p / b1:.1f}x | {'' if bb is None else f'{p / bb:.1f}x'} |"
            )
    for cond, res in peers:
        for label in ("B=1", "batched", "batched, tensor backend"):
            agree = res["peers"].get(f"ricci_agreement_{label}")
            if agree:
                print(
                    f"\nRicci-Filtration kept set ({label} calls, {cond}) equal to "
                    f"GraphRicciCurvature's on {100 * agree['equal_share']:.2f}% of the "
                    f"pooled candidates of {agree['graphs']} SciFact graphs (goal >= 99%); "
                    f"mean kept of 20: georag {agree['kept_mean'][0]:.2f}, "
                    f"GraphRicciCurvature {agree['kept_mean'][1]:.2f}"
                )


def print_policy(policy: dict, batch: int) -> None:
    print("\n## Thread policy: slowdown next to the busy neighbour(s), ms per query\n")
    print(
        f"| kernel | setting | threads quiet / busy | B=1 quiet | B=1 busy | B=1 slowdown | "
        f"B={batch} quiet | B={batch} busy | B={batch} slowdown |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name in POLICY_METHODS:
        for setting, (quiet, busy) in policy.items():
            q, b = quiet["methods"][name], busy["methods"][name]
            s1 = b["b1"]["median_ms"] / q["b1"]["median_ms"]
            sb = b["batched"]["median_ms"] / q["batched"]["median_ms"]
            print(
                f"| {name} | {setting} | {quiet['threads']} / {busy['threads']} | "
                f"{fmt(q['b1'])} | {fmt(b['b1'])} | {s1:.1f}x | {fmt(q['batched'])} | "
                f"{fmt(b['batched'])} | {sb:.1f}x |"
            )


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
                        spec, neighbours=neighbours, tmp=tmp, env_wait="PASSIVE"
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
                    run_child(spec, neighbours=n, tmp=tmp, env_wait=wait)
                    for n in (0, args.neighbours)
                )
            print_policy(policy, pbatch)
    results["latency"] = {f"{t} threads, {c}": r for (t, c), r in latency.items()}
    results["policy"] = {s: {"quiet": q, "busy": b} for s, (q, b) in policy.items()}
    bench.finish(results)


if __name__ == "__main__":
    main()
