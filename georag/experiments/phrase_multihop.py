"""The phrase-graph PPR experiment of ``scripts/quality/quality_multihop.py``: rows, splits,
tuned knobs, per-query runs, statistics and the table.

Rows (every one ranks the whole corpus; the top :data:`TOP_K` is kept): ``dense``, ``map
alone`` (the learned map), ``map+bm25`` (``map + b * BM25 / max BM25``), ``map+phrase-PPR``
and ``map+bm25+phrase-PPR`` (:class:`~georag.retrievers.phrase_ppr.PhrasePPR`'s residual
``w * PPR / max`` on top), ``iso paper`` and ``ppr_global`` at their defaults;
:data:`GEOMETRIC` flags the geometric ones.

* :class:`Fold`: one training / report split; the map fitted on its training pool, the
  knobs chosen by :func:`choose` on the training queries (the data set's tested metric,
  :func:`mean_metric`), every row's run over its report queries;
* :func:`folds_of`: the splits (:func:`~georag.experiments.folds.learned_folds`, or the
  musique transfer); :func:`run_splits`: every split, side by side in forked processes;
* :func:`query_runs`, :func:`statistics`, :func:`markdown`: the runs file, the means,
  intervals and Holm-corrected tests, the table; :func:`cost`: ms per query of two rows.
"""

from __future__ import annotations

import multiprocessing
import os
import shlex
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from georag.batch import QueryBatch, scores_to_run
from georag.experiments.entity_trained import BM25_WEIGHTS
from georag.experiments.folds import learned_folds, training_subset
from georag.experiments.runs import QueryRuns
from georag.experiments.significance import holm_tests, interval_rows, metrics_of, per_query_arrays
from georag.experiments.training import Training, add_training_options, fit
from georag.perf.bench import bench_parser
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.phrase_graph import query_phrase_weights
from georag.retrievers.iso import IsoRag
from georag.retrievers.phrase_ppr import PhrasePPR, PhrasePPRConfig, phrase_ppr_feature
from georag.retrievers.ppr_global import GlobalPPR
from train.corpus_data import QuerySet, load_query_set
from train.losses import ndcg_at_k
from train.pools import load_pool

TRANSFER = "musique"  # trained on musique_train100, reported on musique_qa100
DATASETS = ("scifact", "cranfield", "cisi", "musique_qa100", "hotpotqa_dev500", TRANSFER)
POOL_RECALL = "recall@100"
TOP_K = 100
CHUNK = 128  # queries per phrase-PPR solve: bounds the (N + P, B) teleport and mass
WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
PASSAGE_WEIGHTS = (0.05, 0.3, 1.0)
GEOMETRIC = {
    "dense": False,
    "map alone": False,
    "map+bm25": False,
    "map+phrase-PPR": True,
    "map+bm25+phrase-PPR": True,
    "iso paper": True,
    "ppr_global": True,
}
BASELINES = tuple(row for row, geometric in GEOMETRIC.items() if not geometric)
GRAPH_ROWS = tuple(row for row, geometric in GEOMETRIC.items() if geometric)


def metrics_for(name: str) -> tuple[str, ...]:
    """The table's metrics of data set ``name`` (the first is tuned and tested), then the
    pool recall."""
    return metrics_of("musique_qa100" if name == TRANSFER else name) + (POOL_RECALL,)


def runs_name(name: str) -> str:
    """The data set name of ``name``'s runs file (the transfer is kept apart from the CV)."""
    return "musique_transfer" if name == TRANSFER else name


def mean_metric(scores: torch.Tensor, queries: QuerySet, metric: str) -> float:
    """Mean ``recall@k`` or ``ndcg@k`` (linear gains, as pytrec_eval) of score rows
    (B, N) over the corpus of ``queries``; ties by position."""
    kind, _, cut = metric.partition("@")
    k = int(cut)
    top = scores.topk(k, dim=1, sorted=True)
    gains = queries.gains.gather(1, top.indices)
    if kind == "recall":
        found = (gains > 0).sum(dim=1).float()
        return float((found / (queries.gains > 0).sum(dim=1).clamp_min(1)).mean())
    if kind == "ndcg":
        keep = torch.ones_like(gains, dtype=torch.bool)
        return float(ndcg_at_k(top.values, keep, gains, queries.ideal, k=k).mean())
    raise ValueError(f"metric: tuning supports recall@k and ndcg@k, got {metric!r}")


