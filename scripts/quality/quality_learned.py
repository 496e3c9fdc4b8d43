"""Learned geometry against the dense first stage, paper defaults and a tuned baseline.

For each data set, on the dense all-MiniLM-L6-v2 top-100 pool of every report query:

* ``dense``: the first-stage order;
* ``<method> paper``: the fixed reranker at its paper's defaults;
* ``<method> tuned``: its knobs searched by optuna TPE (``--trials``) on the training
  queries (:mod:`train.tune`);
* ``<method> learned``: its knobs trained by gradient through the geometry
  (:mod:`train.learned_module`, listwise loss, early stopping on held-out training queries);
* ``<method> learned+map``: the same plus a learned linear map of the embeddings;
* ``map alone``: the learned embedding map with no geometry (``learned_map``), the
  ablation that tells the gain of the geometry from the gain of adapting the embeddings.

A corpus-level learnable retriever (``learned_iso``) gets the same four rows (``iso
paper`` is :class:`~georag.retrievers.iso.IsoRag` at its defaults), ranked over the whole
corpus (:mod:`train.corpus_data`) instead of the pool, on the same folds.

Protocols: scifact trains on ``qrels/train.tsv`` (a seeded 20% held out for validation)
and reports on the test split; cranfield and cisi (one judged split) use seeded 5-fold
cross-validation over queries: each fold is reported by models trained and tuned on the
other four (with their own 20% validation part), and the table pools the report folds.
No test or report query chooses anything.

Statistics (per section, :mod:`georag.eval.stats`): mean over queries with a 95% percentile
bootstrap interval, and a paired two-sided randomization test of the first metric
(NDCG@10; Recall@5 on multi-hop sets) against dense, Holm-corrected over the methods; and
the same test of each ``learned+map`` row against ``map alone`` (the geometry's own gain),
Holm-corrected over those rows.

Usage::

    GEORAG_DATA=../shared/data python scripts/quality/quality_learned.py \\
        --datasets scifact cranfield cisi --out docs/learned_results.md
    python scripts/quality/quality_learned.py --datasets cisi --methods learned_ricci --jobs 3

Rows and cost: ``--roles`` computes some of the rows (always with dense), ``--jobs J``
runs the roles of a data set in J forked processes with one torch thread each (the rows
are those of one process: every role seeds itself), and ``--train-queries K`` trains and
tunes every row on a seeded K of each fold's training queries (the heading and the
protocol line say so). Each row reports the wall and CPU seconds of its role; the CPU
seconds are the cost figure on a shared machine. A TPE trial that raises fails alone; the
section counts the failed trials.

Multi-hop sets (``hotpotqa_dev500``, ``musique_qa100``: supporting paragraphs as relevance
labels, 5-fold CV) report Recall@5 and Recall@2 first. A run makes one section per data
set and ``--methods`` selection (and ``--method-option`` fixed fields), kept in ``--work``
(``<dataset>__<methods>.json``, with the folds' query ids); rendering replaces the
sections it has and keeps every other section already in ``--out``, so runs of other
methods add to the same file; ``--tex PATH`` also writes every saved section's table as
LaTeX (the same cells, :func:`georag.experiments.tables.learned_latex`).

The protocols are those of :mod:`georag.experiments` (folds, roles, statistics, tables);
this script is their command line.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import torch

import georag.perf.bench as harness
from georag._io import atomic_write
from georag.experiments.folds import learned_folds
from georag.experiments.roles import CORPUS_TOP_K, needs_corpus, run_dataset
from georag.experiments.sections import write_learned
from georag.experiments.selection import LearnedRun, parse_args, selection_of
from georag.experiments.significance import learned_rows, metrics_of
from georag.experiments.tables import (
    learned_header,
    learned_markdown,
    protocol_text,
    training_text,
)
from georag.perf.timing import timed
from georag.resources import DEFAULT_MODEL
from georag.retrieval.encoder import TextEncoder


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv, doc=__doc__)
    bench = harness.start(
        args, config={"datasets": args.datasets, "methods": args.methods}, device="cpu"
    )
    run = LearnedRun.from_args(args)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    encoder = None if args.render else TextEncoder(DEFAULT_MODEL, show_progress=False)
    heading, selection, options = selection_of(run)
    for dataset in [] if args.render else args.datasets:
        load_start = os.getloadavg()[0]
        result, seconds = timed(
            lambda dataset=dataset: run_dataset(
                dataset,
                learned_folds(
                    dataset,
                    data_dir=args.data_dir,
                    encoder=encoder,
                    corpus=needs_corpus(run.methods),
                    folds=run.folds,
                    val_fraction=run.training.val_fraction,
                    seed=run.seed,
                ),
                run,
            )
        )
        metrics = metrics_of(dataset)
        path = work / f"{dataset}__{selection}.json"
        protocol = protocol_text(
            dataset, folds=run.folds, seed=run.seed, work_file=str(path)
        ) + training_text(result["training"], result["notes"], run.training.val_fraction)
        saved = {
            "title": dataset + heading,
            "metrics": metrics,
            "rows": learned_rows(result, metrics, resamples=run.resamples, seed=run.seed),
            "notes": result["notes"],
            "folds": result["folds"],
            "training": result["training"],
            "protocol": protocol,
            "command": f"python scripts/quality/quality_learned.py --datasets {dataset} {options}",
            "note": args.note,
            "date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min",
            "load": f"{load_start:.1f} -> {os.getloadavg()[0]:.1f}",
        }
        atomic_write(path, json.dumps(saved, indent=1, default=str))
        print(learned_markdown(saved), flush=True)
    header = learned_header(
        machine=platform.machine(),
        threads=torch.get_num_threads(),
        torch_version=torch.__version__,
        corpus_top_k=CORPUS_TOP_K,
    )
    titles = write_learned(work, Path(args.out), header, Path(args.tex) if args.tex else None)
    bench.finish({"sections": titles, "out": str(args.out)})


if __name__ == "__main__":
    main()
