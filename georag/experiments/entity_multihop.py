"""The entity-graph multi-hop tables: graph retrievers against the non-graph bars, zero-shot.

Every row ranks the whole corpus of a multi-hop set (the open 6,119-passage corpus of
HippoRAG's 2WikiMultihopQA, or the pooled paragraphs of HotpotQA and MuSiQue) with
all-MiniLM-L6-v2 and no language model anywhere:

* the non-graph bars: ``dense``, ``bm25``, ``hybrid-rrf`` and ``hybrid-linear``
  (:mod:`georag.retrievers.lexical`); the best of them (mean Recall@5) is the baseline;
* the graph rows (:data:`GRAPH_ROWS`): HippoRAG 2's retrieval (``hipporag2``), ISO-RAG on the
  entity-passage graph (``iso_entity``) with its ablations (no pruning, degree volume,
  random pruning of as many edges) and ISO-RAG on the passage graph (``iso``).

Metrics: Recall@2, Recall@5 and MRR@10 of the supporting passages, answer recall@5 (a top-5
passage holds the answer or an alias); 95% bootstrap intervals; two-sided paired
randomization against the baseline, Holm-corrected over the rows of each metric.

Nothing here is tuned on an evaluation set: the candidates of the default
(:data:`CANDIDATES`) run on the training files only (:data:`TRAIN_SETS`); the default
(:data:`DEFAULT`) is the candidate of the best mean of Recall@2 and Recall@5 over them
(docs/methods/entity_graph.md).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from georag.batch import Corpus, QueryBatch, scores_to_run
from georag.data.beir import BeirDataset
from georag.data.datasets import load_dataset
from georag.eval.metrics import answer_recall_per_query, per_query
from georag.eval.stats import annotate, holm, paired_permutation_p
from georag.rerank.registry import make_reranker
from georag.retrieval.candidates import FirstStage, FirstStageConfig, query_batch, stage_corpus
from georag.retrieval.encoder import TextEncoder

__all__ = [
    "ABLATIONS",
    "BARS",
    "CANDIDATES",
    "DEFAULT",
    "EVAL_SETS",
    "GRAPH_ROWS",
    "METRICS",
    "TRAIN_SETS",
    "Prepared",
    "ablation_markdown",
    "fitted_run",
    "ablation_rows",
    "markdown",
    "prepare",
    "query_values",
    "run_rows",
    "selection",
    "table_rows",
]

EVAL_SETS = ("2wikimultihopqa_hipporag", "hotpotqa_dev500", "musique_qa100")
TRAIN_SETS = ("2wikimultihopqa_train500", "musique_train200")
METRICS = ("recall@2", "recall@5", "mrr@10", "answer_recall@5")
#: the non-graph bars: row -> (method, options)
BARS = {
    "dense": ("dense", {}),
    "bm25": ("bm25", {}),
    "hybrid-rrf": ("hybrid", {"fusion": "rrf"}),
    "hybrid-linear": ("hybrid", {"fusion": "linear"}),
}
#: the one zero-shot default: hipporag2 at its defaults (each one's source in its config)
DEFAULT = ("hipporag2", {})
#: the graph rows: row -> (method, options)
GRAPH_ROWS = {
    "hipporag2": DEFAULT,
    "hipporag2, PPR alone": ("hipporag2", {"fusion": "none"}),
    "hipporag2, embedding + mention linking": ("hipporag2", {"linking": "both"}),
    "hipporag2, title + spaCy phrases": ("hipporag2", {"extractors": "title,spacy"}),
    "phrase_ppr on the entity graph": ("phrase_ppr", {"entities": "title", "weight": 1.0}),
    "iso_entity": ("iso_entity", {}),
    "iso_entity, no pruning": ("iso_entity", {"iso.prune_threshold": float("inf")}),
    "iso_entity, degree volume": ("iso_entity", {"iso.volume": "degree"}),
    "iso_entity, random pruning": ("iso_entity", {"pruning": "random"}),
    "iso (passage graph)": ("iso", {}),
}


#: the candidates of the default, run on :data:`TRAIN_SETS` only: HippoRAG 2's retrieval with
#: each extractor set, linking and fusion of the grid, and ISO-RAG on the entity graph
CANDIDATES = {
    f"hipporag2 {extractors} {linking} {fusion}:{weight:g}": (
        "hipporag2",
        {"extractors": extractors, "linking": linking, "fusion": fusion, "fusion_weight": weight},
    )
    for extractors in ("title", "title,spacy")
    for linking in ("mention", "embedding", "both")
    for fusion, weight in (
        ("none", 1.0),
        ("dense", 20.0),
        ("dense+bm25", 5.0),
        ("dense+bm25", 20.0),
    )
} | {
    "iso_entity": ("iso_entity", {}),
    "iso_entity, no pruning": GRAPH_ROWS["iso_entity, no pruning"],
}


@dataclasses.dataclass
class Prepared:
    """One data set ready to rank: its corpus with embeddings and its encoded queries."""

    dataset: BeirDataset
    corpus: Corpus
    queries: QueryBatch
    encode_seconds: float


def prepare(name: str, data_dir: Path, encoder: TextEncoder, cache: Path) -> Prepared:
    """Load one data set, embed its corpus and queries (cached under ``cache/embeddings``).

    Parameters
    ----------
    name : str
        A data set name or path (:func:`georag.data.datasets.load_dataset`).
    data_dir : Path
    encoder : TextEncoder
    cache : Path
        Its ``embeddings/`` and ``graphs/`` folders keep what was computed.
    """
    dataset = load_dataset(name, data_dir=data_dir)
    start = time.perf_counter()
    stage = FirstStage(
        dataset,
        FirstStageConfig(first_stage="dense", top_m=10),
        encoder=encoder,
        cache_dir=cache / "embeddings",
    )
    corpus = stage_corpus(dataset, stage, cache_dir=cache)
    queries = query_batch(dataset, encoder, cache_dir=cache / "embeddings")
    seconds = time.perf_counter() - start
    return Prepared(dataset, corpus, queries, seconds)


def query_values(p: Prepared, run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Every metric of :data:`METRICS` per query of one run, ``{metric: {query id: value}}``
    (answer recall where the data set has answers)."""
    values = per_query(run, p.dataset.qrels, [m for m in METRICS if not m.startswith("answer")])
    if p.dataset.answers:
        texts = {
            d: f"{t} {x}" for d, t, x in zip(p.corpus.doc_ids, p.corpus.titles, p.corpus.texts)
        }
        values["answer_recall@5"] = answer_recall_per_query(run, texts, p.dataset.answers, k=5)
    return values