def bm25_scores(index: BM25Index, texts: list[str], n: int) -> torch.Tensor:
    """BM25 of every corpus row over each query's largest (0 where a query matches nothing)."""
    top, rows = index.search(texts, n)
    scores = torch.zeros(len(texts), n).scatter_(1, rows, top)
    return scores / scores.amax(dim=1, keepdim=True).clamp_min(1e-12)


def choose(candidates: Iterable[tuple], queries: QuerySet, metric: str):
    """The key of the best ``(key, scores (B, N))`` candidate by ``metric`` over ``queries``
    (the first on ties); the candidates are scored one at a time."""
    best, best_value = None, -float("inf")
    for key, scores in candidates:
        value = mean_metric(scores, queries, metric)
        if value > best_value:
            best, best_value = key, value
    return best


class Fold:
    """One training/report split: the scorers fitted on its corpora, the tuned knobs."""

    def __init__(self, label: str, train_pool, train: QuerySet, report: QuerySet, args, work: Path):
        self.label, self.train, self.report = label, train, report
        self.metric = args.metric
        # the knobs are tuned on all training queries, or a seeded --tune-queries of them
        rows = training_subset(len(train.batch.ids), args.tune_queries, args.seed)
        self.tune_set = train if len(rows) == len(train.batch.ids) else train.subset(rows)
        self.map, self.train_s, self.note = fit(
            "learned_map", {}, train_pool, Training.from_args(args), work / label
        )
        self.map_path = work / label / "map.pt"
        self.map.save(self.map_path)
        self.tune()

    def scorer(self, queries: QuerySet, **knobs) -> PhrasePPR:
        """PhrasePPR over this fold's map, fitted on the corpus of ``queries``."""
        config = PhrasePPRConfig(map=str(self.map_path), **knobs)
        return PhrasePPR(config).fit(queries.corpus)

    @staticmethod
    def features(queries: QuerySet, scorer: PhrasePPR, base: torch.Tensor) -> dict:
        """``{passage_weight: PPR feature (B, N)}``, solved :data:`CHUNK` queries at a time."""
        cfg, parts = scorer.config, {share: [] for share in PASSAGE_WEIGHTS}
        for first in range(0, len(queries.batch.ids), CHUNK):
            rows = slice(first, first + CHUNK)
            phrases = query_phrase_weights(queries.batch.texts[rows], scorer.graph)
            for share in PASSAGE_WEIGHTS:
                parts[share].append(
                    phrase_ppr_feature(
                        scorer.csr, base[rows], phrases, **cfg.feature_options(share)
                    )
                )
        return {share: torch.cat(found) for share, found in parts.items()}

    @staticmethod
    def lexical(queries: QuerySet) -> torch.Tensor:
        """BM25 of every corpus row over each query's largest, ``(B, N)``."""
        corpus = queries.corpus
        index = BM25Index.build([f"{t} {x}" for t, x in zip(corpus.titles, corpus.texts)])
        return bm25_scores(index, queries.batch.texts, len(corpus.doc_ids))

    def tune(self) -> None:
        """Choose ``b``, then the two phrase rows' knobs, timing each search (seconds of
        the BM25 scores and their search, of the PPR features and their search, and of the
        search on top of map+bm25)."""
        q, metric, clock = self.tune_set, self.metric, time.perf_counter
        scorer = self.scorer(q)
        base = scorer.base_scores(q.batch)
        self.seconds = {}
        started = clock()
        lexical = self.lexical(q)
        self.b = choose(((b, base + b * lexical) for b in BM25_WEIGHTS), q, metric)
        self.seconds["bm25"] = clock() - started
        started = clock()
        features = self.features(q, scorer, base)
        grid = [(s, w) for s in PASSAGE_WEIGHTS for w in WEIGHTS]
        self.ppr = choose(((k, base + k[1] * features[k[0]]) for k in grid), q, metric)
        self.seconds["phrase"] = clock() - started
        started = clock()
        fused = base + self.b * lexical
        self.ppr_bm25 = choose(((k, fused + k[1] * features[k[0]]) for k in grid), q, metric)
        self.seconds["bm25+phrase"] = clock() - started

    def runs(self) -> dict[str, dict]:
        """Every row's run over this split's report queries."""
        q = self.report
        scorer = self.scorer(q)
        base = scorer.base_scores(q.batch)
        lexical, features = self.lexical(q), self.features(q, scorer, base)
        raw = q.batch.embeddings @ q.corpus.embeddings.T
        fused = base + self.b * lexical
        scores = {
            "dense": raw,
            "map alone": base,
            "map+bm25": fused,
            "map+phrase-PPR": base + self.ppr[1] * features[self.ppr[0]],
            "map+bm25+phrase-PPR": fused + self.ppr_bm25[1] * features[self.ppr_bm25[0]],
        }
        out = {name: self._run(s, q) for name, s in scores.items()}
        for name, method in (("iso paper", IsoRag()), ("ppr_global", GlobalPPR())):
            result = method.fit(q.corpus).retrieve(q.batch, top_k=TOP_K)
            out[name] = scores_to_run(result.scores, result.keep, q.batch.ids, method.row_ids)
        return out

    @staticmethod
    def _run(scores: torch.Tensor, q: QuerySet) -> dict:
        keep = torch.zeros_like(scores, dtype=torch.bool)
        keep.scatter_(1, scores.topk(TOP_K, dim=1).indices, True)
        return scores_to_run(scores, keep, q.batch.ids, q.corpus.doc_ids)

    def row_seconds(self) -> dict[str, float]:
        """Training wall seconds of each row on this split: the map's training, plus the
        searches that tune the row (0 for the untrained rows)."""
        s, m = self.seconds, self.train_s
        return {
            "dense": 0.0,
            "map alone": m,
            "map+bm25": m + s["bm25"],
            "map+phrase-PPR": m + s["phrase"],
            "map+bm25+phrase-PPR": m + s["bm25"] + s["phrase"] + s["bm25+phrase"],
            "iso paper": 0.0,
            "ppr_global": 0.0,
        }

    def row_knobs(self) -> dict[str, dict]:
        """The tuned knobs of each row on this split."""
        return {
            "dense": {},
            "map alone": {
                "map_val": [self.note["val_init"], self.note["val_best"]],
                "epochs": self.note["epochs"],
            },
            "map+bm25": {"bm25_weight": self.b},
            "map+phrase-PPR": {"passage_weight": self.ppr[0], "weight": self.ppr[1]},
            "map+bm25+phrase-PPR": {
                "bm25_weight": self.b,
                "passage_weight": self.ppr_bm25[0],
                "weight": self.ppr_bm25[1],
            },
            "iso paper": {},
            "ppr_global": {},
        }

    def knobs(self) -> dict:
        """The fold's tuned knobs, the map's validation and training seconds, the tuning."""
        return {
            "bm25_weight": self.b,
            "phrase_ppr": {"passage_weight": self.ppr[0], "weight": self.ppr[1]},
            "bm25+phrase_ppr": {"passage_weight": self.ppr_bm25[0], "weight": self.ppr_bm25[1]},
            "map_val": [self.note["val_init"], self.note["val_best"]],
            "map_train_s": self.train_s,
            "tuned_on": len(self.tune_set.batch.ids),
            "tuned_by": self.metric,
            "tune_s": self.seconds,
        }


