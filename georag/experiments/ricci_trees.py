"""Sparse Ricci curvature of one graph by several georag source trees side by side (the
measurement of ``scripts/bench/bench_sparse_ricci_trees.py``).

Each tree's ``sparse_ollivier_ricci`` runs in its own process on ``PYTHONPATH=<tree>``
(:data:`RUNNER`, :func:`run_tree`), exact path, every edge, after a warm-up call;
:func:`compare_trees` runs every tree (and POT per edge on the last one) and gives the CPU
ms per edge and the largest curvature difference to the first tree. Graphs:
:func:`scifact_graph` (SciFact's exact k-NN graph) or :func:`saved_graph` (a graph file of
``scripts/bench/bench_scale.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

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
    """One tree's runs in its own process (:data:`RUNNER` on ``PYTHONPATH=tree``).

    Returns its JSON line (``runs``: ``[CPU s, wall s, load]`` per run, ``split``: the
    tree's last timing log line, ``source``: the file of the function that ran) and the
    curvatures ``(E,)``; raises ValueError (one line naming ``--trees``) when the process
    fails or ran code outside ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()), OMP_NUM_THREADS=str(threads))
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(graph), str(out), str(repeats), str(threads), method],
        env=env,
        cwd=out.parent,  # not the caller's folder, which "-c" would put first on sys.path
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise ValueError(f"--trees {tree}: {done.stderr.strip().splitlines()[-1]}")
    line = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(line["source"]).resolve().is_relative_to(tree.resolve()):
        raise ValueError(f"--trees {tree}: ran {line['source']} instead")
    return line, np.load(out)


def compare_trees(
    trees: list[Path],
    edges: np.ndarray,
    lengths: np.ndarray,
    n: int,
    *,
    repeats: int,
    threads: int,
    pot: bool = False,
    log=None,
) -> list[tuple[str, float, dict, float]]:
    """Every tree's exact curvature of one graph, each in its own process, side by side.

    Parameters
    ----------
    trees : list of Path
        georag source trees (each holds ``georag/``).
    edges : numpy.ndarray, shape (2, E)
    lengths : numpy.ndarray, shape (E,)
    n : int
        Nodes.
    repeats, threads : int
        Timed runs per tree, torch threads of each process.
    pot : bool
        Also the last tree with POT's network simplex per edge (``method="pot"``).
    log : callable, optional
        Called with each row as soon as its process is done.

    Returns
    -------
    list of (name, CPU ms per edge, JSON line, max abs difference to the first)
        One per run, ``name`` as ``"<tree> (<method>)"``.
    """
    runs = [(tree, "exact") for tree in trees]
    if pot:
        runs.append((trees[-1], "pot"))
    rows, first = [], None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.npz"
        np.savez(path, edges=edges, lengths=lengths, num_nodes=n)
        for k, (tree, method) in enumerate(runs):
            line, kappa = run_tree(tree, path, Path(tmp) / f"k{k}.npy", repeats, threads, method)
            first = kappa if first is None else first
            ms = 1e3 * float(np.median([r[0] for r in line["runs"]])) / edges.shape[1]
            rows.append((f"{tree} ({method})", ms, line, float(np.abs(kappa - first).max())))
            if log is not None:
                log(rows[-1])
    return rows