def run_rows(
    p: Prepared, rows: dict[str, tuple[str, dict]], *, top_k: int = 100
) -> tuple[dict[str, dict], dict[str, dict]]:
    """Fit and run every row's retriever on one data set.

    Returns
    -------
    per_query : dict
        ``{row: {metric: {query id: value}}}``.
    costs : dict
        ``{row: {"fit_s": ..., "ms_per_query": ...}}`` (the batched retrieval, all queries
        at once).
    """
    values, costs = {}, {}
    for label, (method, options) in rows.items():
        retriever = make_reranker(method, {method: options})
        run, fit_s, seconds = fitted_run(retriever, p.corpus, p.queries, top_k=top_k)
        values[label] = query_values(p, run)
        costs[label] = {"fit_s": fit_s, "ms_per_query": 1e3 * seconds / len(p.queries.ids)}
    return values, costs


def fitted_run(
    retriever, corpus: Corpus, queries: QueryBatch, *, top_k: int
) -> tuple[dict[str, dict[str, float]], float, float]:
    """Fit ``retriever`` on ``corpus`` and rank the corpus for ``queries``: the run (each
    query's ``top_k`` rows), the fit seconds and the retrieval seconds (all queries at once)."""
    start = time.perf_counter()
    retriever.fit(corpus)
    fitted = time.perf_counter()
    result = retriever.retrieve(queries, top_k=top_k)
    seconds = time.perf_counter() - fitted
    run = scores_to_run(result.scores, result.keep, queries.ids, retriever.row_ids)
    return run, fitted - start, seconds