def folds_of(name: str, args, encoder) -> list[tuple]:
    """``(label, training pool, training queries, report queries)`` of each split: the
    folds of :func:`~georag.experiments.folds.learned_folds`, or the musique transfer."""
    data = None if args.data_dir is None else str(args.data_dir)
    if name == TRANSFER:
        pool = load_pool("musique_train100", data_dir=data, encoder=encoder)
        train = load_query_set("musique_train100", data_dir=data, encoder=encoder)
        report = load_query_set("musique_qa100", data_dir=data, encoder=encoder)
        return [("train100", pool, train, report)]
    folds = learned_folds(
        name,
        data_dir=data,
        encoder=encoder,
        corpus=True,
        folds=args.folds,
        val_fraction=args.val_fraction,
        seed=args.seed,
    )
    return [(f.label, f.train, f.train_queries, f.report_queries) for f in folds]


def protocol_of(name: str, splits: list[tuple], args) -> str:
    """The split, the map's training and the tuning of ``name``, in words."""
    train = args.epochs, args.patience, round(100 * args.val_fraction)
    map_line = (
        f"the map at most {train[0]} epochs, patience {train[1]}, a seeded {train[2]}% of "
        "its training queries held out for early stopping"
    )
    tuned = f"knobs tuned by {args.metric} on " + (
        f"a seeded {args.tune_queries} of the training queries"
        if args.tune_queries
        else "all training queries"
    )
    if name == TRANSFER:
        split = "trained and tuned on musique_train100 (its own corpus), reported on musique_qa100"
    elif name == "scifact":
        split = "train on qrels/train.tsv, report on qrels/test.tsv"
    else:
        split = f"seeded {len(splits)}-fold cross-validation over queries, seed {args.seed}"
    return f"{split}; {map_line}; {tuned}"


