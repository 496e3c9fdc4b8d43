"""Where a reranker's B=1 time goes: top ATen ops and a per-function breakdown.

Runs one method on real SciFact queries (dense all-MiniLM-L6-v2 top-100 pools), one query
per call, and prints

* the torch.profiler table of the top ops by self CPU time, with op calls per query;
* CPU time per query of the functions the method calls (thread CPU time, so that a
  loaded machine's waiting is left out), self time and calls per query; the functions
  are wrapped from outside, nothing in the library changes;
* for ``ricci``, what-if timings of solver-side changes on the same graphs (see
  ``--what-if``).

Usage::

    python scripts/bench/profile_latency.py --data-dir ../shared/data --method ricci
"""

from __future__ import annotations

import collections
import importlib
import time

import torch

from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed

# method -> functions to break the time down by, as "module:attribute"
FUNCTIONS = {
    "ricci": [
        "georag.rerank.ricci_filtration:query_graphs",
        "georag.rerank.ricci_filtration:ricci_flow",
        "georag.geometry.ricci:_check_graph",
        "georag.geometry.ricci.common:largest_component",
        "georag.geometry.ricci.common:_edge_index",
        "georag.geometry.ricci.solvers:_neighbourhoods",
        "georag.geometry.ricci.solvers:_edge_problems",
        "georag.geometry.ricci.solvers:_average_transport",
        "georag.geometry.ricci.flow:_curvature",
        "georag.geometry.ricci.common:shortest_paths",
        "georag.geometry.ricci.solvers:_Graphs.shortest_paths",
        "georag.geometry.ricci.solvers:_node_measures",
        "georag.geometry.ricci.solvers:_sinkhorn_epsilon",
        "georag.geometry.ricci.solvers:_warm_start",
        "georag.geometry.ricci.solvers:sinkhorn_shared_cost",
        "georag.geometry.ricci.solvers:_shared_cost_sinkhorn",
        "georag.geometry.ricci.solvers:sinkhorn_shared_cost_scaled",
        "georag.geometry.ricci.flow:_scatter_edges",
        "georag.geometry.transport:_check_marginals",
        "georag.geometry.transport:_check_epsilon",
    ],
    "diffusion": [
        "georag.rerank.diffusion:cosine_gram",
        "georag.rerank.diffusion:personalized_pagerank",
        "georag.rerank.diffusion:top_k_mask",
    ],
    "maniscope": [
        "georag.rerank.maniscope:top_m_mask",
        "georag.rerank.maniscope:knn_graph",
        "georag.rerank.maniscope:single_source_shortest_paths",
    ],
}


class Breakdown:
    """Wraps module attributes to accumulate thread CPU time, self and total."""

    def __init__(self, targets: list[str]) -> None:
        self.totals = collections.defaultdict(lambda: [0.0, 0.0, 0])
        self.stack: list[float] = []
        self.absent = []
        for target in targets:
            module_name, path = target.split(":")
            owner = importlib.import_module(module_name)
            *parents, attr = path.split(".")  # "Class.method" wraps a method
            for name in parents:
                owner = getattr(owner, name, None)
            if owner is None or not hasattr(owner, attr):  # the solver moves: say what is gone
                self.absent.append(target)
                continue
            setattr(owner, attr, self._wrap(getattr(owner, attr), path))

    def _wrap(self, fn, label: str):
        def wrapper(*args, **kwargs):
            begin = time.thread_time()
            self.stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.thread_time() - begin
                inner = self.stack.pop()
                entry = self.totals[label]
                entry[0] += spent - inner
                entry[1] += spent
                entry[2] += 1
                if self.stack:
                    self.stack[-1] += spent

        return wrapper


def op_table(run, queries: int, rows: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run(queries)
    events = prof.key_averages()
    total_calls = sum(e.count for e in events)
    print(f"\n## Top ATen ops by self CPU time ({queries} queries, B=1)\n")
    print(f"ATen op calls per query: {total_calls / queries:.0f}\n")
    print("| op | self CPU ms/query | share | calls/query |")
    print("|---|---:|---:|---:|")
    total = sum(e.self_cpu_time_total for e in events)
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:rows]:
        print(
            f"| {e.key} | {e.self_cpu_time_total / 1e3 / queries:.3f} | "
            f"{100 * e.self_cpu_time_total / total:.1f}% | {e.count / queries:.1f} |"
        )


