"""Phrase-graph PPR against the learned map and a BM25-fused baseline, one table per data set.

Rows (every one ranks the whole corpus; the top 100 is kept):

* ``dense``: cosine of all-MiniLM-L6-v2;
* ``map alone``: the learned map's score (``learned_map``, trained on the training
  queries as scripts/quality/quality_learned.py trains it);
* ``map+bm25``: ``map + b * BM25 / max BM25`` (bm25s, k1 = 1.2, b = 0.75), ``b`` tuned; the
  non-geometric baseline;
* ``map+phrase-PPR``: :class:`~georag.retrievers.phrase_ppr.PhrasePPR`, ``map + w * PPR/max``
  over the passage-phrase graph, seeded from the map's scores and the query's phrases;
  ``w`` and ``passage_weight`` tuned;
* ``map+bm25+phrase-PPR``: the same residual on top of ``map+bm25`` (its ``b``), ``w`` and
  ``passage_weight`` tuned;
* ``iso paper`` and ``ppr_global``: ISO-RAG and whole-graph PPR over the passage graph at
  their defaults (no training; the reference rows of docs/learned_results.md).

Dense, map alone and map+bm25 are the non-geometric rows; the phrase rows, iso paper and
ppr_global the geometric ones.

Splits: :func:`georag.experiments.folds.learned_folds` (the splits of
scripts/quality/quality_geometry_adds.py and quality_learned.py, seed 0): ``scifact`` trains
on ``qrels/train.tsv`` and reports on test; ``cranfield``, ``cisi``, ``musique_qa100`` and
``hotpotqa_dev500`` use seeded 5-fold cross-validation over their queries (the map and every
knob of a fold come from the other four). ``musique`` is a transfer: everything trained and
tuned on ``musique_train100`` (its own corpus and graph), reported on ``musique_qa100``.

Tuned knobs are chosen on the training queries only, by the data set's tested metric
(:func:`georag.experiments.significance.metrics_of`: NDCG@10 on the BEIR sets, Recall@5 on
the multi-hop ones) over a fixed grid (ties: the first in grid order, which starts at
weight 0, the baseline). Statistics: mean with a 95% bootstrap interval, paired
randomization test of the tested metric of each graph row against ``map alone`` and
against the best non-geometric row (the one of highest report mean among dense, map alone
and map+bm25, which can only favour the baseline), Holm over all tests of a data set.
``recall@100`` is the pool recall: the dense row's is the pool before expansion.

Every row's per-query runs go to ``--runs-out`` (:func:`georag.experiments.runs.save_runs`,
one file per data set; the transfer as ``musique_transfer``), with the folds, the qrels,
the protocol, the command, and per row whether it is geometric, its training seconds and
its tuned knobs.

Usage::

    python scripts/quality/quality_multihop.py --data-dir ../shared/data --datasets scifact
"""

from __future__ import annotations

import json
import os
import time

from georag._io import atomic_write
from georag.experiments.entity_trained import BM25_WEIGHTS
from georag.experiments.phrase_multihop import (
    PASSAGE_WEIGHTS,
    SPLITS,
    TOP_K,
    WEIGHTS,
    cost,
    folds_of,
    markdown,
    metrics_for,
    parse_args,
    query_runs,
    run_splits,
    statistics,
)
from georag.experiments.runs import save_runs
from georag.perf.bench import start
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.passage_graph import corpus_graph
from georag.retrievers.phrase_ppr import PhrasePPR, PhrasePPRConfig


def main() -> None:
    args = parse_args(doc=__doc__)
    bench = start(
        args,
        config={
            "phrase_ppr": PhrasePPRConfig(),
            "grid": {"weight": WEIGHTS, "bm25": BM25_WEIGHTS, "passage_weight": PASSAGE_WEIGHTS},
        },
        device="cpu",
    )
    encoder = TextEncoder(show_progress=False)
    results = {}
    for name in args.datasets:
        started = time.perf_counter()
        metrics = metrics_for(name)
        args.metric = metrics[0]  # tuned on, and tested
        SPLITS[:] = folds_of(name, args, encoder)
        for split in {id(q.corpus): q for _, _, t, r in SPLITS for q in (t, r)}.values():
            graph_started = time.perf_counter()
            PhrasePPR().fit(split.corpus)  # build both graphs once, before any fork
            corpus_graph(split.corpus)
            print(
                f"{name}: graphs of {len(split.corpus.doc_ids)} passages ready in "
                f"{time.perf_counter() - graph_started:.1f} s",
                flush=True,
            )
        parts = run_splits(name, args)
        saved = query_runs(name, parts, args)
        path = save_runs(args.runs_out, saved, k=TOP_K)
        seconds = {row: info["train_s"] for row, info in saved.extra["rows"].items()}
        rows = statistics(saved.runs, saved.qrels, metrics, args)
        table = markdown(rows, metrics, seconds)
        print(
            f"\n=== {name} ({rows[0]['queries']} report queries; "
            f"{time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}; "
            f"runs: {path})\n{table}\n",
            flush=True,
        )
        knobs = {part["label"]: part["knobs"] for part in parts}
        label, report = SPLITS[0][0], SPLITS[0][3]
        results[name] = {
            "rows": rows,
            "knobs": knobs,
            "seconds": seconds,
            "protocol": saved.protocol,
            "table": table,
            "cost": cost(
                report, args.work / name / label / "map.pt", knobs[label], bench, args.repeats
            ),
        }
        atomic_write(args.work / f"{name}.json", json.dumps(results[name], indent=1, default=str))
    bench.finish(results)


if __name__ == "__main__":
    main()