def query_runs(name: str, parts: list[dict], args) -> QueryRuns:
    """The :class:`~georag.experiments.runs.QueryRuns` of ``name`` from its splits'
    :func:`run_split` results: ``extra["rows"][row]`` holds ``geometric``, ``train_s``
    (wall seconds summed over the splits) and ``knobs`` (per split)."""
    runs, qrels = {}, {}
    for part in parts:
        for row, run in part["runs"].items():
            runs.setdefault(row, {}).update(run)
        qrels.update(part["qrels"])
    rows = {
        row: {
            "geometric": GEOMETRIC[row],
            "train_s": sum(part["seconds"][row] for part in parts),
            "knobs": {part["label"]: part["row_knobs"][row] for part in parts},
        }
        for row in runs
    }
    return QueryRuns(
        dataset=runs_name(name),
        source="multihop",
        protocol=protocol_of(name, parts, args),
        command=shlex.join(["python", *sys.argv]),
        folds={part["label"]: sorted(part["qrels"]) for part in parts},
        qrels=qrels,
        runs=runs,
        extra={"rows": rows, "metric": args.metric},
    )


def statistics(runs: dict, qrels: dict, metrics: tuple[str, ...], args) -> list[dict]:
    """Mean and 95% bootstrap interval of every row and metric; the paired randomization
    test of the tested metric (``metrics[0]``) of each geometric row against ``map alone``
    and against the best non-geometric row (highest report mean), Holm over all tests."""
    _, values = per_query_arrays(runs, qrels, metrics)
    primary = metrics[0]
    best = max(BASELINES, key=lambda n: values[n][primary].mean())
    resampling = {"resamples": args.resamples, "seed": args.seed}
    rows = interval_rows(values, metrics, **resampling)
    # one test per distinct baseline: when the best is the map alone, the two columns agree
    against = {"map": "map alone", "best": best}
    keys = ["map"] + (["best"] if best != "map alone" else [])
    tested = [(row, key) for row in rows if row["method"] in GRAPH_ROWS for key in keys]
    pairs = [(row["method"], against[key]) for row, key in tested]
    for (row, key), (delta, _, p_holm) in zip(
        tested, holm_tests(values, primary, pairs, **resampling), strict=True
    ):
        row[f"delta_{key}"], row[f"p_{key}"] = delta, p_holm
        if best == "map alone":
            row["delta_best"], row["p_best"] = delta, p_holm
    for row in rows:
        row["best_baseline"] = best
    return rows


NAMES = {
    "recall@5": "R@5",
    "recall@2": "R@2",
    "recall@10": "R@10",
    "ndcg@10": "NDCG@10",
    "mrr@10": "MRR@10",
    POOL_RECALL: "pool R@100",
}


