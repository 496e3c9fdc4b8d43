"""Retrieval metrics through pytrec_eval.

Metric names are either friendly (``ndcg@10``, ``recall@100``, ``mrr@10``, ``map@10``,
``p@10``) or raw pytrec_eval measures (``ndcg_cut_10``, ``recip_rank``). Means are taken
over every judged query: a query the run leaves empty counts as 0, it is not skipped.

Answer recall (:func:`answer_recall`) scores a run of a QA set against the answers instead
of the qrels: does one of the top ``k`` documents hold an answer?
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence

import pytrec_eval

__all__ = [
    "evaluate",
    "per_query",
    "mrr_at_k",
    "answer_recall",
    "answer_recall_per_query",
    "normalize_answer",
    "Run",
    "Qrels",
]

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]

_FRIENDLY = {
    "ndcg": "ndcg_cut_{k}",
    "recall": "recall_{k}",
    "map": "map_cut_{k}",
    "p": "P_{k}",
    "precision": "P_{k}",
}


def _truncate(run: Run, k: int) -> Run:
    return {
        qid: dict(sorted(docs.items(), key=lambda item: -item[1])[:k]) for qid, docs in run.items()
    }


def _parse(name: str) -> tuple[str, int | None]:
    """Map a metric name to (pytrec measure, cut for mrr or None)."""
    match = re.fullmatch(r"([a-z]+)@(\d+)", name.lower())
    if match is None:
        return name, None
    family, k = match.group(1), int(match.group(2))
    if family == "mrr":
        return "recip_rank", k
    if family not in _FRIENDLY:
        raise ValueError(f"metrics: unknown metric {name!r}")
    return _FRIENDLY[family].format(k=k), None


def per_query(run: Run, qrels: Qrels, metrics: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per-query values ``{metric: {query_id: value}}`` over every judged query."""
    if not qrels:
        raise ValueError("qrels: no judged queries")
    results: dict[str, dict[str, float]] = {}
    for name in metrics:
        measure, cut = _parse(name)
        base = measure.rsplit("_", 1)[0] if measure[-1].isdigit() else measure
        if base not in pytrec_eval.supported_measures:
            raise ValueError(f"metrics: pytrec_eval does not know {name!r}")
        scored = _truncate(run, cut) if cut is not None else run
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {measure})
        values = evaluator.evaluate({q: d for q, d in scored.items() if q in qrels and d})
        results[name] = {qid: values.get(qid, {}).get(measure, 0.0) for qid in qrels}
    return results


def evaluate(
    run: Run, qrels: Qrels, metrics: Iterable[str] = ("ndcg@10", "recall@100", "mrr@10")
) -> dict[str, float]:
    """Mean of each metric over every judged query.

    Examples
    --------
    >>> evaluate({"q": {"a": 2.0, "b": 1.0}}, {"q": {"b": 1}}, ["mrr@10"])
    {'mrr@10': 0.5}
    """
    table = per_query(run, qrels, metrics)
    return {name: sum(values.values()) / len(values) for name, values in table.items()}


def mrr_at_k(run: Run, qrels: Qrels, k: int = 10) -> float:
    """Mean reciprocal rank of the first relevant document within the top ``k``."""
    return evaluate(run, qrels, [f"mrr@{k}"])[f"mrr@{k}"]


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, ASCII punctuation deleted, the articles
    *a*, *an*, *the* dropped, whitespace runs folded to one space.

    Examples
    --------
    >>> normalize_answer("The  Detroit, Michigan!")
    'detroit michigan'
    """
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION))
    return " ".join(text.split())


def _top_k(docs: dict[str, float], k: int) -> list[str]:
    """The ``k`` best documents as trec_eval ranks them (recall@k, ndcg@k): by score, ties
    to the larger document id."""
    return [d for d, _ in sorted(docs.items(), key=lambda item: (item[1], item[0]))[::-1][:k]]


def answer_recall_per_query(
    run: Run,
    corpus_texts: Mapping[str, str],
    answers: Mapping[str, Sequence[str]],
    k: int = 5,
) -> dict[str, float]:
    """Per query, 1.0 when one of its top ``k`` documents holds one of its answers, else 0.0.

    Parameters
    ----------
    run : Run
        ``run[query_id][doc_id] = score``; ranked by score, ties to the larger document id
        (as trec_eval ranks for recall@k).
    corpus_texts : mapping of str to str
        The text searched for the answers, by document id (e.g. each document's
        ``full_text``).
    answers : mapping of str to sequence of str
        ``answers[query_id]``: the answer and its aliases (e.g. ``BeirDataset.answers``).
    k : int
        Documents kept per query.

    Returns
    -------
    dict of str to float
        One value per query of ``answers`` with at least one answer that is not empty after
        normalisation; other queries are skipped. A query the run leaves empty (or lacks)
        counts as 0.0.

    Raises
    ------
    ValueError
        When ``k < 1`` or a ranked document id is not in ``corpus_texts``.

    Notes
    -----
    Answers and texts go through :func:`normalize_answer`; an answer is found when its
    normalised words appear consecutively in the normalised text, on word boundaries
    (``"1987"`` is not found in ``"19875"``).
    """
    if k < 1:
        raise ValueError(f"k: expected at least 1, got {k}")
    normalised: dict[str, str] = {}
    values: dict[str, float] = {}
    for qid, candidates in answers.items():
        wanted = {f" {a} " for a in map(normalize_answer, candidates) if a}
        if not wanted:
            continue
        hit = False
        for doc_id in _top_k(run.get(qid, {}), k):
            if doc_id not in normalised:
                if doc_id not in corpus_texts:
                    raise ValueError(f"corpus_texts: no text for document {doc_id!r}")
                normalised[doc_id] = f" {normalize_answer(corpus_texts[doc_id])} "
            if any(a in normalised[doc_id] for a in wanted):
                hit = True
                break
        values[qid] = float(hit)
    return values


def answer_recall(
    run: Run,
    corpus_texts: Mapping[str, str],
    answers: Mapping[str, Sequence[str]],
    k: int = 5,
) -> float:
    """Mean of :func:`answer_recall_per_query` over the queries with answers.

    Raises
    ------
    ValueError
        When no query has an answer (or as :func:`answer_recall_per_query`).

    Examples
    --------
    >>> run = {"q": {"d1": 0.9, "d2": 0.5}}
    >>> texts = {"d1": "Born in Paris.", "d2": "He moved to Detroit, Michigan."}
    >>> answer_recall(run, texts, {"q": ["Detroit Michigan"]}, k=1)
    0.0
    >>> answer_recall(run, texts, {"q": ["Detroit Michigan"]}, k=2)
    1.0
    """
    values = answer_recall_per_query(run, corpus_texts, answers, k)
    if not values:
        raise ValueError("answers: no query has an answer")
    return sum(values.values()) / len(values)
