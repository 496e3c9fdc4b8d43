"""Retrieval metrics through pytrec_eval.

Metric names are either friendly (``ndcg@10``, ``recall@100``, ``mrr@10``, ``map@10``,
``p@10``) or raw pytrec_eval measures (``ndcg_cut_10``, ``recip_rank``). Means are taken
over every judged query: a query the run leaves empty counts as 0, it is not skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytrec_eval

__all__ = ["evaluate", "per_query", "mrr_at_k", "Run", "Qrels"]

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