def what_if_ricci(pool, queries: int) -> None:
    """Solver-side changes timed on the same B=1 graphs (thread CPU time per query)."""
    from georag.geometry.graphs import shortest_paths
    from georag.rerank.ricci_filtration import query_graphs

    def cpu_ms(fn, repeats: int) -> float:
        fn()
        begin = time.thread_time()
        for _ in range(repeats):
            fn()
        return (time.thread_time() - begin) * 1e3 / repeats

    adjacency = query_graphs(pool.slice(0, 1))[0]
    lengths = adjacency.float()
    n = lengths.shape[1]
    eye = torch.eye(n)

    def min_plus_squaring() -> torch.Tensor:
        dist = lengths.masked_fill(~adjacency, torch.inf).masked_fill(eye.bool(), 0.0)
        for _ in range(max(1, (n - 1).bit_length())):
            dist = (dist.unsqueeze(3) + dist.unsqueeze(1)).amin(2)
        return dist

    assert torch.equal(min_plus_squaring(), shortest_paths(lengths, adjacency))
    step = adjacency.float()

    def three_hop() -> torch.Tensor:
        closed = step + eye
        return torch.bmm(torch.bmm(closed, step), closed) > 0

    u = torch.rand(1, 100, n, dtype=torch.float64)
    kernel = torch.rand(1, n, n, dtype=torch.float64)
    a = b = torch.full((1, 100, n), 1.0 / n, dtype=torch.float64)

    def sinkhorn_block(u=u) -> torch.Tensor:
        for _ in range(10):
            v = b / torch.bmm(u, kernel)
            u = a / torch.bmm(v, kernel.transpose(1, 2))
        return u

    rows = [
        (
            "Floyd-Warshall, 21 pivots (shortest_paths, with its checks)",
            cpu_ms(lambda: shortest_paths(lengths, adjacency), 50),
        ),
        (
            "min-plus squaring, 5 products of (N, N, N) (same result, checked)",
            cpu_ms(min_plus_squaring, 50),
        ),
        ("three-hop reach (2 bmm + eye), recomputed every flow step", cpu_ms(three_hop, 200)),
        ("10 Sinkhorn iterations, E=100 problems, eager", cpu_ms(sinkhorn_block, 50)),
    ]
    try:
        compiled = torch.compile(sinkhorn_block, dynamic=False)
        _, compile_s = timed(compiled)
        rows.append(
            (
                f"10 Sinkhorn iterations, torch.compile (compiled in {compile_s:.0f} s)",
                cpu_ms(compiled, 50),
            )
        )
    except Exception as exc:  # no compiler on this machine: say so
        rows.append((f"torch.compile unavailable: {type(exc).__name__}", float("nan")))
    print(f"\n## What-if: solver pieces on one SciFact graph (N={n}), CPU ms per call\n")
    print("| piece | CPU ms |")
    print("|---|---:|")
    for label, ms in rows:
        print(f"| {label} | {ms:.3f} |")


def main() -> None:
    parser = bench_parser(__doc__, repeats=20)
    parser.add_argument("--method", default="ricci", help="reranker name (registry)")
    parser.add_argument("--rows", type=int, default=15, help="ops shown in the table")
    parser.add_argument(
        "--what-if",
        action="store_true",
        help="ricci: also time solver-side alternatives (torch.compile too)",
    )
    args = parser.parse_args()
    bench = start(args, config={"method": args.method, "queries (B=1)": args.repeats})

    from georag.data.beir import load_beir
    from georag.rerank.registry import make_reranker
    from georag.retrieval.candidates import build_candidate_pool

    dataset = load_beir("scifact", split="test", data_dir=args.data_dir)
    pool = build_candidate_pool(dataset, top_m=100)
    reranker = make_reranker(args.method)

    def run(count: int) -> None:
        for i in range(count):
            reranker(pool.slice(i, i + 1))

    with torch.inference_mode():
        run(3)  # warm-up
        wall = bench.time(lambda i: reranker(pool.slice(i, i + 1)), repeats=args.repeats)
        op_table(run, args.repeats, args.rows)
        breakdown = Breakdown(FUNCTIONS.get(args.method, []))
        begin = time.thread_time()
        run(args.repeats)
        cpu = (time.thread_time() - begin) * 1e3 / args.repeats
        print(f"\n## CPU time per query by function ({args.method}, B=1)\n")
        print(
            f"wall median {wall.median:.3f} ms, p90 {wall.p90:.3f} ms; thread CPU "
            f"{cpu:.3f} ms per query (wrappers included)\n"
        )
        if breakdown.absent:
            print(f"(not in this version: {', '.join(breakdown.absent)})\n")
        print("| function | self CPU ms/query | total CPU ms/query | calls/query |")
        print("|---|---:|---:|---:|")
        for label, (own, total, calls) in sorted(
            breakdown.totals.items(), key=lambda kv: -kv[1][0]
        ):
            print(
                f"| {label} | {own * 1e3 / args.repeats:.3f} | "
                f"{total * 1e3 / args.repeats:.3f} | {calls / args.repeats:.1f} |"
            )
        if args.what_if and args.method == "ricci":
            what_if_ricci(pool, args.repeats)
    bench.finish({"wall": wall.as_dict(), "cpu_ms_per_query": cpu})


if __name__ == "__main__":
    main()
