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
from dataclasses import asdict

from georag.experiments.ricci_bench import (
    memory_child,
    peak_memory,
    peer_rows,
    scifact_graphs,
    time_georag,
)
from georag.perf.bench import bench_parser, peer_python, start
from georag.resources import DEFAULT_MODEL


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

    from georag.rerank.geometric.ricci_filtration import RicciFiltrationConfig

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
        rows_peer, parity = peer_rows(graphs, ours, one_ms, all_ms, cores, n_peer, n_default)
        rows += rows_peer
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
    memory = peak_memory(adjacency[: args.memory_batch], bench.device, script=__file__)
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
