"""The Ricci-flow benchmark of ``scripts/bench/bench_ricci.py``: the paper's query graphs of
real SciFact queries, georag's batched flow timed, GraphRicciCurvature's flow and parity
with it, and the peak memory of one large flow in a fresh process.

* :func:`scifact_graphs`: adjacency ``(B, 21, 21)`` of judged SciFact queries (query plus
  dense top-20, 50th-percentile edges);
* :func:`knn_edges`: the undirected k-NN graph of a corpus (the sparse-curvature
  benchmarks' graph);
* :func:`time_georag`: the batched flow at a thread count (Ricci-Filtration's setting,
  :data:`FILTER_FLOW`); :func:`peer_rows`: the peer's timings and the parity rows;
* :func:`peak_memory` and :func:`memory_child`: peak RSS (and CUDA peak) of one flow.

georag.perf sits below the layers timed here, so this lives in experiments.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from georag.perf.bench import Bench
from georag.perf.peers import run_peer
from georag.perf.timing import timed

# the flow as Ricci-Filtration runs it (uncertified warm-started Sinkhorn)
FILTER_FLOW = {"method": "sinkhorn", "accuracy": None}


def scifact_graphs(data_dir: str | None, splits: list[str], limit: int) -> torch.Tensor:
    """Adjacency (B, 21, 21) of the first ``limit`` judged SciFact queries."""
    from georag.data.beir import load_beir
    from georag.rerank.geometric.ricci_filtration import query_graphs
    from georag.retrieval.candidates import build_candidate_pool

    graphs = []
    for split in splits:
        dataset = load_beir("scifact", split=split, data_dir=data_dir)
        pool = build_candidate_pool(dataset, first_stage="dense", top_m=20)
        graphs.append(query_graphs(pool, top_m=20, quantile=0.5)[0])
        if sum(g.shape[0] for g in graphs) >= limit:
            break
    adjacency = torch.cat(graphs)[:limit]
    if adjacency.shape[0] < limit:
        raise ValueError(f"only {adjacency.shape[0]} SciFact graphs, asked for {limit}")
    return adjacency


def knn_edges(embeddings: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Undirected k-NN edges of a corpus by cosine (each once, i < j) and their lengths
    ``1 - cos``, the graph of the corpus-scale curvature benchmarks.

    Parameters
    ----------
    embeddings : torch.Tensor, shape (N, D)
    k : int
        Neighbours per node (the union of both directions is kept).

    Returns
    -------
    edges : torch.Tensor, shape (2, E), int64
    lengths : torch.Tensor, shape (E,), float64
    """
    x = torch.nn.functional.normalize(embeddings.double(), dim=1)
    n = x.shape[0]
    pairs = []
    for first in range(0, n, 1024):
        sims = x[first : first + 1024] @ x.T
        sims[torch.arange(sims.shape[0]), torch.arange(first, first + sims.shape[0])] = -2.0
        nbrs = sims.topk(k, dim=1).indices
        rows = torch.arange(first, first + sims.shape[0]).unsqueeze(1).expand_as(nbrs)
        pairs.append(torch.stack([rows.reshape(-1), nbrs.reshape(-1)]))
    edge = torch.cat(pairs, 1)
    edge = torch.stack([edge.min(0).values, edge.max(0).values])
    edge = torch.unique(edge, dim=1)
    lengths = (1.0 - (x[edge[0]] * x[edge[1]]).sum(1)).clamp_min(0.0)
    return edge, lengths


def time_georag(bench: Bench, adjacency: torch.Tensor, repeats: int, threads: int):
    """Median seconds of the whole batched flow at ``threads`` torch threads, and its result."""
    from georag.geometry.ricci import ricci_flow

    torch.set_num_threads(threads)
    adjacency = adjacency.to(bench.device)
    lengths = adjacency.float()
    ricci_flow(lengths[:8], adjacency[:8], iterations=1, **FILTER_FLOW)  # warm-up
    result = []
    timing = bench.time(
        lambda i: result.append(ricci_flow(lengths, adjacency, **FILTER_FLOW)),
        repeats=repeats,
        warmup=0,
    )
    torch.set_num_threads(bench.threads.threads)
    return timing.median / 1e3, result[-1]


