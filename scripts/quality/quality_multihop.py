"""Phrase-graph PPR on multi-hop sets, against the learned map and a BM25-fused baseline.

Rows (every one ranks the whole pooled corpus; the top 100 is kept):

* ``dense``: cosine of all-MiniLM-L6-v2;
* ``map alone``: the learned map's score (``learned_map``, trained on the training
  queries as scripts/quality/quality_learned.py trains it);
* ``map+bm25``: ``map + b * BM25 / max BM25`` (bm25s, k1 = 1.2, b = 0.75), ``b`` tuned; the
  non-geometric baseline;
* ``map+phrase-PPR``: :class:`~georag.rerank.phrase_ppr.PhrasePPR`, ``map + w * PPR/max``
  over the passage-phrase graph, seeded from the map's scores and the query's phrases;
  ``w`` and ``passage_weight`` tuned;
* ``map+bm25+phrase-PPR``: the same residual on top of ``map+bm25`` (its ``b``), ``w`` and
  ``passage_weight`` tuned;
* ``iso paper`` and ``ppr_global``: ISO-RAG and whole-graph PPR over the passage graph at
  their defaults (no training; the reference rows of docs/learned_results.md).

Tuned knobs are chosen on the training queries only, by Recall@5 over a fixed grid (ties:
the first in grid order, which starts at weight 0, the baseline). Protocols:
``hotpotqa_dev500``: seeded 5-fold cross-validation over its 500 questions (the folds of
scripts/quality/quality_learned.py: the map and every knob of a fold come from the other four);
``musique``: everything trained and tuned on ``musique_train100`` (its own corpus and
graph) and reported on ``musique_qa100``. Statistics: mean with a 95% bootstrap interval,
paired randomization test of Recall@5 of each graph row against ``map alone`` and
against the best non-geometric row (the one of higher report Recall@5 among map alone and
map+bm25, which can only favour the baseline), Holm over all tests of a data set.
``recall@100`` is the pool recall: the dense row's is the pool before expansion.

Usage: ``python scripts/quality/quality_multihop.py --data-dir ../shared/data --threads 1``
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from georag._io import atomic_write
from georag.batch import QueryBatch, scores_to_run
from georag.experiments.folds import training_subset
from georag.experiments.significance import holm_tests, interval_rows, per_query_arrays
from georag.experiments.training import Training, add_training_options, fit
from georag.perf.bench import bench_parser, start
from georag.rerank.iso import IsoRag
from georag.rerank.phrase_ppr import PhrasePPR, PhrasePPRConfig, phrase_ppr_feature
from georag.rerank.ppr_global import GlobalPPR
from georag.retrieval.bm25 import BM25Index
from georag.retrieval.encoder import TextEncoder
from georag.retrieval.passage_graph import corpus_graph
from georag.retrieval.phrase_graph import query_phrase_weights
from train.corpus_data import QuerySet, load_query_set
from train.pools import kfold_split, load_pool

METRICS = ("recall@5", "recall@2", "ndcg@10", "recall@100")
TOP_K = 100
WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
BM25_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
PASSAGE_WEIGHTS = (0.05, 0.3, 1.0)
BASELINES = ("map alone", "map+bm25")
GRAPH_ROWS = ("map+phrase-PPR", "map+bm25+phrase-PPR", "iso paper", "ppr_global")


def recall_at(scores: torch.Tensor, gains: torch.Tensor, k: int) -> float:
    """Mean Recall@k of score rows (B, N) against gains (B, N), ties by position."""
    top = scores.topk(k, dim=1, sorted=True).indices
    found = (gains.gather(1, top) > 0).sum(dim=1).float()
    return float((found / (gains > 0).sum(dim=1).clamp_min(1)).mean())


def bm25_scores(index: BM25Index, texts: list[str], n: int) -> torch.Tensor:
    """BM25 of every corpus row over each query's largest (0 where a query matches nothing)."""
    top, rows = index.search(texts, n)
    scores = torch.zeros(len(texts), n).scatter_(1, rows, top)
    return scores / scores.amax(dim=1, keepdim=True).clamp_min(1e-12)


def choose(candidates: dict, gains: torch.Tensor) -> tuple:
    """The key of the best score matrix by training Recall@5 (the first on ties)."""
    best = max(
        candidates,
        key=lambda key: (recall_at(candidates[key], gains, 5), -list(candidates).index(key)),
    )
    return best


