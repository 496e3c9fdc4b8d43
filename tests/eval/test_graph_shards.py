"""Sharded sparse curvature and whole-graph PPR: one rank and two gloo ranks give the same
bytes, a killed run resumes to the same bytes, and oversized work is refused first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

pytest.importorskip("lightning")

from georag.eval.batch_predict import _array_shard, curvature_shards, ppr_shards, read_array
from georag.geometry.diffusion import personalized_pagerank
from georag.geometry.ricci.sparse import sparse_ollivier_ricci
from georag.retrieval.graph_store import save_graph

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def knn_graph(seed: int, n: int, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Undirected k-NN graph of random unit vectors (lengths 1 - cos), two clusters."""
    gen = np.random.default_rng(seed)
    x = gen.normal(size=(n, 16)) + 3.0 * (np.arange(n) % 2)[:, None]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sims = x @ x.T
    np.fill_diagonal(sims, -2.0)
    nbrs = np.argsort(-sims, axis=1)[:, :k]
    pairs = np.sort(np.stack([np.repeat(np.arange(n), k), nbrs.ravel()], 1), axis=1)
    pairs = np.unique(pairs, axis=0)
    return pairs.T.copy(), np.clip(1.0 - sims[pairs[:, 0], pairs[:, 1]], 0.0, None)


@pytest.fixture
def graph(tmp_path):
    edges, lengths = knn_graph(0, 60)
    return save_graph(tmp_path / "g", edges, lengths, 62), edges, lengths  # 2 isolated nodes


@pytest.mark.slow
def test_curvature_shards_equal_one_call_and_resume(graph, tmp_path):
    folder, edges, lengths = graph
    out = tmp_path / "kappa.npy"
    curvature_shards(folder, out, shards=3)
    whole = sparse_ollivier_ricci(torch.tensor(edges), torch.tensor(lengths), 62).numpy()
    assert read_array(out).tobytes() == whole.tobytes()
    first = out.read_bytes()
    # a lost shard (and output) is recomputed; the others are not touched
    _array_shard(out, 1).unlink()
    out.unlink()
    kept = _array_shard(out, 2).stat().st_mtime_ns
    curvature_shards(folder, out, shards=3)
    assert _array_shard(out, 2).stat().st_mtime_ns == kept
    assert out.read_bytes() == first


def test_ppr_shards_equal_the_same_blocks_in_one_process(graph, tmp_path):
    folder, edges, lengths = graph
    out = tmp_path / "ppr.npy"
    sources = np.arange(0, 60, 3)
    ppr_shards(folder, sources, out, shards=4)
    got = read_array(out)
    assert got.shape == (20, 62) and got.dtype == np.float32
    both = torch.cat([torch.tensor(edges), torch.tensor(edges).flip(0)], 1)
    w = torch.tensor(np.maximum(1.0 - lengths, 0.0)).float()
    weights = torch.sparse_coo_tensor(both, torch.cat([w, w]), (62, 62)).coalesce().to_sparse_csr()
    teleport = torch.zeros(62, 20)
    teleport[torch.tensor(sources), torch.arange(20)] = 1.0
    want = personalized_pagerank(weights, teleport, tol=1e-6).T.numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.allclose(got.sum(1), 1.0, atol=1e-5)


def test_oversized_work_is_refused_before_it_starts(graph, tmp_path):
    folder, _, _ = graph
    with pytest.raises(ValueError, match=r"sparse curvature of \d+ edges .* needs about"):
        curvature_shards(folder, tmp_path / "k.npy", memory_limit=1000)
    with pytest.raises(ValueError, match="PPR of 4 sources .* needs about"):
        ppr_shards(folder, np.arange(4), tmp_path / "p.npy", memory_limit=1000)
    assert not (tmp_path / "k.npy.shards").exists()


def _script(folder, out, kernel, *extra):
    return [
        sys.executable,
        os.path.join(REPO, "scripts", "tools", "graph_shards.py"),
        "--graph",
        str(folder),
        "--kernel",
        kernel,
        "--out",
        str(out),
        "--sources",
        "40",
        *extra,
    ]


def _env():
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO)


@pytest.mark.slow  # three Lightning launches, one of them with two processes: about a minute
def test_two_gloo_ranks_equal_one_rank_byte_for_byte(tmp_path):
    edges, lengths = knn_graph(1, 300, 5)
    folder = save_graph(tmp_path / "g", edges, lengths, 300)
    for kernel in ("curvature", "ppr"):
        outs = {}
        for devices, strategy in (("1", "auto"), ("2", "ddp")):
            out = tmp_path / f"{kernel}-{devices}.npy"
            extra = ["--shards", "5", "--devices", devices, "--strategy", strategy]
            subprocess.run(
                _script(folder, out, kernel, *extra),
                check=True,
                env=_env(),
                cwd=tmp_path,
                capture_output=True,
                timeout=600,
            )
            outs[devices] = out.read_bytes()
        assert outs["1"] == outs["2"], kernel


@pytest.mark.slow  # a run killed after its first shard, then resumed: about a minute
def test_a_killed_run_resumes_to_the_same_bytes(tmp_path):
    edges, lengths = knn_graph(2, 1500, 8)
    folder = save_graph(tmp_path / "g", edges, lengths, 1500)
    reference = tmp_path / "ref.npy"
    curvature_shards(folder, reference, shards=12)
    out = tmp_path / "killed.npy"
    command = _script(folder, out, "curvature", "--shards", "12")
    proc = subprocess.Popen(command, env=_env(), cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 300
    while not _array_shard(out, 0).exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole launch: the rank dies mid-run
    proc.wait()
    done = sorted(p.name for p in _array_shard(out, 0).parent.glob("shard-*.npy"))
    assert 0 < len(done) < 12 and not out.exists()
    subprocess.run(command, check=True, env=_env(), cwd=tmp_path, capture_output=True, timeout=600)
    assert out.read_bytes() == reference.read_bytes()
