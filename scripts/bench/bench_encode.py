"""The text-encoder backends side by side (torch, onnx, onnx-int8, openvino, openvino-int8).

Usage:
    python scripts/bench/bench_encode.py --data-dir ../shared/data [--backends onnx,openvino]
    python scripts/bench/bench_encode.py --data-dir ../shared/data --quality-only
    python scripts/bench/bench_encode.py --data-dir ../shared/data --speed-only --limit 500

Speed (MiniLM on the CPU, each backend in a fresh process): query latency at B=1 (median,
p90) on one thread, batched queries/s and corpus docs/s (SciFact, hotpotqa_dev500) on one
and two threads, peak resident memory. Quality (independent of load): SciFact and
Cranfield NDCG@10 of the dense first stage and of maniscope and ricci+bi over it,
hotpotqa_dev500 Recall@5, and the cosine of each backend's embeddings to torch's. Quality
runs through ``georag eval``'s runner, whose embedding caches are keyed by backend.
"""

from __future__ import annotations

from georag.experiments.encoder_bench import (
    QUALITY_SETS,
    check_backends,
    quality,
    speed_in_child,
)
from georag.perf.bench import bench_parser, start


def _table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [row.get(c, "") for c in columns]
        lines.append(
            "| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in cells) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--backends", default="", help="comma separated (default: all five)")
    parser.add_argument("--quality-only", action="store_true", help="skip the timed part")
    parser.add_argument("--speed-only", action="store_true", help="skip the quality part")
    parser.add_argument(
        "--limit", type=int, default=1000, help="speed: queries and documents per corpus"
    )
    parser.add_argument(
        "--max-queries", type=int, help="quality: only the first N queries of each set"
    )
    parser.add_argument(
        "--no-bi", action="store_true", help="quality: leave ricci+bi out (mpnet is slow)"
    )
    args = parser.parse_args()
    if args.quality_only and args.speed_only:
        parser.error("--quality-only and --speed-only exclude each other")
    backends = check_backends([b for b in args.backends.split(",") if b])
    bench = start(args, config={"backends": backends, "limit": args.limit}, device="cpu")
    results: dict = {}
    if not args.quality_only:
        speed = [speed_in_child(b, args.data_dir, args.limit) for b in backends]
        print(_table(speed, list(speed[0])))
        results["speed"] = speed
    if not args.speed_only:
        sets = [
            (name, tuple(m for m in methods if not (args.no_bi and "bi" in m)), metric)
            for name, methods, metric in QUALITY_SETS
        ]
        rows = quality(backends, args.data_dir, sets=sets, max_queries=args.max_queries)
        columns = ["backend", "dataset", "method", "ndcg@10", "recall@5", "cos_min", "cos_mean"]
        print(_table(rows, columns))
        results["quality"] = rows
    bench.finish(results)


if __name__ == "__main__":
    main()
