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

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from georag.perf.bench import bench_parser, start

RUNNER = """
import inspect, json, logging, os, sys, time
import numpy as np, torch
torch.set_num_threads(int(sys.argv[4]))
try:
    from georag.geometry.ricci.sparse import sparse_ollivier_ricci
except ImportError:  # trees before the Ricci package
    from georag.geometry.sparse_ricci import sparse_ollivier_ricci
graph = np.load(sys.argv[1])
edges, lengths = torch.from_numpy(graph["edges"]), torch.from_numpy(graph["lengths"])
n = int(graph["num_nodes"])
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
for name in ("georag.geometry.ricci.sparse", "georag.geometry.sparse_ricci"):
    logging.getLogger(name).addHandler(handler)
    logging.getLogger(name).setLevel(logging.INFO)
method = sys.argv[5]
sparse_ollivier_ricci(edges[:, :10], lengths[:10], n, method=method)  # compiled and loaded
runs = []
for _ in range(int(sys.argv[3])):
    records.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    kappa = sparse_ollivier_ricci(edges, lengths, n, method=method)
    runs.append([time.process_time() - cpu, time.perf_counter() - wall, os.getloadavg()[0]])
np.save(sys.argv[2], kappa.numpy())
source = inspect.getsourcefile(sparse_ollivier_ricci)
print(json.dumps({"runs": runs, "split": records[-1] if records else "", "source": source}))
"""


def scifact_graph(data_dir) -> tuple[np.ndarray, np.ndarray, int]:
    """SciFact's exact k-NN graph (k = 10): edges (2, E), lengths ``1 - cos`` (E,), nodes."""
    from georag.data.beir import load_beir
    from georag.experiments.ricci_bench import knn_edges
    from georag.retrieval.candidates import corpus_embeddings
    from georag.retrieval.encoder import TextEncoder

    dataset = load_beir("scifact", split="test", data_dir=data_dir)
    texts = [doc.full_text for doc in dataset.corpus.values()]
    embeddings, _ = corpus_embeddings(texts, TextEncoder())
    edges, lengths = knn_edges(embeddings, 10)
    return edges.numpy(), lengths.numpy(), embeddings.shape[0]


def saved_graph(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """A graph file of bench_scale.py: edges (2, E), lengths (E,) float64, nodes."""
    graph = np.load(path)
    edges, lengths = graph["edges"], graph["lengths"].astype(np.float64)
    return edges, lengths, int(edges.max()) + 1


def run_tree(tree: Path, graph: Path, out: Path, repeats: int, threads: int, method: str):
    """One tree's runs in its own process; returns its JSON line and curvatures."""
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()), OMP_NUM_THREADS=str(threads))
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(graph), str(out), str(repeats), str(threads), method],
        env=env,
        cwd=out.parent,  # not the caller's folder, which "-c" would put first on sys.path
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"georag: error: --trees {tree}: {done.stderr.strip().splitlines()[-1]}")
    line = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(line["source"]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"georag: error: --trees {tree}: ran {line['source']} instead")
    return line, np.load(out)


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
    runs = [(tree, "exact") for tree in args.trees]
    if args.pot:
        runs.append((args.trees[-1], "pot"))
    rows, first = [], None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.npz"
        np.savez(path, edges=edges, lengths=lengths, num_nodes=n)
        for k, (tree, method) in enumerate(runs):
            line, kappa = run_tree(
                tree, path, Path(tmp) / f"k{k}.npy", args.repeats, bench.threads.threads, method
            )
            cpu = [r[0] for r in line["runs"]]
            first = kappa if first is None else first
            ms = 1e3 * float(np.median(cpu)) / count
            rows.append((f"{tree} ({method})", ms, line, float(np.abs(kappa - first).max())))
            print(f"# {tree} ({method}, {line['source']}): {line['split']}")
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
