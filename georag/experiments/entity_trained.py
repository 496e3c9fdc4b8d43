"""The trained section of the entity-graph multi-hop tables: HippoRAG 2 over a learned map.

Every row ranks the whole corpus of an evaluation set of
:mod:`georag.experiments.entity_multihop` (all-MiniLM-L6-v2, no language model):

* ``map``: the learned map's score (``learned_map`` trained by
  :func:`georag.experiments.training.fit` on the dense top-100 pools of the training
  queries), a bar;
* ``map+bm25``: ``map + b * BM25 / max BM25`` (BM25 over title and text,
  :mod:`georag.retrievers.lexical`), ``b`` tuned; the trained bar of the project;
* ``hipporag2 + map``: :class:`~georag.retrievers.hipporag2.HippoRAG2` at its defaults with
  the saved map (its score replaces the dense cosine in the passage seeds and the fusion);
* ``hipporag2 + map, fusion weight tuned``: the same with ``fusion_weight`` tuned;
* ``learned_hipporag2 + map``: the same with its damping, passage weight, fusion weight and
  synonym edge weight trained through PPR (:mod:`georag.retrievers.learned_hipporag2`) on
  the largest training set;
* ``learned_iso_entity``: ISO-RAG on the entity graph with its damping, fusion and pruning
  threshold trained the same way (:mod:`georag.retrievers.learned_iso_entity`; no map).

Training (:data:`TRAINING`): 2WikiMultihopQA's open corpus from 2wikimultihopqa_train500;
musique_qa100 from musique_train100 and musique_train200 together (one pool of both, the
question they share counted once); hotpotqa_dev500 by seeded k-fold cross-validation over
its own queries (:func:`georag.experiments.folds.learned_folds`: the map and the knobs of a
fold come from the other folds). A knob is tuned on the training queries only, each asked
against its own corpus, by mean Recall@5 over a fixed grid (ties: the first in grid order).

Metrics, intervals and tests: :func:`georag.experiments.entity_multihop.table_rows` with
``map`` and ``map+bm25`` as the bars (the better by Recall@5 is the baseline, Holm over the
rows); Markdown by :func:`~georag.experiments.entity_multihop.markdown`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import torch

from georag.batch import CandidateBatch, Corpus, QueryBatch, scores_to_run
from georag.eval.metrics import per_query
from georag.experiments.entity_multihop import (
    Prepared,
    fitted_run,
    prepare,
    query_values,
    table_rows,
)
from georag.experiments.folds import learned_folds, subset_training, training_subset
from georag.experiments.training import FOLDS, Training, fit
from georag.rerank.baselines.learned_map import LearnedMap
from georag.rerank.registry import make_reranker
from georag.retrieval.encoder import TextEncoder
from georag.retrievers.hipporag2 import HippoRAG2Config
from georag.retrievers.lexical import corpus_bm25
from georag.retrievers.phrase_ppr import map_scores, mapped_corpus
from train.corpus_data import QuerySet, load_query_set
from train.pools import Pool, load_pool

__all__ = [
    "BARS",
    "BM25_WEIGHTS",
    "FUSION_WEIGHTS",
    "ROWS",
    "TRAINING",
    "TUNED_BY",
    "Split",
    "concat_pools",
    "knob_lines",
    "map_parts",
    "run_split",
    "splits",
    "trained_table",
]

#: evaluation set -> its training sets; none: cross-validation over its own queries
TRAINING = {
    "2wikimultihopqa_hipporag": ("2wikimultihopqa_train500",),
    "musique_qa100": ("musique_train100", "musique_train200"),
    "hotpotqa_dev500": (),
}
ROWS = (
    "map",
    "map+bm25",
    "hipporag2 + map",
    "hipporag2 + map, fusion weight tuned",
    "learned_hipporag2 + map",
    "learned_iso_entity",
)
BARS = ROWS[:2]
#: the grid of ``b`` of map+bm25 (here and in scripts/quality/quality_multihop.py)
BM25_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
FUSION_WEIGHTS = (1.0, 5.0, 20.0, 100.0)
TUNED_BY = "recall@5"
TOP_K = 100


class Split(NamedTuple):
    """One training / report split.

    Attributes
    ----------
    label : str
        ``fold<i>`` or the training sets joined by ``+``.
    pool : Pool
        The training queries' dense top-100 pools (the map's training data).
    tune : tuple of QuerySet
        The same training queries, each set against its own corpus (the knobs' tuning).
    report : QueryBatch or None
        The reported queries of the evaluation set; None: all of them.
    """

    label: str
    pool: Pool
    tune: tuple[QuerySet, ...]
    report: QueryBatch | None


def concat_pools(pools: Sequence[Pool]) -> Pool:
    """The queries of several pools of equal width M in one pool (in order).

    Raises
    ------
    ValueError
        When the pools differ in width or share a query id.
    """
    batches = [p.batch for p in pools]
    ids = [q for b in batches for q in b.query_ids]
    if len(set(ids)) != len(ids):
        raise ValueError("pools: a query id is in more than one pool")
    if len({b.num_candidates for b in batches}) != 1:
        raise ValueError(f"pools: widths differ, {[b.num_candidates for b in batches]}")
    batch = CandidateBatch(
        query=torch.cat([b.query for b in batches]),
        cands=torch.cat([b.cands for b in batches]),
        scores=torch.cat([b.scores for b in batches]),
        mask=torch.cat([b.mask for b in batches]),
        query_ids=ids,
        doc_ids=[row for b in batches for row in b.doc_ids],
    )
    qrels = {q: judged for p in pools for q, judged in p.qrels.items()}
    return Pool(
        batch, qrels, torch.cat([p.gains for p in pools]), torch.cat([p.ideal for p in pools])
    )


def splits(
    name: str,
    *,
    data_dir: Path,
    encoder: TextEncoder,
    training: Training,
    train_sets: Sequence[str],
    folds: int = FOLDS,
    keep: int = 0,
) -> list[Split]:
    """The splits of evaluation set ``name``: one trained on ``train_sets``, or (none given)
    the ``folds`` folds of :func:`~georag.experiments.folds.learned_folds`.

    Parameters
    ----------
    name : str
    data_dir : Path
    encoder : TextEncoder
    training : Training
        Its ``seed`` and ``val_fraction`` order the folds and choose ``keep``.
    train_sets : sequence of str
    folds : int
    keep : int
        Training queries of each training set or fold: a seeded this many
        (:func:`~georag.experiments.folds.training_subset`); 0: all.
    """
    data, seed = str(data_dir), training.seed
    if not train_sets:
        found = learned_folds(
            name,
            data_dir=data,
            encoder=encoder,
            corpus=True,
            folds=folds,
            val_fraction=training.val_fraction,
            seed=seed,
        )
        found, _ = subset_training(found, keep, seed)
        return [Split(f.label, f.train, (f.train_queries,), f.report_queries.batch) for f in found]
    pools, tune, seen = [], [], set()
    for train_set in train_sets:
        pool = load_pool(train_set, data_dir=data, encoder=encoder)
        queries = load_query_set(train_set, data_dir=data, encoder=encoder)
        if pool.batch.query_ids != queries.batch.ids:
            raise ValueError(f"{train_set}: pool and corpus queries differ in order")
        rows = [
            i
            for i in training_subset(len(queries.batch.ids), keep, seed)
            if queries.batch.ids[i] not in seen
        ]
        seen.update(queries.batch.ids[i] for i in rows)
        pools.append(pool.subset(rows))
        tune.append(queries.subset(rows))
    return [Split("+".join(train_sets), concat_pools(pools), tuple(tune), None)]


def map_parts(
    model: LearnedMap, corpus: Corpus, queries: QueryBatch
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """The learned map's score and ``BM25 / max BM25`` of every corpus row for each query.

    Returns
    -------
    base, lexical : torch.Tensor, shape (B, N)
        :func:`~georag.retrievers.phrase_ppr.map_scores`, and BM25 over title and text
        divided by each query's largest (0 where a query matches nothing).
    seconds : dict
        ``map_fit`` (mapping the corpus), ``bm25_fit`` (its index), ``map`` and ``bm25``
        (scoring the queries).
    """
    clock = time.perf_counter
    started = clock()
    mapped = mapped_corpus(model, corpus.embeddings)
    mapped_at = clock()
    index = corpus_bm25(corpus.titles, corpus.texts)
    indexed_at = clock()
    base = map_scores(model, queries.embeddings, corpus.embeddings, mapped)
    scored_at = clock()
    lexical = index.scores(list(queries.texts)).to(base.dtype)
    lexical = lexical / lexical.amax(dim=1, keepdim=True).clamp_min(1e-12)
    seconds = {
        "map_fit": mapped_at - started,
        "bm25_fit": indexed_at - mapped_at,
        "map": scored_at - indexed_at,
        "bm25": clock() - scored_at,
    }
    return base, lexical, seconds


def _run(scores: torch.Tensor, queries: QueryBatch, corpus: Corpus) -> dict:
    """The top :data:`TOP_K` corpus rows of each query as a run."""
    keep = torch.ones_like(scores, dtype=torch.bool)
    return scores_to_run(scores, keep, queries.ids, corpus.doc_ids, top_k=TOP_K)


def _hipporag2(options: dict, corpus: Corpus, queries: QueryBatch) -> tuple[dict, float, float]:
    """HippoRAG 2 with ``options`` fitted on ``corpus``: the run of ``queries``, the fit
    seconds and the retrieval seconds."""
    return fitted_run(
        make_reranker("hipporag2", {"hipporag2": options}), corpus, queries, top_k=TOP_K
    )


def _tuned(
    grid: Sequence[float], runs_of: Callable[[float], list[dict]], tune: Sequence[QuerySet]
) -> tuple[float, dict[float, float]]:
    """The value of ``grid`` of the best mean :data:`TUNED_BY` over every query of ``tune``
    (the first on ties), and the mean of each; ``runs_of(value)`` gives one run per set."""
    means = {}
    for value in grid:
        found = []
        for queries, run in zip(tune, runs_of(value), strict=True):
            found += per_query(run, queries.qrels, [TUNED_BY])[TUNED_BY].values()
        means[value] = sum(found) / len(found)
    return max(grid, key=means.__getitem__), means


def _summary(summary: dict) -> dict:
    """The learned knobs of a :func:`fit` summary, with the validation NDCG@10 before and
    after and the epochs."""
    return {
        **summary["knobs"],
        "val_ndcg@10": [summary["val_init"], summary["val_best"]],
        "epochs": summary["epochs"],
    }


def run_split(split: Split, p: Prepared, training: Training, folder: Path) -> dict:
    """Train the map of one split, tune the knobs on its training queries and run every row
    of :data:`ROWS` on its report queries over the evaluation set's corpus.

    Parameters
    ----------
    split : Split
    p : Prepared
        The evaluation set (:func:`~georag.experiments.entity_multihop.prepare`).
    training : Training
    folder : Path
        Where the map (``map.pt``) and its training logs go.

    Returns
    -------
    dict
        Per row (``{row: ...}``): ``runs``, ``fit_s`` and ``retrieve_s`` (on the report
        queries), ``train_s`` (the map's training plus the row's tuning) and ``knobs``;
        and ``map`` (the weights file), ``map_training`` (:func:`fit`'s summary),
        ``train_queries``, ``report`` (the report query ids).
    """
    model, map_s, summary = fit("learned_map", {}, split.pool, training, folder)
    path = folder / "map.pt"
    model.save(path)
    clock = time.perf_counter

    started = clock()
    parts = [map_parts(model, q.corpus, q.batch)[:2] for q in split.tune]
    b, b_means = _tuned(
        BM25_WEIGHTS,
        lambda b: [
            _run(base + b * lexical, q.batch, q.corpus)
            for q, (base, lexical) in zip(split.tune, parts)
        ],
        split.tune,
    )
    bm25_s = clock() - started
    started = clock()
    w, w_means = _tuned(
        FUSION_WEIGHTS,
        lambda w: [
            _hipporag2({"map": str(path), "fusion_weight": w}, q.corpus, q.batch)[0]
            for q in split.tune
        ],
        split.tune,
    )
    fusion_s = clock() - started

    corpus, report = p.corpus, p.queries if split.report is None else split.report
    base, lexical, s = map_parts(model, corpus, report)
    runs = {
        "map": _run(base, report, corpus),
        "map+bm25": _run(base + b * lexical, report, corpus),
    }
    fit_s = {"map": s["map_fit"], "map+bm25": s["map_fit"] + s["bm25_fit"]}
    retrieve_s = {"map": s["map"], "map+bm25": s["map"] + s["bm25"]}
    hipporag2 = {ROWS[2]: {"map": str(path)}, ROWS[3]: {"map": str(path), "fusion_weight": w}}
    for row, options in hipporag2.items():
        runs[row], fit_s[row], retrieve_s[row] = _hipporag2(options, corpus, report)
    # the knobs trained through PPR on the largest training set (its own corpus):
    # HippoRAG 2's on the map, ISO-RAG's on the entity graph (it learns no map)
    tune = max(split.tune, key=lambda q: len(q.batch.ids))
    summaries, trained_s = {}, {}
    for row, method, options in (
        (ROWS[4], "learned_hipporag2", {"fixed.map": str(path)}),
        (ROWS[5], "learned_iso_entity", {}),
    ):
        learned, trained_s[row], summaries[row] = fit(
            method, options, tune, training, folder / method
        )
        runs[row], fit_s[row], retrieve_s[row] = fitted_run(learned, corpus, report, top_k=TOP_K)
    return {
        "runs": runs,
        "fit_s": fit_s,
        "retrieve_s": retrieve_s,
        "train_s": {
            "map": map_s,
            "map+bm25": map_s + bm25_s,
            ROWS[2]: map_s,
            ROWS[3]: map_s + fusion_s,
            ROWS[4]: map_s + trained_s[ROWS[4]],
            ROWS[5]: trained_s[ROWS[5]],
        },
        "knobs": {
            "map": {
                "val_ndcg@10": [summary["val_init"], summary["val_best"]],
                "epochs": summary["epochs"],
            },
            "map+bm25": {"bm25_weight": b, "tuning": b_means},
            ROWS[2]: {"fusion_weight": HippoRAG2Config().fusion_weight},
            ROWS[3]: {"fusion_weight": w, "tuning": w_means},
            ROWS[4]: _summary(summaries[ROWS[4]]),
            ROWS[5]: _summary(summaries[ROWS[5]]),
        },
        "map": str(path),
        "map_training": summary,
        "train_queries": split.pool.batch.batch_size,
        "report": list(report.ids),
    }


def trained_table(
    name: str,
    *,
    data_dir: Path,
    encoder: TextEncoder,
    cache: Path,
    work: Path,
    training: Training,
    train_sets: Sequence[str] | None = None,
    folds: int = FOLDS,
    keep: int = 0,
) -> dict:
    """The trained table of evaluation set ``name`` (module docstring).

    Parameters
    ----------
    name : str
        An evaluation set (a key of :data:`TRAINING`, or any set, cross-validated).
    data_dir : Path
    encoder : TextEncoder
    cache : Path
        Embeddings and graphs (:func:`~georag.experiments.entity_multihop.prepare`).
    work : Path
        The maps and their logs go to ``work/name/<split>``.
    training : Training
    train_sets : sequence of str, optional
        Replace ``TRAINING[name]`` (empty: cross-validation).
    folds : int
    keep : int
        A seeded this many training queries per training set or fold (0: all).

    Returns
    -------
    dict
        ``rows`` (:func:`~georag.experiments.entity_multihop.table_rows`, each with its
        ``train_s``, summed over the splits, and its ``knobs`` per split), ``per_query``
        (``{row: {metric: {query id: value}}}``), ``folds`` (the report query ids of each
        split), ``splits`` (each split's map file, map training and training queries),
        ``passages``, ``questions`` and ``protocol``.
    """
    sets = TRAINING.get(name, ()) if train_sets is None else tuple(train_sets)
    p = prepare(name, data_dir, encoder, cache)
    found = splits(
        name,
        data_dir=data_dir,
        encoder=encoder,
        training=training,
        train_sets=sets,
        folds=folds,
        keep=keep,
    )
    parts = {s.label: run_split(s, p, training, work / name / s.label) for s in found}
    values, costs = {}, {}
    for row in ROWS:
        run = {q: ranked for part in parts.values() for q, ranked in part["runs"][row].items()}
        values[row] = query_values(p, run)
        costs[row] = {
            "fit_s": sum(part["fit_s"][row] for part in parts.values()),
            "ms_per_query": 1e3
            * sum(part["retrieve_s"][row] for part in parts.values())
            / len(p.queries.ids),
            "train_s": sum(part["train_s"][row] for part in parts.values()),
            "knobs": {label: part["knobs"][row] for label, part in parts.items()},
        }
    split = f"trained on {' + '.join(sets)}" if sets else f"seeded {len(found)}-fold CV"
    return {
        "rows": table_rows(name, values, costs, bars=BARS),
        "per_query": values,
        "folds": {label: part["report"] for label, part in parts.items()},
        "splits": {
            label: {k: part[k] for k in ("map", "map_training", "train_queries")}
            for label, part in parts.items()
        },
        "passages": len(p.corpus.doc_ids),
        "questions": len(p.queries.ids),
        "protocol": (
            f"{split} (seed {training.seed}); the map at most {training.epochs} epochs, "
            f"patience {training.patience}; knobs tuned by {TUNED_BY} on the training queries"
        ),
    }


def knob_lines(rows: list[dict]) -> str:
    """Each row's training seconds and tuned knobs per split, as a Markdown list."""

    def shown(value) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(map(shown, value)) + "]"
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = []
    for row in rows:
        knobs = "; ".join(
            f"{label}: " + ", ".join(f"{k}={shown(v)}" for k, v in chosen.items() if k != "tuning")
            for label, chosen in row["knobs"].items()
        )
        lines.append(f"- {row['method']}: training {row['train_s']:.1f} s; {knobs}")
    return "\n".join(lines)
