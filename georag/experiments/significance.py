"""The statistics of an experiment's table: means, intervals and Holm-corrected tests.

Per row, over the report queries: the mean of each metric with its 95% percentile bootstrap
interval (:func:`georag.eval.stats.bootstrap_ci`); for every row but the baseline, the
paired two-sided randomization test of the first metric against the baseline
(:func:`georag.eval.stats.paired_permutation_p`), Holm-corrected over those rows
(:func:`georag.eval.stats.holm`). The learned-geometry table adds the geometry's own gain:
each ``learned+map`` row against ``map alone``, Holm-corrected over those rows.
"""

from __future__ import annotations

import numpy as np

from georag.data.datasets import MULTIHOP_FILES
from georag.eval.metrics import per_query
from georag.eval.stats import bootstrap_ci, holm, paired_permutation_p

__all__ = [
    "BEIR_METRICS",
    "MULTIHOP_METRICS",
    "metrics_of",
    "per_query_arrays",
    "interval_rows",
    "holm_tests",
    "learned_rows",
]

BEIR_METRICS = ("ndcg@10", "recall@10", "mrr@10")
MULTIHOP_METRICS = ("recall@5", "recall@2", "ndcg@10", "mrr@10")


def metrics_of(dataset: str) -> tuple[str, ...]:
    """The reported metrics of ``dataset``; the first is the one tested (NDCG@10, or
    Recall@5 on the multi-hop sets)."""
    return MULTIHOP_METRICS if dataset in MULTIHOP_FILES else BEIR_METRICS


def per_query_arrays(
    runs: dict[str, dict], qrels: dict[str, dict[str, int]], metrics: tuple[str, ...]
) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    """Per-query values of every run, aligned over the judged queries.

    Parameters
    ----------
    runs : dict
        ``{row: {query id: {doc id: score}}}``.
    qrels : dict
        ``{query id: {doc id: gain}}``: the queries counted (a query missing from a run
        counts 0).
    metrics : tuple of str

    Returns
    -------
    queries : list of str
        The judged query ids, sorted (Q of them).
    values : dict
        ``{row: {metric: ndarray of shape (Q,)}}``, in the order of ``queries``.
    """
    queries = sorted(qrels)
    values = {}
    for name, run in runs.items():
        table = per_query(run, qrels, metrics)
        values[name] = {m: np.array([table[m][q] for q in queries]) for m in metrics}
    return queries, values


def interval_rows(
    values: dict[str, dict[str, np.ndarray]],
    metrics: tuple[str, ...],
    *,
    resamples: int,
    seed: int,
) -> list[dict]:
    """One row per run: its mean and 95% bootstrap interval of every metric.

    Parameters
    ----------
    values : dict
        ``{row: {metric: ndarray of shape (Q,)}}`` (:func:`per_query_arrays`).
    metrics : tuple of str
    resamples, seed : int
        Of every interval (each seeded alone).

    Returns
    -------
    list of dict
        In the order of ``values``: ``method``, ``queries`` (Q), ``<metric>`` (mean) and
        ``<metric>_ci`` (low, high).
    """
    rows = []
    for name, per in values.items():
        row = {"method": name, "queries": len(per[metrics[0]])}
        for metric in metrics:
            row[metric] = float(per[metric].mean())
            row[f"{metric}_ci"] = bootstrap_ci(per[metric], resamples=resamples, seed=seed)
        rows.append(row)
    return rows


def holm_tests(
    values: dict[str, dict[str, np.ndarray]],
    metric: str,
    pairs: list[tuple[str, str]],
    *,
    resamples: int,
    seed: int,
) -> list[tuple[float, float, float]]:
    """Paired tests of rows against their baselines, Holm-corrected over the pairs.

    Parameters
    ----------
    values : dict
        ``{row: {metric: ndarray of shape (Q,)}}`` (:func:`per_query_arrays`).
    metric : str
        The metric tested.
    pairs : list of (str, str)
        ``(row, baseline)``: one family of tests.
    resamples, seed : int
        Of every test (each seeded alone).

    Returns
    -------
    list of (float, float, float)
        Per pair, in its order: the mean per-query difference (row minus baseline), the
        raw two-sided randomization p and the Holm-corrected p.
    """
    deltas, raw = [], []
    for name, base in pairs:
        x, y = values[name][metric], values[base][metric]
        deltas.append(float((x - y).mean()))
        raw.append(paired_permutation_p(x, y, resamples=resamples, seed=seed))
    return list(zip(deltas, raw, holm(raw), strict=True))


def learned_rows(
    result: dict, metrics: tuple[str, ...], *, resamples: int, seed: int
) -> list[dict]:
    """The rows of a learned-geometry table.

    Parameters
    ----------
    result : dict
        :func:`georag.experiments.roles.run_dataset`'s result: ``runs`` (with ``dense``),
        ``qrels``, ``seconds`` and optionally ``wall_s`` / ``cpu_s`` per row.
    metrics : tuple of str
        The first is tested.
    resamples, seed : int
        Of every interval and test (each seeded alone).

    Returns
    -------
    list of dict
        One per row, in the order of ``runs``: ``method``, ``queries``, ``train_s``
        (``wall_s``, ``cpu_s``), ``<metric>`` (mean) and ``<metric>_ci`` (low, high); besides
        dense, ``delta`` (mean difference of the first metric to dense), ``p`` and
        ``p_holm``; each ``learned+map`` row (when ``map alone`` is there) ``delta_map``
        and ``p_map_holm`` against ``map alone``.
    """
    _, values = per_query_arrays(result["runs"], result["qrels"], metrics)
    primary = metrics[0]
    resampling = {"resamples": resamples, "seed": seed}
    rows = interval_rows(values, metrics, **resampling)
    for row in rows:
        row["train_s"] = result["seconds"].get(row["method"], 0.0)
        for key in ("wall_s", "cpu_s"):
            if row["method"] in result.get(key, {}):
                row[key] = result[key][row["method"]]
    tested = [r for r in rows if r["method"] != "dense"]
    pairs = [(r["method"], "dense") for r in tested]
    for row, (delta, p, p_holm) in zip(
        tested, holm_tests(values, primary, pairs, **resampling), strict=True
    ):
        row["delta"], row["p"], row["p_holm"] = delta, p, p_holm
    # the geometry's own gain: "<m> learned+map" against "map alone", Holm over those rows
    mapped = [r for r in rows if r["method"].endswith("learned+map")]
    if mapped and "map alone" in values:
        pairs = [(r["method"], "map alone") for r in mapped]
        for row, (delta, _, p_holm) in zip(
            mapped, holm_tests(values, primary, pairs, **resampling), strict=True
        ):
            row["delta_map"], row["p_map_holm"] = delta, p_holm
    return rows