class Fold:
    """One training/report split: the scorers fitted on its corpora, the tuned knobs."""

    def __init__(self, label: str, train_pool, train: QuerySet, report: QuerySet, args, work: Path):
        self.label, self.train, self.report = label, train, report
        # the knobs are tuned on all training queries, or a seeded --tune-queries of them
        rows = training_subset(len(train.batch.ids), args.tune_queries, args.seed)
        self.tune_set = train if len(rows) == len(train.batch.ids) else train.subset(rows)
        self.map, self.train_s, self.note = fit(
            "learned_map", {}, train_pool, Training.from_args(args), work / label
        )
        self.map_path = work / label / "map.pt"
        self.map.save(self.map_path)
        started = time.perf_counter()
        self.tune()
        self.tune_s = time.perf_counter() - started

    def scorer(self, queries: QuerySet, **knobs) -> PhrasePPR:
        config = PhrasePPRConfig(map=str(self.map_path), **knobs)
        return PhrasePPR(config).fit(queries.corpus)

    def features(self, queries: QuerySet, scorer: PhrasePPR, base: torch.Tensor) -> dict:
        phrases = query_phrase_weights(queries.batch.texts, scorer.graph)
        cfg = scorer.config
        return {
            share: phrase_ppr_feature(
                scorer.csr,
                base,
                phrases,
                num_sources=cfg.num_sources,
                passage_weight=share,
                damping=cfg.damping,
                tol=cfg.tol,
                max_iter=cfg.max_iter,
                block_size=cfg.block_size,
            )
            for share in PASSAGE_WEIGHTS
        }

    def parts(self, queries: QuerySet) -> tuple[torch.Tensor, torch.Tensor, dict]:
        scorer = self.scorer(queries)
        base = scorer.base_scores(queries.batch)
        corpus = queries.corpus
        index = BM25Index.build([f"{t} {x}" for t, x in zip(corpus.titles, corpus.texts)])
        lexical = bm25_scores(index, queries.batch.texts, len(corpus.doc_ids))
        return base, lexical, self.features(queries, scorer, base)

    def tune(self) -> None:
        base, lexical, features = self.parts(self.tune_set)
        gains = self.tune_set.gains
        self.b = choose({b: base + b * lexical for b in BM25_WEIGHTS}, gains)
        fused = base + self.b * lexical
        self.ppr = choose(
            {(s, w): base + w * features[s] for s in PASSAGE_WEIGHTS for w in WEIGHTS}, gains
        )
        self.ppr_bm25 = choose(
            {(s, w): fused + w * features[s] for s in PASSAGE_WEIGHTS for w in WEIGHTS}, gains
        )

    def runs(self) -> dict[str, dict]:
        """Every row's run over this split's report queries."""
        q = self.report
        base, lexical, features = self.parts(q)
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

    def knobs(self) -> dict:
        return {
            "bm25_weight": self.b,
            "phrase_ppr": {"passage_weight": self.ppr[0], "weight": self.ppr[1]},
            "bm25+phrase_ppr": {"passage_weight": self.ppr_bm25[0], "weight": self.ppr_bm25[1]},
            "map_val": [self.note["val_init"], self.note["val_best"]],
            "map_train_s": self.train_s,
            "tuned_on": len(self.tune_set.batch.ids),
            "tune_s": self.tune_s,
        }


def folds_of(name: str, args, encoder) -> list[tuple]:
    """``(label, training pool, training queries, report queries)`` of each split."""
    data = str(args.data_dir)
    if name == "musique":
        pool = load_pool("musique_train100", data_dir=data, encoder=encoder)
        train = load_query_set("musique_train100", data_dir=data, encoder=encoder)
        report = load_query_set("musique_qa100", data_dir=data, encoder=encoder)
        return [("train100", pool, train, report)]
    pool = load_pool(name, data_dir=data, encoder=encoder)
    queries = load_query_set(name, data_dir=data, encoder=encoder)
    if queries.batch.ids != pool.batch.query_ids:
        raise ValueError(f"{name}: pool and corpus queries differ in order")
    out = []
    for fold in range(args.folds):
        train, report = kfold_split(
            len(queries.batch.ids), folds=args.folds, fold=fold, seed=args.seed
        )
        out.append(
            (f"fold{fold}", pool.subset(train), queries.subset(train), queries.subset(report))
        )
    return out