def markdown(rows: list[dict], metrics: tuple[str, ...], seconds: dict) -> str:
    """The table of :func:`statistics`' rows, with each row's training seconds."""
    best, tested = rows[0]["best_baseline"], NAMES[metrics[0]]
    head = (
        "| method | "
        + " | ".join(f"{NAMES[m]} [95% CI]" for m in metrics)
        + f" | Δ{tested} vs map alone | p (Holm) | Δ{tested} vs {best} | p (Holm) "
        + "| training s |\n|"
        + "---|" * (len(metrics) + 6)
    )
    lines = [head]
    for r in rows:
        cells = [r["method"]] + [
            f"{r[m]:.4f} [{r[m + '_ci'][0]:.4f}, {r[m + '_ci'][1]:.4f}]" for m in metrics
        ]
        for key in ("map", "best"):
            cells += (
                [f"{r['delta_' + key]:+.4f}", f"{r['p_' + key]:.4f}"]
                if f"p_{key}" in r
                else ["", ""]
            )
        cells.append(f"{seconds[r['method']]:.1f}" if seconds.get(r["method"]) else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost(report: QuerySet, map_path: Path, knobs: dict, bench, repeats: int) -> dict:
    """ms per query of map alone and map+phrase-PPR (a split's tuned passage weight, and a
    weight of at least 0.1 so that PPR runs) at B=1 (the first ``repeats`` queries, cycled)
    and batched over ``report``."""
    q, tuned = report, knobs["phrase_ppr"]
    out = {}
    for name, options in (
        ("map alone", {}),
        (
            "map+phrase-PPR",
            {"weight": max(tuned["weight"], 0.1), "passage_weight": tuned["passage_weight"]},
        ),
    ):
        method = PhrasePPR(PhrasePPRConfig(map=str(map_path), **options)).fit(q.corpus)
        one = [
            QueryBatch([q.batch.ids[i]], [q.batch.texts[i]], q.batch.embeddings[i : i + 1])
            for i in range(min(repeats, len(q.batch.ids)))
        ]
        single = bench.time(
            lambda i, m=method, one=one: m.retrieve(one[i % len(one)], top_k=TOP_K),
            repeats=repeats,
        )
        batched = bench.time(
            lambda i, m=method: m.retrieve(q.batch, top_k=TOP_K), repeats=3, per=len(q.batch.ids)
        )
        out[name] = {"B=1 ms": single.median, f"B={len(q.batch.ids)} ms/query": batched.median}
        print(
            f"  cost {name}: B=1 {single.median:.2f} ms/query, B={len(q.batch.ids)} "
            f"{batched.median:.2f} ms/query (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
    return out


SPLITS: list[tuple] = []  # the data set's splits, inherited by forked workers


def run_split(index: int, name: str, args) -> dict:
    """Train, tune and run one split; its runs, qrels, knobs, row seconds and CPU seconds."""
    cpu = time.process_time()
    label, pool, train, report = SPLITS[index]
    fold = Fold(label, pool, train, report, args, args.work / name)
    runs = fold.runs()
    knobs = {**fold.knobs(), "cpu_s": time.process_time() - cpu}
    print(
        f"{name} {label}: {len(train.batch.ids)} training, {len(report.batch.ids)} "
        f"report queries; {knobs}",
        flush=True,
    )
    return {
        "label": label,
        "runs": runs,
        "qrels": report.qrels,
        "knobs": knobs,
        "seconds": fold.row_seconds(),
        "row_knobs": fold.row_knobs(),
    }


def run_splits(name: str, args) -> list[dict]:
    """:func:`run_split` of every split, in ``--jobs`` forked processes (one torch thread
    each) or one after another here."""
    if args.jobs == 1:
        return [run_split(i, name, args) for i in range(len(SPLITS))]
    with ProcessPoolExecutor(
        max_workers=min(args.jobs, len(SPLITS)),
        mp_context=multiprocessing.get_context("fork"),
        initializer=torch.set_num_threads,
        initargs=(1,),
    ) as pool:
        futures = [pool.submit(run_split, i, name, args) for i in range(len(SPLITS))]
        return [f.result() for f in futures]


def parse_args(argv: list[str] | None = None, *, doc: str | None = None):
    """The options of ``scripts/quality/quality_multihop.py`` (its docstring ``doc`` is the
    help text): the harness's, the data sets, the tuning subset, ``--jobs``, the map's
    training and folds (:func:`~georag.experiments.training.add_training_options`),
    ``--work`` and ``--runs-out``."""
    parser = bench_parser(doc, repeats=20, device=False)
    parser.add_argument(
        "--datasets", nargs="+", default=["hotpotqa_dev500", TRANSFER], choices=DATASETS
    )
    parser.add_argument(
        "--tune-queries",
        type=int,
        default=0,
        help="tune the knobs on a seeded this many of each split's training queries (0: all)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="splits run side by side in forked processes"
    )
    add_training_options(parser)  # the map's training and the folds, as quality_learned
    parser.add_argument("--work", type=Path, default=Path("runs/quality_multihop"))
    parser.add_argument(
        "--runs-out",
        type=Path,
        default=Path("runs/combined/multihop"),
        help="folder of the per-query runs files (georag.experiments.runs)",
    )
    return parser.parse_args(argv)
