"""Geometry against the strongest non-geometric second stages: one table per data set.

Rows (protocol: :mod:`georag.experiments.geometry_adds`): dense, prior, map, map+bm25, map+prf, ltr,
the residual geometric heads on map and map+bm25 (graph smoothing, the linear head over
geometric features, among them the phrase-graph PPR mass), map+bm25 + phrase-PPR (the
phrase-graph PPR residual), ltr+geo, and the feature-drop rows. Metrics: NDCG@10, Recall@10,
MRR@10 with 95% percentile bootstrap intervals; NDCG@10 on the report queries whose
relevant documents were relevant to some training query ("seen") and on the others; a
paired randomization test of NDCG@10 of every other row against ``map`` and against the
best non-geometric row (the one of :data:`~georag.experiments.geometry_adds.NON_GEOMETRIC` with the
highest report mean: the bar that favours the baseline), each Holm-corrected over the
rows tested. Every row's per-query run (each report query's top 100), the folds, the qrels,
the protocol and each row's geometric flag and training seconds are saved with
:func:`georag.experiments.runs.save_runs` in ``--work`` (``<dataset>.runs.json.gz``), so
that ``scripts/quality/quality_combined.py`` can test them jointly with other scripts' rows.

Splits: scifact trains on ``qrels/train.tsv`` (a seeded 20% held out for validation) and
reports on test; cranfield and cisi use seeded k-fold cross-validation over queries,
every choice made inside the training folds. Nothing is chosen on a report query.

Usage::

    python scripts/quality/quality_geometry_adds.py --datasets cisi --epochs 30 --patience 4
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

import georag.perf.bench as harness
from georag._io import atomic_write
from georag.experiments.geometry_adds import (
    NON_GEOMETRIC,
    Settings,
    markdown,
    run_dataset,
    statistics,
)
from georag.experiments.runs import QueryRuns, save_runs
from georag.resources import DEFAULT_MODEL
from georag.retrieval.encoder import TextEncoder


def parse_args(argv=None):
    parser = harness.bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)
    parser.add_argument("--datasets", nargs="+", default=["scifact", "cranfield", "cisi"])
    parser.add_argument("--epochs", type=harness.positive_int, default=Settings.epochs)
    parser.add_argument("--patience", type=harness.positive_int, default=Settings.patience)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--train-queries",
        type=harness.non_negative_int,
        default=0,
        help="scifact: fit on a seeded subset of this many training queries (0: all)",
    )
    parser.add_argument(
        "--no-drop-heads",
        dest="drop_heads",
        action="store_false",
        help="feature-drop rows for ltr+geo only (not for the gradient-trained head)",
    )
    parser.add_argument("--resamples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default="runs/combined/geometry_adds")
    parser.add_argument(
        "--render", action="store_true", help="only rewrite the tables from the runs in --work"
    )
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.render:
        for path in sorted(work.glob("*.json")):
            atomic_write(path.with_suffix(".md"), markdown(json.loads(path.read_text())))
            print(path.with_suffix(".md").read_text())
        return
    encoder = TextEncoder(DEFAULT_MODEL, show_progress=False)
    for dataset in args.datasets:
        load = os.getloadavg()[0]
        started = time.perf_counter()
        result = run_dataset(dataset, args, encoder)
        rows, best = statistics(result, args)
        protocol = (
            "train on qrels/train.tsv (a seeded 20% held out for validation), report on test"
            if dataset == "scifact"
            else f"{args.folds}-fold CV over queries, seed {args.seed} (each fold's training "
            "queries: a seeded 20% held out for validation)"
        )
        if dataset == "scifact" and args.train_queries:
            protocol += f"; fitted on a seeded {args.train_queries} of the training queries"
        command = (
            "python scripts/quality/quality_geometry_adds.py"
            + (f" --data-dir {args.data_dir}" if args.data_dir else "")
            + f" --datasets {dataset} --epochs {args.epochs} --patience {args.patience}"
            + (f" --train-queries {args.train_queries}" if args.train_queries else "")
            + ("" if args.drop_heads else " --no-drop-heads")
        )
        saved = {
            "dataset": dataset,
            "rows": rows,
            "best": best,
            "notes": result["notes"],
            "folds": result["folds"],
            "seen": result["seen"],
            "protocol": protocol,
            "command": command,
            "machine": f"{platform.machine()}, {torch.get_num_threads()} torch thread(s)",
            "date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{(time.perf_counter() - started) / 60:.1f} min",
            "load": f"{load:.1f} -> {os.getloadavg()[0]:.1f}",
        }
        atomic_write(work / f"{dataset}.json", json.dumps(saved, indent=1, default=str))
        row_notes = {
            row["method"]: {
                "geometric": row["method"] not in NON_GEOMETRIC,
                "train_s": row["train_s"],
            }
            for row in rows
        }
        extra = {
            "rows": row_notes,
            "seen": result["seen"],
            "date": saved["date"],
            "load": saved["load"],
        }
        save_runs(
            work,
            QueryRuns(
                dataset,
                "geometry_adds",
                protocol,
                command,
                result["folds"],
                result["qrels"],
                result["runs"],
                extra,
            ),
        )
        atomic_write(work / f"{dataset}.md", markdown(saved))
        print(markdown(saved), flush=True)


if __name__ == "__main__":
    main()
