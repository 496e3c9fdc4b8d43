"""The int8 recipes of MiniLM side by side on training sets: how ``openvino-int8`` was chosen.

Usage:
    python scripts/bench/bench_int8_recipe.py --data-dir ../shared/data --threads 1
    python scripts/bench/bench_int8_recipe.py --data-dir ../shared/data --sensitivity

Recipes (georag.experiments.int8_recipe): ``openvino-int8`` (NNCF post-training quantization
of weights and activations, SmoothQuant at 0.8, the first feed-forward output projection in
fp32), NNCF's defaults (every MatMul int8), each half of the backend's change alone, every
feed-forward output projection in fp32, NNCF int8 weight compression, and ONNX Runtime's
dynamic quantization (``onnx-int8``). Per
recipe and training set (musique_train200, 2wikimultihopqa_train500): dense Recall@5 and its
change from torch, the cosine to torch (min, mean), B=1 median ms and documents/s.
``--sensitivity`` runs the scan that located the int8 error instead: NNCF variants that keep
one kind of operation, one layer or one projection in fp32, or move SmoothQuant's alpha,
each with its cosine to torch (mean, 1st percentile, min) over 1,200 training texts.
"""

from __future__ import annotations

from georag.experiments.int8_recipe import compare, sensitivity
from georag.perf.bench import bench_parser, start


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument(
        "--sensitivity", action="store_true", help="the scan of NNCF variants, cosine only"
    )
    args = parser.parse_args()
    bench = start(args, config={"sensitivity": args.sensitivity}, device="cpu")
    rows = (sensitivity if args.sensitivity else compare)(args.data_dir)
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = [
            (f"{v:.5f}" if k.startswith("cos") else f"{v:.4f}") if isinstance(v, float) else str(v)
            for k, v in row.items()
        ]
        print("| " + " | ".join(cells) + " |")
    bench.finish({"variants" if args.sensitivity else "recipes": rows})


if __name__ == "__main__":
    main()
