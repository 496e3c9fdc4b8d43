"""Ricci-flow benchmark: georag's batched flow against GraphRicciCurvature 0.6.1.

Builds the paper's graphs (query + dense top-20, 50th-percentile edges, forced query
edges, unit lengths; N = 21) for real SciFact queries, runs the full 20-iteration
normalized flow with georag (batched, default Sinkhorn settings) and with
GraphRicciCurvature (``method="OTD"``, ``proc=1`` and its default ``proc=cpu_count()``)
on the same graphs in one run, and prints ms/query, the speed ratio, the agreement of
the kept sets (final query-edge length <= 1) and the curvature error on the initial
graphs; then the peak memory of one B=1024 flow in a fresh process::

    python scripts/bench/bench_ricci.py --batch 256 --peer-graphs 256

The peer runs in ``.venv-peers`` (``make peers``); without it only georag is timed.
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from georag.perf.bench import Bench, bench_parser, peer_python, start
from georag.perf.timing import timed
from georag.resources import DEFAULT_MODEL

RUNNER = Path(__file__).resolve().parents[1] / "reference" / "ricci_reference.py"
# the flow as Ricci-Filtration runs it (uncertified warm-started Sinkhorn)
FILTER_FLOW = {"method": "sinkhorn", "accuracy": None}


def scifact_graphs(data_dir: str | None, splits: list[str], limit: int) -> torch.Tensor:
    """Adjacency (B, 21, 21) of the first ``limit`` judged SciFact queries."""
    from georag.data.beir import load_beir
    from georag.rerank.ricci_filtration import query_graphs
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


def run_peer(
    adjacency: np.ndarray,
    mode: str,
    proc: int,
    *options: str,
    lengths: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """GraphRicciCurvature through scripts/reference/ricci_reference.py in ``.venv-peers``.

    ``adjacency`` (B, N, N); ``lengths`` default to unit lengths on its edges; ``options``
    are more of the runner's options (default ``--iterations 20``).
    """
    peer = peer_python()
    if peer is None:
        raise ValueError(".venv-peers is absent: run `make peers` to run GraphRicciCurvature")
    lengths = adjacency.astype(np.float64) if lengths is None else lengths
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "g.npz", Path(tmp) / "r.npz"
        np.savez(inp, lengths=lengths, adjacency=adjacency)
        command = [str(peer), str(RUNNER), str(inp), str(out), "--mode", mode]
        command += ["--proc", str(proc), *(options or ("--iterations", "20"))]
        subprocess.run(command, check=True)
        return dict(np.load(out))


def peak_memory(adjacency: torch.Tensor, device: str) -> dict[str, float]:
    """Run one flow over ``adjacency`` in a fresh process and report its peak memory."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.pt"
        torch.save(adjacency, path)
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(path), "--device", device],
            check=True,
            capture_output=True,
            text=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))


def memory_child(path: str, device: str) -> None:
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


def main() -> None:
    parser = bench_parser(__doc__, repeats=3)
    parser.add_argument("--batch", type=int, default=256, help="graphs timed with georag")
    parser.add_argument(
        "--peer-graphs",
        type=int,
        default=None,
        help="graphs run through the peer (default: --batch)",
    )
    parser.add_argument(
        "--peer-default-graphs",
        type=int,
        default=None,
        help="graphs for the peer at proc=cpu_count (default: --peer-graphs)",
    )
    parser.add_argument("--memory-batch", type=int, default=1024)
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.device)
        return

    from georag.geometry.ricci import SINKHORN_ACCURACY, ollivier_ricci
    from georag.rerank.ricci_filtration import RicciFiltrationConfig

    cfg = RicciFiltrationConfig()
    n_peer = args.peer_graphs or args.batch
    n_default = args.peer_default_graphs or n_peer
    bench = start(
        args,
        config={
            "graphs": f"SciFact dense top-20 ({DEFAULT_MODEL}), B={args.batch}",
            "flow": asdict(cfg),
            "peer": f"GraphRicciCurvature 0.6.1 method=OTD on the first {n_peer} graphs "
            f"(proc=1) and {n_default} (default proc)",
        },
    )
    adjacency = scifact_graphs(args.data_dir, ["test", "train"], max(args.batch, args.memory_batch))
    graphs = adjacency[: args.batch]
    print(
        f"# graphs N={graphs.shape[1]}, B={graphs.shape[0]}, "
        f"mean edges {graphs.sum((1, 2)).float().mean() / 2:.1f}"
    )

    cores = bench.threads.cores
    one_s, ours = time_georag(bench, graphs, args.repeats, 1)
    all_s, _ = time_georag(bench, graphs, args.repeats, cores)
    b = graphs.shape[0]
    one_ms, all_ms = one_s / b * 1e3, all_s / b * 1e3
    rows = [
        (f"georag, batched Sinkhorn, B={b}, 1 thread", one_ms, None),
        (f"georag, batched Sinkhorn, B={b}, {cores} threads", all_ms, None),
    ]
    parity = []
    if peer_python() is not None:
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
        parity.append(
            ("kept set equal (share of chunks)", float((kept_ours == kept_ref)[real].mean()))
        )
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
    else:
        print("# .venv-peers absent: run `make peers` to time GraphRicciCurvature")

    print("\n| implementation | ms/query (median of runs) | georag speed-up |")
    print("|---|---:|---:|")
    for name, ms, ratio in rows:
        shown = "" if ratio is None else f"{ratio:.1f}x"
        print(f"| {name} | {ms:.1f} | {shown} |")
    print(
        "(speed-up: the peer's ms/query over georag's faster configuration above; both "
        "use at most the machine's cores)"
    )
    if parity:
        print("\n| parity with GraphRicciCurvature | value |")
        print("|---|---|")
        for name, value in parity:
            print(f"| {name} | {value} |")
    memory = peak_memory(adjacency[: args.memory_batch], bench.device)
    print(
        f"\n| B={args.memory_batch} flow | peak RSS {memory['peak_rss_mb']:.0f} MB "
        f"(process before the flow {memory['rss_before_mb']:.0f} MB, flow adds "
        f"{memory['flow_extra_mb']:.0f} MB) | {memory['seconds']:.2f} s "
        f"({memory['seconds'] / args.memory_batch * 1e3:.1f} ms/query) |"
        + (f" CUDA peak {memory['cuda_peak_mb']:.0f} MB |" if "cuda_peak_mb" in memory else "")
    )
    bench.finish({"ms_per_query": rows, "parity": parity, "memory": memory})


if __name__ == "__main__":
    main()
