"""First-stage quality: georag's dense, BM25 and hybrid beside plain reference scripts.

Usage:
    python scripts/quality/first_stage_table.py --data-dir ../shared/data [--datasets scifact cisi]

Prints, per data set, NDCG@10 / Recall@100 / MRR@10 of georag (dense MiniLM, BM25, RRF hybrid)
and of scripts/reference/reference_dense.py and scripts/reference/reference_bm25.py on the
same files, with the difference. Dense and BM25 should agree within 0.01.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))

from reference_bm25 import run_bm25  # noqa: E402
from reference_dense import run_dense  # noqa: E402

from georag.data.beir import load_beir  # noqa: E402
from georag.eval.metrics import evaluate  # noqa: E402
from georag.perf.bench import bench_parser, data_root, start  # noqa: E402
from georag.rerank.base import IdentityReranker  # noqa: E402
from georag.resources import DEFAULT_MODEL, resolve_model_path  # noqa: E402
from georag.retrieval.candidates import FirstStage, FirstStageConfig  # noqa: E402
from georag.retrieval.encoder import TextEncoder  # noqa: E402

METRICS = ("ndcg@10", "recall@100", "mrr@10")


def georag_scores(dataset, stage_name: str, encoder: TextEncoder) -> dict[str, float]:
    stage = FirstStage(
        dataset, FirstStageConfig(first_stage=stage_name, top_m=100), encoder=encoder
    )
    ids = list(dataset.queries)
    batch = stage.retrieve(ids, [dataset.queries[q] for q in ids])
    return evaluate(IdentityReranker()(batch).to_run(batch), dataset.qrels, METRICS)


def main() -> None:
    parser = bench_parser(__doc__, repeats=None, device=False)
    parser.add_argument("--datasets", nargs="+", default=["scifact", "cranfield", "cisi"])
    args = parser.parse_args()
    root = data_root(args)
    bench = start(
        args,
        config={
            "model": f"{DEFAULT_MODEL} ({resolve_model_path(DEFAULT_MODEL)})",
            "top": 100,
            "BM25": "k1=1.2 b=0.75 bm25s tokenizer + English stop words",
            "hybrid": "RRF (k=60) of dense and BM25 top 100",
        },
    )
    encoder = TextEncoder(show_progress=False)
    header = f"{'dataset':10s} {'system':16s} " + " ".join(f"{m:>10s}" for m in METRICS)
    print(header)
    results = {}
    for name in args.datasets:
        dataset = load_beir(name, data_dir=root)
        folder = root / name
        rows = {
            "georag dense": georag_scores(dataset, "dense", encoder),
            "reference dense": run_dense(folder, resolve_model_path(DEFAULT_MODEL)),
            "georag bm25": georag_scores(dataset, "bm25", encoder),
            "reference bm25": run_bm25(folder),
            "georag hybrid": georag_scores(dataset, "hybrid", encoder),
        }
        results[name] = rows
        for system, values in rows.items():
            print(f"{name:10s} {system:16s} " + " ".join(f"{values[m]:10.4f}" for m in METRICS))
        for kind in ("dense", "bm25"):
            diff = max(
                abs(rows[f"georag {kind}"][m] - rows[f"reference {kind}"][m]) for m in METRICS
            )
            print(
                f"{name:10s} {kind} max |georag - reference| = {diff:.4f} "
                f"({'OK' if diff <= 0.01 else 'OFF'} at tolerance 0.01)"
            )
    bench.finish(results)


if __name__ == "__main__":
    main()
