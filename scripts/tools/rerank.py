"""Batched reranking of a TREC run with any georag method, through Lightning Trainer.predict.

Usage:
    python scripts/tools/rerank.py --run first_stage.trec --dataset scifact \\
        --data-dir ../shared/data --method diffusion --out runs/diffusion.trec \\
        [--devices 2 --strategy ddp]

Streams the run in shards of --batch-size queries, writes each finished shard atomically to
<out>.shards/, skips shards already there (so an interrupted job resumes), and concatenates them
into --out. One CPU, one GPU or N GPUs (DDP) run the same code; prints queries/s at the end.
"""

from __future__ import annotations

from georag.data.beir import load_beir
from georag.eval.batch_predict import rerank_run_file
from georag.eval.trec import read_run
from georag.perf.bench import bench_parser, start
from georag.perf.timing import timed
from georag.rerank.registry import make_reranker


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.add_argument("--run", required=True, help="input TREC run (first-stage candidates)")
    parser.add_argument("--dataset", required=True, help="BEIR name or folder (texts and ids)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--method", required=True, help="reranker spec, e.g. diffusion or ricci+bi")
    parser.add_argument("--out", required=True, help="output TREC run")
    parser.add_argument("--batch-size", type=int, default=256, help="queries per shard")
    parser.add_argument("--top-m", type=int, default=100, help="candidates per query used")
    parser.add_argument("--top-k", type=int, help="keep the best k per query in the output")
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--devices", default="1", help="number of devices/processes")
    parser.add_argument("--strategy", default="auto", help="e.g. ddp (gloo on CPU, nccl on GPU)")
    args = parser.parse_args()
    config = {k: getattr(args, k) for k in ("method", "batch_size", "top_m", "top_k", "devices")}
    bench = start(args, config=config)
    dataset = load_beir(args.dataset, split=args.split, data_dir=args.data_dir)
    devices = int(args.devices) if args.devices.isdigit() else args.devices
    out, elapsed = timed(
        lambda: rerank_run_file(
            args.run,
            dataset,
            make_reranker(args.method),
            args.out,
            batch_size=args.batch_size,
            top_m=args.top_m,
            top_k=args.top_k,
            accelerator=args.accelerator,
            devices=devices,
            strategy=args.strategy,
        )
    )
    queries = len(read_run(out))
    print(
        f"{args.method}: {queries} queries in {elapsed:.1f} s -> "
        f"{queries / elapsed:.1f} queries/s (including start-up and query encoding) -> {out}"
    )
    bench.finish({"queries": queries, "seconds": elapsed, "queries_per_s": queries / elapsed})


if __name__ == "__main__":
    main()