def peer_rows(
    graphs: torch.Tensor,
    ours,
    one_ms: float,
    all_ms: float,
    cores: int,
    n_peer: int,
    n_default: int,
) -> tuple[list[tuple], list[tuple]]:
    """GraphRicciCurvature's flow on the same graphs, and its parity with georag's.

    Parameters
    ----------
    graphs : torch.Tensor, shape (B, N, N), bool
        The query graphs georag timed.
    ours : georag.geometry.ricci.common.RicciFlowResult
        georag's flow of ``graphs`` (``lengths (B, N, N)``).
    one_ms, all_ms : float
        georag's ms per query at 1 thread and at ``cores`` threads.
    cores : int
    n_peer, n_default : int
        Graphs run through the peer at ``proc=1`` and at its default ``proc``.

    Returns
    -------
    rows : list of (str, float, float)
        The peer's ms per query and its time over georag's faster configuration.
    parity : list of (str, object)
        Kept-set agreement, mean kept counts, and the largest error of georag's initial
        curvature at the default and the certified Sinkhorn settings.
    """
    from georag.geometry.ricci import SINKHORN_ACCURACY, ollivier_ricci
    from georag.rerank.geometric.ricci_filtration import RicciFiltrationConfig

    cfg = RicciFiltrationConfig()
    rows, parity = [], []
    adj = graphs.cpu().numpy()
    ref = run_peer(adj[:n_peer], "flow", 1)
    ref_ms = float(ref["seconds"].mean() * 1e3)
    best_ms = min(one_ms, all_ms)
    rows.append((f"GraphRicciCurvature proc=1 ({n_peer} graphs)", ref_ms, ref_ms / best_ms))
    ref_default = run_peer(adj[:n_default], "flow", 0)
    default_ms = float(ref_default["seconds"].mean() * 1e3)
    rows.append(
        (
            f"GraphRicciCurvature proc={cores} (default, {n_default} graphs)",
            default_ms,
            default_ms / best_ms,
        )
    )
    ours_len = ours.lengths[:n_peer, 0, 1:].cpu().numpy()
    real = adj[:n_peer, 0, 1:]
    kept_ours = (ours_len <= cfg.eta + cfg.eta_atol) & real
    kept_ref = (ref["lengths"][:, 0, 1:] <= cfg.eta + cfg.eta_atol) & real
    parity.append(("kept set equal (share of chunks)", float((kept_ours == kept_ref)[real].mean())))
    parity.append(
        (
            "mean kept of 20: georag / GraphRicciCurvature",
            f"{kept_ours.sum(1).mean():.2f} / {kept_ref.sum(1).mean():.2f}",
        )
    )
    initial = run_peer(adj[:n_peer], "curvature", 1)["curvature"]
    lengths = graphs[:n_peer].float()
    defaults = {
        name: param.default
        for name, param in inspect.signature(ollivier_ricci).parameters.items()
        if name in SINKHORN_ACCURACY
    }
    for label, kwargs in (
        (f"defaults {defaults}", {}),
        (f"SINKHORN_ACCURACY {SINKHORN_ACCURACY}", SINKHORN_ACCURACY),
    ):
        kappa = ollivier_ricci(lengths, graphs[:n_peer], **kwargs).double().numpy()
        err = np.abs(kappa - initial)[adj[:n_peer]]
        parity.append((f"initial curvature max abs error, {label}", f"{err.max():.2e}"))
    return rows, parity


def peak_memory(adjacency: torch.Tensor, device: str, *, script: str) -> dict[str, float]:
    """Run one flow over ``adjacency`` (B, N, N) in a fresh process (``python script
    --memory-child PATH --device DEVICE``, which calls :func:`memory_child`) and report its
    peak memory."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.pt"
        torch.save(adjacency, path)
        out = subprocess.run(
            [sys.executable, script, "--memory-child", str(path), "--device", device],
            check=True,
            capture_output=True,
            text=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))


def memory_child(path: str, device: str) -> None:
    """One flow of the adjacency saved at ``path``; prints its peak RSS as JSON."""
    from georag.geometry.ricci import ricci_flow

    adjacency = torch.load(path).to(device)
    lengths = adjacency.float()
    ricci_flow(lengths[:8], adjacency[:8], **FILTER_FLOW)  # load the kernels first
    base = _status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak (VmHWM) to the current RSS
    _, seconds = timed(lambda: ricci_flow(lengths, adjacency, **FILTER_FLOW))
    peak = _status_kb("VmHWM")
    report = {
        "rss_before_mb": base / 1024,
        "peak_rss_mb": peak / 1024,
        "flow_extra_mb": (peak - base) / 1024,
        "seconds": seconds,
    }
    if device.startswith("cuda"):
        report["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(report))