def statistics(runs: dict, qrels: dict, args) -> list[dict]:
    """Means, intervals and the Holm-corrected tests of the module docstring."""
    _, values = per_query_arrays(runs, qrels, METRICS)
    primary = METRICS[0]
    best = max(BASELINES, key=lambda n: values[n][primary].mean())
    resampling = {"resamples": args.resamples, "seed": args.seed}
    rows = interval_rows(values, METRICS, **resampling)
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


def markdown(rows: list[dict], seconds: dict) -> str:
    names = {"recall@5": "R@5", "recall@2": "R@2", "ndcg@10": "NDCG@10", "recall@100": "pool R@100"}
    best = rows[0]["best_baseline"]
    head = (
        "| method | "
        + " | ".join(f"{names[m]} [95% CI]" for m in METRICS)
        + f" | ΔR@5 vs map alone | p (Holm) | ΔR@5 vs {best} | p (Holm) | training s |\n|"
        + "---|" * (len(METRICS) + 6)
    )
    lines = [head]
    for r in rows:
        cells = [r["method"]] + [
            f"{r[m]:.4f} [{r[m + '_ci'][0]:.4f}, {r[m + '_ci'][1]:.4f}]" for m in METRICS
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
    weight of at least 0.1 so that PPR runs) at B=1 and batched over ``report``."""
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
            for i in range(repeats)
        ]
        single = bench.time(
            lambda i, m=method, one=one: m.retrieve(one[i % repeats], top_k=TOP_K),
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


_SPLITS: list[tuple] = []  # the data set's splits, inherited by forked workers


def run_split(index: int, name: str, args) -> dict:
    """Train, tune and run one split; its runs, qrels, knobs and CPU seconds."""
    cpu = time.process_time()
    label, pool, train, report = _SPLITS[index]
    fold = Fold(label, pool, train, report, args, args.work / name)
    runs = fold.runs()
    knobs = {**fold.knobs(), "cpu_s": time.process_time() - cpu}
    print(
        f"{name} {label}: {len(train.batch.ids)} training, {len(report.batch.ids)} "
        f"report queries; {knobs}",
        flush=True,
    )
    return {"label": label, "runs": runs, "qrels": report.qrels, "knobs": knobs}


def run_splits(name: str, args) -> list[dict]:
    """:func:`run_split` of every split, in ``--jobs`` forked processes (one torch thread
    each) or one after another here."""
    if args.jobs == 1:
        return [run_split(i, name, args) for i in range(len(_SPLITS))]
    with ProcessPoolExecutor(
        max_workers=min(args.jobs, len(_SPLITS)),
        mp_context=multiprocessing.get_context("fork"),
        initializer=torch.set_num_threads,
        initargs=(1,),
    ) as pool:
        futures = [pool.submit(run_split, i, name, args) for i in range(len(_SPLITS))]
        return [f.result() for f in futures]


def main() -> None:
    parser = bench_parser(__doc__, repeats=20, device=False)
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["hotpotqa_dev500", "musique"],
        choices=["hotpotqa_dev500", "musique"],
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
    args = parser.parse_args()
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
        _SPLITS[:] = folds_of(name, args, encoder)
        for split in {id(q.corpus): q for _, _, t, r in _SPLITS for q in (t, r)}.values():
            PhrasePPR().fit(split.corpus)  # build both graphs once, before any fork
            corpus_graph(split.corpus)
        runs, qrels, knobs = {}, {}, {}
        for part in run_splits(name, args):
            for row, run in part["runs"].items():
                runs.setdefault(row, {}).update(run)
            qrels.update(part["qrels"])
            knobs[part["label"]] = part["knobs"]
        # the map's training, plus the one grid search that tunes every fused row
        trained = sum(k["map_train_s"] for k in knobs.values())
        tuned = trained + sum(k["tune_s"] for k in knobs.values())
        seconds = {"map alone": trained, **{n: tuned for n in ("map+bm25", *GRAPH_ROWS[:2])}}
        rows = statistics(runs, qrels, args)
        table = markdown(rows, seconds)
        print(
            f"\n=== {name} ({rows[0]['queries']} report queries; "
            f"{time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f})\n{table}\n",
            flush=True,
        )
        results[name] = {
            "rows": rows,
            "knobs": knobs,
            "seconds": seconds,
            "table": table,
            "cost": cost(
                _SPLITS[0][3],
                args.work / name / _SPLITS[0][0] / "map.pt",
                knobs[_SPLITS[0][0]],
                bench,
                args.repeats,
            ),
        }
        atomic_write(args.work / f"{name}.json", json.dumps(results[name], indent=1, default=str))
    bench.finish(results)


if __name__ == "__main__":
    main()
