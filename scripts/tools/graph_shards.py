"""Sharded corpus-graph kernels over Lightning ranks: sparse Ricci curvature or whole-graph PPR.

Usage:
    python scripts/tools/graph_shards.py --graph runs/knn-graph --kernel curvature \\
        --out kappa.npy --shards 8 [--devices 2 --strategy ddp]
    python scripts/tools/graph_shards.py --graph runs/knn-graph --kernel ppr --sources 256 \\
        --out ppr.npy

The graph is a folder written by georag.retrieval.graph_store.save_graph (memory-mapped,
checksummed). Each finished shard is sealed under <out>.shards/; a rerun after a killed rank
computes only the missing shards; the result is the same bytes for any number of ranks.
"""

from __future__ import annotations

import numpy as np

from georag.eval.batch_predict import curvature_shards, ppr_shards
from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.add_argument("--graph", required=True, help="graph folder (save_graph)")
    parser.add_argument("--kernel", required=True, choices=("curvature", "ppr"))
    parser.add_argument("--out", required=True, help="result .npy (sealed)")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--sources", type=int, default=256, help="ppr: the first N node ids")
    parser.add_argument("--accelerator", default="cpu")
    parser.add_argument("--devices", default="1", help="number of devices/processes")
    parser.add_argument("--strategy", default="auto", help="e.g. ddp (gloo on CPU, nccl on GPU)")
    args = parser.parse_args()
    config = {k: getattr(args, k) for k in ("kernel", "shards", "sources", "devices", "strategy")}
    bench = start(args, config=config)
    devices = int(args.devices) if args.devices.isdigit() else args.devices
    trainer = {"accelerator": args.accelerator, "devices": devices, "strategy": args.strategy}
    options = {"shards": args.shards, "trainer": trainer}
    if args.kernel == "curvature":
        out, elapsed = timed(lambda: curvature_shards(args.graph, args.out, **options))
    else:
        sources = np.arange(args.sources)
        out, elapsed = timed(lambda: ppr_shards(args.graph, sources, args.out, **options))
    print(f"{args.kernel}: {args.shards} shards in {elapsed:.1f} s -> {out}")
    bench.finish({"seconds": elapsed})


if __name__ == "__main__":
    main()
