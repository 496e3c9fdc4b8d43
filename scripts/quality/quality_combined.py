"""One table per data set over the saved runs of the quality scripts, tested jointly.

Reads ``<dataset>.runs.json.gz`` (:func:`georag.experiments.runs.save_runs`) of every data set
from each ``--sources`` folder (by default those of ``quality_geometry_adds.py``,
``quality_gar.py`` and ``quality_multihop.py``), merges them when they agree
(:func:`georag.experiments.combined.merge`: same judged queries, qrels and report folds, the
shared ``dense`` row equal) and writes, per data set, every row with NDCG@10, Recall@10,
MRR@10 (Recall@5 and Recall@2 first on the multi-hop sets) and the pool recall R@100, 95%
percentile bootstrap intervals, and paired randomization tests of the tested metric
(NDCG@10; Recall@5 on the multi-hop sets) against ``map`` and against the best non-geometric
row, each family Holm-corrected over every row of the table. Also a plot: per data set, the
difference of each geometric row to the best bar with the 95% bootstrap interval of the
paired difference, sorted, the rows with Holm p < 0.05 coloured (green better, red worse).

Usage::

    python scripts/quality/quality_combined.py --out docs/combined_results.md
"""

from __future__ import annotations

from pathlib import Path

import georag.perf.bench as harness
from georag.experiments.combined_doc import write_combined

DATASETS = ("scifact", "cranfield", "cisi", "musique_qa100", "hotpotqa_dev500")
SOURCES = ("runs/combined/geometry_adds", "runs/combined/gar", "runs/combined/multihop")


def parse_args(argv=None):
    parser = harness.bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), help="runs folders")
    parser.add_argument("--map-row", default="map", help="the first bar")
    parser.add_argument("--resamples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="docs/combined_results.md")
    parser.add_argument("--plot", default=None, help="default: --out with .png")
    args = parser.parse_args(argv)
    if args.resamples < 1:
        parser.error(f"--resamples: must be positive, got {args.resamples}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    config = {k: v for k, v in vars(args).items() if k != "bench_out"}
    bench = harness.start(args, config=config, device="cpu")
    out = Path(args.out)
    picture = Path(args.plot) if args.plot else out.with_suffix(".png")
    try:
        tables = write_combined(
            args.datasets,
            args.sources,
            out=out,
            picture=picture,
            map_row=args.map_row,
            resamples=args.resamples,
            seed=args.seed,
            log=lambda text: print(text, flush=True),
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None
    bench.finish(
        {dataset: {"rows": rows, "best": best} for dataset, (rows, best) in tables.items()}
    )


if __name__ == "__main__":
    main()
