"""ISO-RAG quality: Recall@2 / Recall@5 of supporting paragraphs, every method in one table.

Data sets: hotpotqa_dev500, musique_qa100 and musique_train100 (the trained Poincare head's
training set: its rows there are marked "(train)" and are not results). Methods (dense,
ppr_global, ppr_global+mix, iso_rag and its ablations -noprune, -notopo, -degvol, -random,
and -trained with ``--head``) and rows: :mod:`georag.experiments.iso_multihop`; this script
prints them.

Usage: ``python scripts/quality/quality_iso.py [--head runs/iso_rag/poincare_head.pt]``
"""

from __future__ import annotations

from pathlib import Path

from georag.config import parse_value
from georag.experiments.iso_multihop import DATASETS, TRAIN_SET, dataset_rows
from georag.models.poincare import PoincareHead
from georag.perf.bench import bench_parser, data_root, start
from georag.resources import default_cache_dir
from georag.retrieval.encoder import TextEncoder
from georag.retrievers.iso import IsoRagConfig


def main() -> None:
    parser = bench_parser(__doc__, repeats=None)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--head", type=Path, default=None, help="trained PoincareHead (.pt)")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="FIELD=VALUE",
        help="IsoRagConfig overrides, e.g. lam=0.5 prune_threshold=2",
    )
    args = parser.parse_args()
    data_dir = data_root(args)
    overrides = {}
    for item in args.set:
        field, value = item.split("=", 1)
        overrides[field] = parse_value(IsoRagConfig, field, value)
    config = IsoRagConfig(**overrides)
    bench = start(args, config={"iso_rag": config, "head": args.head})
    head = PoincareHead.load(args.head) if args.head else None
    encoder = TextEncoder(show_progress=False, device=bench.device)
    print(f"encoder {encoder.name}; {config}")
    if head is not None:
        print(f"trained head {args.head} (trained on {TRAIN_SET} only)")
    results = {}
    for name in args.datasets:
        rows, counts = dataset_rows(name, data_dir, config, head, encoder, default_cache_dir())
        results[name] = {"graph": counts, "rows": rows}
        print(
            f"\n=== {name}: {counts['passages']} passages, {counts['questions']} questions, "
            f"graph {counts['edges']} edges ({counts['semantic']} semantic, "
            f"{counts['topological']} topological, {counts['both']} both)"
        )
        base = rows[0]
        print(
            f"  {'method':<26} {'R@2':>7} {'R@5':>7} {'dR@5':>7} {'nodes':>6} "
            f"{'edges':>7} {'pruned':>7} {'pruned%':>7} {'ms/q':>7}"
        )
        for row in rows:
            local = row["edges"] and "global" not in row["method"]
            share = 100 * row["edges_removed"] / row["edges"] if local else 0.0
            print(
                f"  {row['method']:<26} {row['recall@2']:7.4f} {row['recall@5']:7.4f} "
                f"{row['recall@5'] - base['recall@5']:+7.4f} {row['nodes']:6.1f} "
                f"{row['edges']:7.1f} {row['edges_removed']:7.1f} {share:6.1f}% "
                f"{row['ms_per_query']:7.2f}"
            )
    bench.finish(results)


if __name__ == "__main__":
    main()
