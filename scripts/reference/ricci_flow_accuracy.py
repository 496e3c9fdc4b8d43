"""Ricci-flow accuracy against GraphRicciCurvature 0.6.1's exact flow, step by step.

Graphs: the karate club with unit lengths and with its interaction counts as lengths,
the paper's G(5, 3), a two-component graph (the weighted karate club with 5% of its
edges dropped, the case that once gave NaN), and 20 random graphs (N from 5 to 60,
unit and weighted lengths in [0.5, 2], densities 0.15-0.8). GRC (``method="OTD"``,
proc=1) runs one flow per graph through 3, 10, 20 and 40 iterations in ``.venv-peers``;
georag runs ``ricci_flow(..., iterations=40, history=True)`` per setting. Prints the max
abs error of the weights and of the curvature after 3, 10, 20 and 40 iterations, the
worst curvature error over those checkpoints, and seconds (georag, whole batch). The
last setting runs the exact flow from lengths perturbed by a relative 1e-9: its error is
the flow's own amplification of a tiny perturbation, the floor of any inexact solver::

    python scripts/reference/ricci_flow_accuracy.py --threads 1
"""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import torch

from georag.eval.synthetic import random_graphs
from georag.perf.bench import bench_parser, start
from georag.perf.peers import run_peer
from georag.perf.timing import timed

CHECKPOINTS = (3, 10, 20, 40)
#: relative noise on the initial lengths of the last setting: how much the flow itself
#: amplifies a perturbation (the error any inexact solver starts from)
PERTURBATION = 1e-9


def karate(weighted: bool, drop: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    graph = nx.karate_club_graph()
    lengths = np.zeros((34, 34))
    for x, y, data in graph.edges(data=True):
        lengths[x, y] = lengths[y, x] = data["weight"] if weighted else 1.0
    cut = np.triu(np.random.default_rng(0).random((34, 34)) < drop, 1)
    adjacency = (lengths > 0) & ~(cut | cut.T)
    return np.where(adjacency, lengths, 0.0), adjacency


def g_ab(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """K_{b+1} whose vertices are glued to b + 1 copies of K_{a+1} (unit lengths)."""
    n = (b + 1) * (a + 1)
    adjacency = np.zeros((n, n), dtype=bool)
    hubs = [c * (a + 1) for c in range(b + 1)]
    for c in range(b + 1):
        adjacency[c * (a + 1) : (c + 1) * (a + 1), c * (a + 1) : (c + 1) * (a + 1)] = True
    for p in hubs:
        for q in hubs:
            adjacency[p, q] = True
    np.fill_diagonal(adjacency, False)
    return adjacency.astype(float), adjacency


def cases(seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng
    out = [
        ("karate unit", *karate(False)),
        ("karate weighted", *karate(True)),
        ("G(5,3)", *g_ab(5, 3)),
        ("two components (karate w, 5% cut)", *karate(True, 0.05)),
    ]
    sizes = np.linspace(5, 60, 20).round().astype(int)
    for k, n in enumerate(sizes):
        weighted = bool(k % 2)
        out.append(
            (
                f"random N={n} {'weighted' if weighted else 'unit'}",
                *(g[0] for g in random_graphs(rng(seed + k), 1, int(n), weighted=weighted)),
            )
        )
    return out


def peer_flow(lengths: np.ndarray, adjacency: np.ndarray) -> dict[str, np.ndarray]:
    """GRC's exact flow of one graph, stored at every checkpoint."""
    checkpoints = ("--checkpoints", *map(str, CHECKPOINTS))
    return run_peer(
        adjacency[None], "flow", 1, "--method", "OTD", *checkpoints, lengths=lengths[None]
    )


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--first-case",
        type=int,
        default=0,
        help="skip the cases before this index (to split a run)",
    )
    parser.add_argument(
        "--settings",
        nargs="*",
        default=None,
        help="indices of the settings to run (default: all)",
    )
    args = parser.parse_args()

    from georag.geometry.ricci import SINKHORN_ACCURACY, RicciConvergenceWarning, ricci_flow

    settings = {
        "defaults (auto = exact here)": {},
        "sinkhorn (certified 5e-3)": {"method": "sinkhorn"},
        f"SINKHORN_ACCURACY (certified {SINKHORN_ACCURACY['accuracy']:g})": SINKHORN_ACCURACY,
        "batched (interior point, certified 1e-9)": {"method": "batched", "accuracy": 1e-9},
        "filter setting (sinkhorn, accuracy=None)": {"method": "sinkhorn", "accuracy": None},
        f"exact on lengths x (1 + {PERTURBATION:g} N(0, 1))": {"method": "exact"},
    }
    if args.settings is not None:
        settings = {k: v for n, (k, v) in enumerate(settings.items()) if str(n) in args.settings}
    bench = start(
        args,
        config={
            "peer": "GRC 0.6.1 method=OTD proc=1",
            "georag": "ricci_flow(iterations=40, delta=1e-4)",
            "SINKHORN_ACCURACY": SINKHORN_ACCURACY,
            "settings": list(settings),
        },
        device="cpu",
    )
    print(
        "\n| graph | setting | weights err @3 / 10 / 20 / 40 | curvature err @3 / 10 / 20 / 40 "
        "| worst curvature err | georag s |"
    )
    print("|---|---|---|---|---:|---:|")
    worst: dict[str, float] = {}
    rows = []
    for name, lengths, adjacency in cases(args.seed)[args.first_case :]:
        ref = peer_flow(lengths, adjacency)
        noise = np.triu(np.random.default_rng(args.seed).standard_normal(lengths.shape), 1)
        perturbed = lengths * (1.0 + PERTURBATION * (noise + noise.T))
        for label, kwargs in settings.items():
            start_lengths = perturbed if label.startswith("exact on lengths") else lengths
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RicciConvergenceWarning)
                res, seconds = timed(
                    lambda k=kwargs, x=start_lengths, a=adjacency: ricci_flow(
                        torch.tensor(x)[None],
                        torch.tensor(a)[None],
                        iterations=max(CHECKPOINTS),
                        history=True,
                        **k,
                    )
                )
            w_err, k_err = [], []
            for k in CHECKPOINTS:
                t = min(k, res.history_lengths.shape[0] - 1)  # the history ends where it stopped
                w_err.append(np.abs(res.history_lengths[t, 0].numpy() - ref[f"lengths_{k}"]).max())
                k_err.append(
                    np.abs(res.history_curvature[t, 0].numpy() - ref[f"curvature_{k}"]).max()
                )
            worst[label] = max(worst.get(label, 0.0), max(k_err))
            rows.append((name, label, w_err, k_err, seconds))
            print(
                f"| {name} | {label} | {' / '.join(f'{e:.1e}' for e in w_err)} | "
                f"{' / '.join(f'{e:.1e}' for e in k_err)} | {max(k_err):.1e} | {seconds:.2f} |",
                flush=True,
            )
    print("\n| setting | worst curvature error over every graph and checkpoint |")
    print("|---|---:|")
    for label, value in worst.items():
        print(f"| {label} | {value:.2e} |")
    bench.finish({"cases": rows, "worst": worst})


if __name__ == "__main__":
    main()
