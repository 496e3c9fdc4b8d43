"""Benchmark the batched graph kernels against per-query peers, side by side in one run.

Three sections (``--section all`` runs them in turn):

* ``ppr``: batched dense personalized PageRank on B complete graphs of N nodes (cosine
  weights clipped at 0, the DiffusionReranker's graphs) vs ``networkx.pagerank`` on each
  graph (graphs prebuilt; only the pagerank call is timed on the networkx side).
* ``maniscope``: the Maniscope reranker on B queries with M candidates (k-NN graph
  construction, shortest paths and scoring) vs a per-query numpy + networkx Dijkstra
  pipeline that also builds its graph, and the Maniscope paper's own optimized per-query pipeline
  (scipy cKDTree + CSR + csgraph Dijkstra) for reference.
* ``sparse``: sparse CSR PPR with Q personalization vectors at once on a graph of
  N nodes (random edges plus a ring, so no node is dangling) vs python-igraph's
  ``personalized_pagerank`` (prpack, as HippoRAG uses it) one query at a time, at
  networkx's default tolerance and at a tight one; accuracy against igraph is printed.

Per-query peers run on a subset of the queries; their time per query is extrapolated
(the script says so). Every figure is the median of ``--repeats`` runs.

Usage: ``python scripts/bench/bench_graph.py [--section all|ppr|maniscope|sparse] [--threads 1]``
"""

from __future__ import annotations

import networkx as nx

from georag.experiments.graph_bench import RESULTS, bench_maniscope, bench_ppr, bench_sparse
from georag.perf.bench import bench_parser, start


def main() -> None:
    parser = bench_parser(__doc__, repeats=3)
    parser.set_defaults(threads=1)  # the peers are single-threaded
    parser.add_argument("--section", choices=["all", "ppr", "maniscope", "sparse"], default="all")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--ppr-batch", type=int, default=1000)
    parser.add_argument("--ppr-nodes", type=int, default=50)
    parser.add_argument("--ppr-subset", type=int, default=100)
    parser.add_argument("--mani-batch", type=int, default=1000)
    parser.add_argument("--mani-cands", type=int, default=100)
    parser.add_argument("--mani-subset", type=int, default=100)
    parser.add_argument("--sparse-nodes", type=int, default=100_000)
    parser.add_argument("--sparse-edges", type=int, default=1_000_000)
    parser.add_argument("--sparse-queries", type=int, default=256)
    parser.add_argument("--sparse-subset", type=int, default=8)
    args = parser.parse_args()
    bench = start(
        args,
        config={"section": args.section, "networkx": nx.__version__, "medians of": args.repeats},
    )
    if args.section in ("all", "ppr"):
        bench_ppr(args, bench)
    if args.section in ("all", "maniscope"):
        bench_maniscope(args, bench)
    if args.section in ("all", "sparse"):
        bench_sparse(args, bench)
    bench.finish(RESULTS)


if __name__ == "__main__":
    main()
