"""Sparse curvature by several source trees (georag.experiments.ricci_trees, the measurement
of scripts/bench/bench_sparse_ricci_trees.py) on a small graph file: each tree runs its own
code, the same tree twice gives the same curvatures, POT agrees; the script refuses a folder
without georag and a bad graph file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench" / "bench_sparse_ricci_trees.py"


def small_graph(path: Path) -> None:
    gen = np.random.default_rng(0)
    points = gen.standard_normal((60, 4))
    near = np.argsort(((points[:, None] - points[None]) ** 2).sum(-1), axis=1)[:, 1:5]
    pairs = np.unique(np.sort(np.stack([np.repeat(np.arange(60), 4), near.ravel()], 1), 1), axis=0)
    lengths = np.linalg.norm(points[pairs[:, 0]] - points[pairs[:, 1]], axis=1)
    np.savez(path, edges=pairs.T.copy(), lengths=lengths)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--threads", "1", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )


def test_two_runs_of_one_tree_agree_with_each_other_and_with_pot(tmp_path):
    from georag.experiments.ricci_trees import compare_trees, saved_graph

    small_graph(tmp_path / "g.npz")
    edges, lengths, n = saved_graph(tmp_path / "g.npz")
    rows = compare_trees([ROOT, ROOT], edges, lengths, n, repeats=1, threads=1, pot=True)
    assert [row[0] for row in rows] == [f"{ROOT} (exact)", f"{ROOT} (exact)", f"{ROOT} (pot)"]
    assert rows[0][2]["source"] == str(ROOT / "georag/geometry/ricci/sparse.py")
    differences = [row[3] for row in rows]
    assert differences[:2] == [0.0, 0.0]
    assert differences[2] <= 1e-9


def test_a_folder_without_georag_and_a_bad_graph_are_refused(tmp_path):
    done = run("--graph", "scifact", "--trees", str(tmp_path))
    assert done.returncode == 2
    assert f"--trees {tmp_path}: no georag package" in done.stderr.strip().splitlines()[-1]
    (tmp_path / "bad.npz").write_bytes(b"not a graph")
    done = run("--graph", str(tmp_path / "bad.npz"))
    assert done.returncode == 2
    assert "--graph" in done.stderr.strip().splitlines()[-1]
