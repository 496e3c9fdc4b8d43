"""Corpus-graph adaptive reranking (gar) against its scorer alone, with the same budget.

For each data set and budget c (documents scored per query), on the exact dense
all-MiniLM-L6-v2 top-c pool of every report query:

* ``<scorer> alone``: the scorer over the pool (``dense``: the first-stage cosine order;
  ``map``: ``learned_map`` trained on training queries only);
* ``gar <graph> + <scorer>``: :class:`~georag.retrievers.gar.AdaptiveReranker` with that scorer
  over the same pool, expanding through the dense k-NN or the BM25 corpus graph (k = 16,
  b = 16), scoring c documents per query in all.

Columns: NDCG@10, Recall@10, MRR@10 (95% percentile bootstrap), the pool recall R@100 and
R@1000 of the run (before expansion: the scorer-alone rows, whose run is the pool; after:
the gar rows), and a paired two-sided randomization test of NDCG@10 against the scorer alone
at the same budget, Holm-corrected over the gar rows of the data set.

Protocols (``scripts/quality/quality_learned.py``'s folds): scifact trains on ``qrels/train.tsv``
(a seeded 20% held out for early stopping) and reports on test; cranfield and cisi use
seeded 5-fold cross-validation over queries, each fold reported by a map trained on the
other four. Nothing is chosen on a report query; gar has no trained knob (paper defaults).

Every row's per-query run (each report query's top 100; the ``dense alone (c=100)`` row,
the pool's first-stage order, saved as ``dense``), the folds, the qrels, the protocol and
each row's geometric flag (the gar rows) and training seconds (the map's, for the rows that
use it) are saved with :func:`georag.experiments.runs.save_runs` in ``--work``
(``<dataset>.runs.json.gz``) for ``scripts/quality/quality_combined.py``.

Also: the corpus-graph build time and size of every corpus in ``--graph-datasets``, and ms
per query (wall and process CPU) of gar beside its scorer alone at B=1 (median) and batched
(all test queries in one call), threads pinned.

Usage::

    GEORAG_DATA=../shared/data python scripts/quality/quality_gar.py --threads 1 \\
        --datasets scifact cranfield cisi --out docs/methods/gar_results.md
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import georag.perf.bench as harness
from georag._io import atomic_write
from georag.experiments.gar import (
    graph_costs,
    latency,
    markdown,
    query_runs,
    run_dataset,
    statistics,
    table,
)
from georag.experiments.runs import save_runs
from georag.experiments.training import add_training_options
from georag.perf.timing import timed
from georag.resources import DEFAULT_MODEL
from georag.retrieval.encoder import TextEncoder


def parse_args(argv=None):
    parser = harness.bench_parser(__doc__, repeats=None, out="--json", device=False)
    parser.set_defaults(threads=1)
    parser.add_argument("--datasets", nargs="*", default=["scifact", "cranfield", "cisi"])
    parser.add_argument("--graph-datasets", nargs="*", default=None, help="default: --datasets")
    parser.add_argument("--latency-dataset", default="scifact", help="'': no cost table")
    parser.add_argument("--latency-samples", type=int, default=20)
    parser.add_argument("--budgets", nargs="+", type=int, default=[100, 1000])
    parser.add_argument("--graphs", nargs="+", default=["dense", "bm25"])
    parser.add_argument("--scorers", nargs="+", choices=("dense", "map"), default=["dense", "map"])
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16, help="gar's scoring batch b")
    add_training_options(parser)  # the map's training and the folds, as quality_learned
    parser.add_argument("--work", default="runs/combined/gar")
    parser.add_argument("--out", default="runs/combined/gar/results.md")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    bench = harness.start(
        args, config={k: v for k, v in vars(args).items() if k != "bench_out"}, device="cpu"
    )
    encoder = TextEncoder(DEFAULT_MODEL, show_progress=False)
    sections = [f"Command: `python scripts/quality/quality_gar.py {' '.join(sys.argv[1:])}`"]
    results: dict = {}
    for dataset in args.datasets:
        load = os.getloadavg()[0]
        result, seconds = timed(lambda dataset=dataset: run_dataset(dataset, args, encoder))
        rows = statistics(result, args)
        results[dataset] = {"rows": rows, "train_s": result["train_s"], "notes": result["notes"]}
        protocol = (
            "train on qrels/train.tsv, report on test"
            if dataset == "scifact"
            else f"{args.folds}-fold CV over queries, seed {args.seed}"
        )
        sections.append(
            f"### {dataset} ({rows[0]['queries']} report queries; {protocol}; map training "
            f"{result['train_s']:.1f} s; section wall {seconds:.0f} s, load {load:.1f})\n\n"
            + table(rows)
        )
        print(sections[-1], flush=True)
        date = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min"
        extra = {"date": date, "load": f"{load:.1f} -> {os.getloadavg()[0]:.1f}"}
        save_runs(args.work, query_runs(dataset, result, args, protocol, extra))
        atomic_write(Path(args.out), "\n\n".join(sections) + "\n")  # each section when done
    graph_sets = args.datasets if args.graph_datasets is None else args.graph_datasets
    graphs = graph_costs(graph_sets, args, encoder)
    keys = ("dataset", "graph", "docs", "k", "build_s", "cpu_s", "mib", "load")
    sections.append("### corpus graphs\n\n" + markdown(graphs, keys))
    timing = latency(args.latency_dataset, args, encoder) if args.latency_dataset else []
    if timing:
        keys = ("method", "ms_b1", "cpu_ms_b1", "ms_batched", "cpu_ms_batched", "queries")
        keys += ("threads", "load")
        sections.append(f"### cost ({args.latency_dataset})\n\n" + markdown(timing, keys))
    print("\n\n".join(sections[-2:]))
    atomic_write(Path(args.out), "\n\n".join(sections) + "\n")
    bench.finish({"quality": results, "graphs": graphs, "latency": timing, "time": time.time()})


if __name__ == "__main__":
    main()
