"""Geometry against the strongest non-geometric second stages: one table per data set.

Rows (protocol: :mod:`train.geometry_adds`): dense, prior, map, map+bm25, map+prf, ltr,
the residual geometric heads on map and map+bm25 (graph smoothing, the linear head over
geometric features, among them the phrase-graph PPR mass), map+bm25 + phrase-PPR (the
phrase-graph PPR residual), ltr+geo, and the feature-drop rows. Metrics: NDCG@10, Recall@10,
MRR@10 with 95% percentile bootstrap intervals; NDCG@10 on the report queries whose
relevant documents were relevant to some training query ("seen") and on the others; a
paired randomization test of NDCG@10 of every other row against ``map`` and against the
best non-geometric row (the one of :data:`~train.geometry_adds.NON_GEOMETRIC` with the
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
from georag.experiments.folds import learned_folds, subset_training
from georag.experiments.runs import QueryRuns, save_runs
from georag.experiments.significance import holm_tests, interval_rows, per_query_arrays
from georag.resources import DEFAULT_MODEL
from georag.retrieval.encoder import TextEncoder
from train.geometry_adds import (
    NON_GEOMETRIC,
    Settings,
    corpus_features,
    prepare,
    report_run,
    run_fold,
    seen_queries,
)

METRICS = ("ndcg@10", "recall@10", "mrr@10")


def folds_of(dataset: str, args, encoder):
    """``(fit pool, report pool, label, qrels split)`` per fold
    (:func:`~georag.experiments.folds.learned_folds`; scifact: a seeded ``--train-queries``)."""
    folds = learned_folds(
        dataset,
        data_dir=args.data_dir,
        encoder=encoder,
        corpus=False,
        folds=args.folds,
        val_fraction=0.2,
        seed=args.seed,
    )
    if dataset == "scifact":
        folds, _ = subset_training(folds, args.train_queries, seed=0)
    split = "train" if dataset == "scifact" else "test"
    return [(fold.train, fold.report, fold.label, split) for fold in folds]


def run_dataset(dataset: str, args, encoder) -> dict:
    settings = Settings(
        epochs=args.epochs, patience=args.patience, seed=args.seed, drop_heads=args.drop_heads
    )
    runs: dict[str, dict] = {}
    notes: dict[str, list] = {}
    seen, qrels, folds = set(), {}, {}
    splits = folds_of(dataset, args, encoder)
    started = time.perf_counter()
    corpus = corpus_features(dataset, args.data_dir, splits[0][3])
    print(f"{dataset}: BM25 and phrase graph {time.perf_counter() - started:.0f} s", flush=True)
    for fit_pool, report_pool, label, _ in splits:
        started = time.perf_counter()
        fit, report = prepare(corpus, fit_pool, report_pool)
        print(
            f"{dataset} {label}: {fit_pool.batch.batch_size} fitting queries, "
            f"{report_pool.batch.batch_size} report; "
            f"features {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        result = run_fold(fit, report, settings, log=lambda text: print(text, flush=True))
        for name, scores in result["scores"].items():
            runs.setdefault(name, {}).update(report_run(report, scores))
            notes.setdefault(name, []).append(result["notes"].get(name, {}))
        seen |= seen_queries(report_pool, fit_pool)
        qrels.update(report_pool.qrels)
        folds[label] = list(report_pool.batch.query_ids)
    return {"runs": runs, "notes": notes, "seen": sorted(seen), "qrels": qrels, "folds": folds}


def statistics(result: dict, args) -> list[dict]:
    queries, values = per_query_arrays(result["runs"], result["qrels"], METRICS)
    seen = set(result["seen"])
    parts = {"seen": [i for i, q in enumerate(queries) if q in seen]}
    parts["unseen"] = [i for i, q in enumerate(queries) if q not in seen]
    resampling = {"resamples": args.resamples, "seed": args.seed}
    rows = interval_rows(values, METRICS, **resampling)
    for row in rows:
        per = values[row["method"]]
        row["train_s"] = sum(f.get("seconds", 0.0) for f in result["notes"][row["method"]])
        for part, index in parts.items():
            row[part] = float(per["ndcg@10"][index].mean()) if index else float("nan")
            row[f"{part}_n"] = len(index)
    best = max((r for r in rows if r["method"] in NON_GEOMETRIC), key=lambda r: r["ndcg@10"])
    for key, bar in (("map", "map"), ("best", best["method"])):
        tested = [r for r in rows if r["method"] not in ("dense", bar)]
        pairs = [(r["method"], bar) for r in tested]
        for row, (delta, _, p_holm) in zip(
            tested, holm_tests(values, "ndcg@10", pairs, **resampling), strict=True
        ):
            row[f"delta_{key}"], row[f"p_{key}"] = delta, p_holm
    return rows, best["method"]


def markdown(saved: dict) -> str:
    rows = saved["rows"]
    head = (
        "| method | NDCG@10 [95% CI] | Recall@10 [95% CI] | MRR@10 [95% CI] "
        f"| NDCG@10 seen ({rows[0]['seen_n']}) | unseen ({rows[0]['unseen_n']}) "
        f"| Δ vs map | p (Holm) | Δ vs {saved['best']} | p (Holm) | training s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        cells = [r["method"]]
        for m in METRICS:
            low, high = r[f"{m}_ci"]
            cells.append(f"{r[m]:.4f} [{low:.4f}, {high:.4f}]")
        cells += [f"{r[part]:.4f}" if r[f"{part}_n"] else "–" for part in ("seen", "unseen")]
        for key in ("map", "best"):
            has = f"p_{key}" in r
            cells += [
                f"{r[f'delta_{key}']:+.4f}" if has else "",
                f"{r[f'p_{key}']:.4f}" if has else "",
            ]
        cells.append(f"{r['train_s']:.1f}" if r["train_s"] else "")
        lines.append("| " + " | ".join(cells) + " |")
    return (
        f"### {saved['dataset']} ({rows[0]['queries']} report queries)\n\n"
        f"`{saved['command']}`; {saved['date']}, load average {saved['load']}; "
        f"{saved['protocol']}\n\n" + head + "\n".join(lines) + "\n"
    )


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
