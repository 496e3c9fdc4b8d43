"""Corpus-scale Ollivier-Ricci curvature: georag's sparse solvers against GraphRicciCurvature.

Builds the k-NN graph of the SciFact corpus (5,183 abstracts, all-MiniLM-L6-v2
embeddings from the shared cache, k = 10 neighbours by cosine, symmetrised by union;
edge length ``1 - cos``), computes the curvature of every edge with
``georag.geometry.ricci.sparse.sparse_ollivier_ricci`` (no all-pairs matrix) by its
exact path (compiled distances and simplex) and its batched path (certified batched interior
point, on ``--device``), and with GraphRicciCurvature 0.6.1 (``method="OTD"``, proc=1
and its default proc=cpu_count, in ``.venv-peers``), all in one run, and prints seconds
(medians over ``--repeats``), time ratios, the max abs difference to georag's exact
path and, for georag, the split between the distance part and the transport part::

    python scripts/bench/bench_sparse_ricci.py --threads 1 --data-dir ../shared/data
    python scripts/bench/bench_sparse_ricci.py --device cuda --distances torch  # on a GPU
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from georag.experiments.ricci_bench import knn_edges
from georag.perf.bench import bench_parser, peer_python, start
from georag.perf.peers import GRC_PEER_SCRIPT
from georag.resources import DEFAULT_MODEL


class _Records(logging.Handler):
    """Keeps the messages of georag.geometry.ricci.sparse (its timing split)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> None:
    parser = bench_parser(__doc__, repeats=1)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--distances",
        default="scipy",
        choices=("compiled", "scipy", "torch"),
        help="shortest paths of the batched path (torch: sweeps on --device)",
    )
    parser.add_argument(
        "--accuracies",
        type=float,
        nargs="+",
        default=[1e-6],
        help="one batched row per curvature accuracy",
    )
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--no-batched", action="store_true", help="the exact path only")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    bench = start(
        args,
        config={
            "graph": f"SciFact corpus k-NN, k={args.k}",
            "distances": args.distances,
            "accuracies": args.accuracies,
        },
    )

    from georag.data.beir import load_beir
    from georag.geometry.ricci.sparse import sparse_ollivier_ricci
    from georag.retrieval.candidates import corpus_embeddings
    from georag.retrieval.encoder import TextEncoder

    dataset = load_beir("scifact", split="test", data_dir=args.data_dir)
    texts = [doc.full_text for doc in dataset.corpus.values()]
    embeddings, hit = corpus_embeddings(texts, TextEncoder())
    edge_index, lengths = knn_edges(embeddings, args.k)
    n = embeddings.shape[0]
    print(
        f"# SciFact corpus k-NN graph: {n} nodes, k={args.k}, {edge_index.shape[1]} "
        f"undirected edges, lengths 1 - cos ({DEFAULT_MODEL}, cache hit {hit}); batched path "
        f"on {bench.device} with distances={args.distances!r}"
    )
    records = _Records()
    logger = logging.getLogger("georag.geometry.ricci.sparse")
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    ours = {}
    rows = []
    runs = [("exact", "cpu", "compiled", 1e-6)]
    if not args.no_batched:
        runs += [("batched", bench.device, args.distances, acc) for acc in args.accuracies]
    for method, device, distances, accuracy in runs:
        options = {"method": method, "distances": distances, "accuracy": accuracy}
        result, cpu = [], []

        def solve(_, device=device, options=options, result=result, cpu=cpu):
            cpu0 = time.process_time()
            kappa = sparse_ollivier_ricci(edge_index.to(device), lengths.to(device), n, **options)
            result.append(kappa.cpu())
            cpu.append(time.process_time() - cpu0)

        timing = bench.time(solve, repeats=args.repeats, warmup=0)
        name = f"georag sparse_ollivier_ricci method={method!r} ({device}, {distances})"
        if method == "batched":
            name += f" accuracy={accuracy:g}"
        edges = edge_index.shape[1]
        print(
            f"# {name}: median {timing.median / edges:.4f} ms per edge wall, "
            f"{1e3 * float(np.median(cpu)) / edges:.4f} ms per edge process CPU "
            f"(CPU s per run: {', '.join(f'{c:.2f}' for c in cpu)})"
        )
        ours[name] = result[-1]
        rows.append((name, [t / 1e3 for t in timing.samples_ms]))
    print(f"# load after georag: {os.getloadavg()}")
    for message in records.messages:
        print(f"# {message}")
    peers = []
    peer = peer_python()
    if peer is not None and not args.no_peer:
        with tempfile.TemporaryDirectory() as tmp:
            inp = Path(tmp) / "g.npz"
            np.savez(
                inp,
                x=edge_index[0].numpy(),
                y=edge_index[1].numpy(),
                w=lengths.numpy(),
                num_nodes=n,
            )
            for proc, label in ((1, "proc=1"), (0, f"default proc={os.cpu_count()}")):
                out = Path(tmp) / f"k{proc}.npy"
                times = []
                for _ in range(args.repeats):
                    res = subprocess.run(
                        [str(peer), "-c", GRC_PEER_SCRIPT, str(inp), str(out), str(proc)],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    times.append(json.loads(res.stdout.strip().splitlines()[-1])["seconds"])
                peers.append((f"GraphRicciCurvature 0.6.1 OTD {label}", times, np.load(out)))
        print(f"# load after peers: {os.getloadavg()}")
    exact_s = float(np.median(rows[0][1]))
    exact = ours[rows[0][0]].numpy()
    print(
        "\n| implementation | seconds (median) | runs | time / georag exact | "
        "max abs curvature difference to georag exact |"
    )
    print("|---|---:|---|---:|---:|")
    table = [(name, times, ours[name].numpy()) for name, times in rows]
    for name, times, kappa in table + peers:
        seconds = float(np.median(times))
        diff = float(np.abs(kappa - exact).max())
        each = ", ".join(f"{t:.1f}" for t in times)
        print(f"| {name} | {seconds:.2f} | {each} | {seconds / exact_s:.2f} | {diff:.2e} |")
    print(
        f"\ncurvature: min {exact.min():.3f}, median {np.median(exact):.3f}, max {exact.max():.3f}"
    )
    bench.finish({"rows": [(name, times) for name, times, _ in table + peers]})


if __name__ == "__main__":
    main()
