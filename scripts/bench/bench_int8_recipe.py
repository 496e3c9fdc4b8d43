"""The int8 recipes of MiniLM side by side on training sets: how ``openvino-int8`` was chosen.

Usage:
    python scripts/bench/bench_int8_recipe.py --data-dir ../shared/data --threads 1

Recipes (georag.experiments.int8_recipe): NNCF post-training quantization of weights and
activations (``openvino-int8``), the same with the feed-forward output projections in fp32,
NNCF int8 weight compression, and ONNX Runtime's dynamic quantization (``onnx-int8``). Per
recipe and training set (musique_train200, 2wikimultihopqa_train500): dense Recall@5 and its
change from torch, the cosine to torch (min, mean), B=1 median ms and documents/s.
"""

from __future__ import annotations

from georag.experiments.int8_recipe import compare
from georag.perf.bench import bench_parser, start


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    args = parser.parse_args()
    bench = start(args, config={}, device="cpu")
    rows = compare(args.data_dir)
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = [f"{v:.4f}" if isinstance(v, float) else str(v) for v in row.values()]
        print("| " + " | ".join(cells) + " |")
    bench.finish({"recipes": rows})


if __name__ == "__main__":
    main()
