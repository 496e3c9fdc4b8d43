"""Run GraphRicciCurvature 0.6.1 on a batch of graphs stored as npz (peer reference).

Runs inside the peers environment (``make peers`` builds ``.venv-peers``), which pins the
scipy/numpy that GraphRicciCurvature needs, so it imports nothing from georag::

    .venv-peers/bin/python scripts/reference/ricci_reference.py IN.npz OUT.npz \
        --mode flow --iterations 20 --alpha 0.5 --exp-power 2 --method OTD --proc 1

IN.npz holds ``lengths`` (B, N, N) float and ``adjacency`` (B, N, N) bool. OUT.npz gets
``curvature`` (B, N, N) (0 off the edges), for ``--mode flow`` also ``lengths`` (B, N, N)
(the final weights; 0 on edges outside the largest component, which the library drops)
and ``adjacency`` (B, N, N) (the edges that flowed), and ``seconds`` (B,) per graph.
``--checkpoints 3 10 20 40`` (flow mode) continues one flow through the listed iteration
counts (GRC resumes a flow whose graph carries ``original_RC``) and stores
``lengths_<k>`` and ``curvature_<k>`` at each; a graph that stopped early (curvature
spread below ``--delta``) keeps its last state.
"""

from __future__ import annotations

import argparse
import time

import networkx as nx
import numpy as np


def to_graph(lengths: np.ndarray, adjacency: np.ndarray) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(range(lengths.shape[0]))
    rows, cols = np.nonzero(np.triu(adjacency, 1))
    graph.add_weighted_edges_from(
        (int(r), int(c), float(lengths[r, c])) for r, c in zip(rows, cols)
    )
    return graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inp")
    parser.add_argument("out")
    parser.add_argument("--mode", choices=("curvature", "flow"), default="curvature")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--step", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-4)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--exp-power", type=float, default=2.0)
    parser.add_argument("--method", default="OTD")
    parser.add_argument("--proc", type=int, default=1, help="0 means the library default")
    parser.add_argument("--checkpoints", type=int, nargs="*", default=[])
    args = parser.parse_args()
    from GraphRicciCurvature.OllivierRicci import OllivierRicci  # only in .venv-peers

    data = np.load(args.inp)
    lengths, adjacency = data["lengths"].astype(np.float64), data["adjacency"].astype(bool)
    b, n, _ = lengths.shape
    curvature = np.zeros((b, n, n))
    final = np.zeros((b, n, n))
    flowed = np.zeros((b, n, n), dtype=bool)
    seconds = np.zeros(b)
    options = dict(alpha=args.alpha, exp_power=args.exp_power, method=args.method, verbose="ERROR")
    if args.proc > 0:
        options["proc"] = args.proc
    stages = {k: (np.zeros((b, n, n)), np.zeros((b, n, n))) for k in args.checkpoints}
    for g in range(b):
        graph = to_graph(lengths[g], adjacency[g])
        start = time.perf_counter()
        orc = OllivierRicci(graph, **options)
        if graph.number_of_edges() == 0:
            result = orc.G
        elif args.mode == "flow" and args.checkpoints:
            done, stopped = 0, False
            for k in sorted(args.checkpoints):
                if not stopped and k > done:
                    result = orc.compute_ricci_flow(
                        iterations=k - done, step=args.step, delta=args.delta
                    )
                    kappa = [a["ricciCurvature"] for _, _, a in result.edges(data=True)]
                    stopped = max(kappa) - min(kappa) < args.delta
                    done = k
                for x, y, attrs in result.edges(data=True):
                    for store, value in zip(stages[k], (attrs["weight"], attrs["ricciCurvature"])):
                        store[g, x, y] = store[g, y, x] = value
        elif args.mode == "flow":
            result = orc.compute_ricci_flow(
                iterations=args.iterations, step=args.step, delta=args.delta
            )
        else:
            result = orc.compute_ricci_curvature()
        seconds[g] = time.perf_counter() - start
        for x, y, attrs in result.edges(data=True):
            kappa = attrs.get("ricciCurvature", 0.0)
            curvature[g, x, y] = curvature[g, y, x] = kappa
            final[g, x, y] = final[g, y, x] = attrs["weight"]
            flowed[g, x, y] = flowed[g, y, x] = True
    extra = {
        f"{name}_{k}": value
        for k, pair in stages.items()
        for name, value in zip(("lengths", "curvature"), pair)
    }
    np.savez(
        args.out, curvature=curvature, lengths=final, adjacency=flowed, seconds=seconds, **extra
    )


if __name__ == "__main__":
    main()