def table_rows(
    name: str, values: dict[str, dict], costs: dict[str, dict], *, bars: tuple[str, ...]
) -> list[dict]:
    """One table: the mean of every metric per row, 95% intervals, and the paired test of
    every row against the best bar (by mean Recall@5), Holm over the rows of each metric.

    Parameters
    ----------
    name : str
        The data set.
    values, costs
        :func:`run_rows`' output (bars and graph rows together).
    bars : tuple of str
        The rows that are non-graph bars.
    """
    metrics = [m for m in METRICS if all(m in v for v in values.values())]

    def mean(row: str, metric: str) -> float:
        column = values[row][metric]
        return sum(column.values()) / len(column)

    best = max(bars, key=lambda r: mean(r, "recall@5"))
    rows = [
        {
            "dataset": name,
            "method": label,
            "bar": label in bars,
            "baseline": label == best,
            **{m: mean(label, m) for m in metrics},
            **costs[label],
        }
        for label in values
    ]
    return annotate(rows, values, metrics, baseline=best)


def markdown(rows: list[dict], *, counts: str = "") -> str:
    """One data set's table in Markdown: mean [95% interval] of every metric, the Holm p
    against the baseline (marked ``*`` below 0.05), and the retrieval cost."""
    metrics = [m for m in METRICS if m in rows[0]]
    head = ["row", *metrics, "fit s", "ms/query"]
    lines = [
        f"**{rows[0]['dataset']}**{counts}; baseline (the best bar by Recall@5): "
        + next(r["method"] for r in rows if r["baseline"]),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in rows:
        cells = [row["method"] + (" (bar)" if row["bar"] else "")]
        for m in metrics:
            p = row.get(f"{m}_p_value")
            star = "*" if p is not None and p < 0.05 else ""
            test = "" if p is None else f" p={p:.3g}{star}"
            cells.append(
                f"{row[m]:.3f} [{row[m + '_ci_low']:.3f}, {row[m + '_ci_high']:.3f}]{test}"
            )
        cells += [f"{row['fit_s']:.1f}", f"{row['ms_per_query']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def selection(tables: dict[str, list[dict]]) -> list[tuple[str, float]]:
    """The rule that picks the default from the candidates' tables on the training files:
    every row's mean of Recall@2 and Recall@5 over the sets, best first.

    Parameters
    ----------
    tables : dict
        ``{set: table_rows(...)}``; rows present in every set are ranked.
    """
    names = set.intersection(*({r["method"] for r in rows} for rows in tables.values()))
    score = {
        name: sum(
            (r["recall@2"] + r["recall@5"]) / 2
            for rows in tables.values()
            for r in rows
            if r["method"] == name
        )
        / len(tables)
        for name in names
    }
    return sorted(score.items(), key=lambda item: (-item[1], item[0]))


#: ISO-RAG's claim on the entity graph: the pruned row against each ablation of the same graph
#: and against ISO-RAG on the passage graph
ABLATIONS = {
    "iso_entity": (
        "iso_entity, no pruning",
        "iso_entity, degree volume",
        "iso_entity, random pruning",
        "iso (passage graph)",
    )
}


def ablation_rows(values: dict[str, dict], *, metrics=("recall@2", "recall@5")) -> list[dict]:
    """Paired tests of each row of :data:`ABLATIONS` against its ablations on one data set:
    the mean difference and the two-sided paired randomization p, Holm over the tests.

    Parameters
    ----------
    values : dict
        :func:`run_rows`' per-query values ``{row: {metric: {query id: value}}}``.
    metrics : tuple of str
    """
    tests = []
    for row, others in ABLATIONS.items():
        for other in others:
            if row not in values or other not in values:
                continue
            for m in metrics:
                qids = sorted(values[row][m])
                ours = [values[row][m][q] for q in qids]
                theirs = [values[other][m][q] for q in qids]
                tests.append(
                    {
                        "row": row,
                        "against": other,
                        "metric": m,
                        "difference": (sum(ours) - sum(theirs)) / len(qids),
                        "p": paired_permutation_p(ours, theirs),
                    }
                )
    for test, corrected in zip(tests, holm([t["p"] for t in tests])):
        test["p_holm"] = corrected
    return tests


def ablation_markdown(tests: list[dict]) -> str:
    """The tests of :func:`ablation_rows` as Markdown lines."""
    return "\n".join(
        f"- {t['row']} - {t['against']}: {t['metric']} {t['difference']:+.3f} "
        f"(Holm p={t['p_holm']:.3g}{'*' if t['p_holm'] < 0.05 else ''})"
        for t in tests
    )
