"""Sparse Ricci curvature per edge, whole graph, by several source trees of georag side by side.

Each ``--trees`` folder is a georag source tree (this checkout, or the ``git archive`` of
an older commit: ``git archive COMMIT georag | tar -x -C DIR``); its
``sparse_ollivier_ricci`` (``georag.geometry.ricci.sparse``, or the older module
``georag.geometry.sparse_ricci``) runs in its own process on ``PYTHONPATH=DIR``, exact
path, every edge of one graph, ``--repeats`` times after a warm-up call (numba compiled
and loaded). Printed per tree: process CPU and wall seconds per run, the median CPU ms
per edge, its ratio to the first tree, the log line of the time split where the tree
writes one, and the max abs curvature difference to the first tree; with ``--pot`` also
the last tree's distances with POT's network simplex per edge (``method="pot"``), the
reference of the exact path. Graphs: ``--graph scifact`` (SciFact's exact k-NN graph, k =
10, all-MiniLM-L6-v2 embeddings from the cache, as scripts/bench/bench_sparse_ricci.py
builds it) or a graph file of scripts/bench/bench_scale.py (``--work`` folder,
``ivf_graph_*.npz``)::

    mkdir /tmp/tree_old && git archive COMMIT georag | tar -x -C /tmp/tree_old
    python scripts/bench/bench_sparse_ricci_trees.py --threads 1 --data-dir ../shared/data \\
        --trees /tmp/tree_old . --repeats 3 --pot
    python scripts/bench/bench_sparse_ricci_trees.py --threads 1 \\
        --graph runs/bench_scale/ivf_graph_100000_scifact64_k10.npz --trees /tmp/tree_old .
"""

from __future__ import annotations

import os
from pathlib import Path

from georag.experiments.ricci_trees import compare_trees, saved_graph, scifact_graph
from georag.perf.bench import bench_parser, start


def main() -> None:
    parser = bench_parser(__doc__, repeats=3)
    parser.add_argument("--graph", default="scifact", help="scifact, or a bench_scale graph")
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(".")])
    parser.add_argument("--pot", action="store_true", help="also POT per edge (last tree)")
    args = parser.parse_args()
    for tree in args.trees:
        if not (tree / "georag" / "__init__.py").is_file():
            parser.error(f"--trees {tree}: no georag package in it")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    bench = start(args, config={"graph": args.graph, "trees": [str(t) for t in args.trees]})
    if args.graph == "scifact":
        edges, lengths, n = scifact_graph(args.data_dir)
    else:
        try:
            edges, lengths, n = saved_graph(Path(args.graph))
        except (OSError, ValueError, KeyError) as error:
            parser.error(f"--graph {args.graph}: not a bench_scale graph file ({error})")
    count = edges.shape[1]
    print(f"# graph {args.graph}: {n} nodes, {count} undirected edges")
    try:
        rows = compare_trees(
            args.trees,
            edges,
            lengths,
            n,
            repeats=args.repeats,
            threads=bench.threads.threads,
            pot=args.pot,
            log=lambda row: print(f"# {row[0][:-1]}, {row[2]['source']}): {row[2]['split']}"),
        )
    except ValueError as error:
        raise SystemExit(f"georag: error: {error}") from None
    base = rows[0][1]
    print(
        "\n| tree | CPU ms per edge (median) | ratio to the first | CPU s per run | wall s per run "
        "| load | max abs difference to the first |"
    )
    print("|---|---:|---:|---|---|---|---:|")
    for name, ms, line, diff in rows:
        cpu = ", ".join(f"{r[0]:.2f}" for r in line["runs"])
        wall = ", ".join(f"{r[1]:.2f}" for r in line["runs"])
        load = ", ".join(f"{r[2]:.1f}" for r in line["runs"])
        print(f"| {name} | {ms:.4f} | {base / ms:.2f}x | {cpu} | {wall} | {load} | {diff:.1e} |")
    bench.finish({name: {"cpu_ms_per_edge": ms, **line} for name, ms, line, _ in rows})


if __name__ == "__main__":
    main()
