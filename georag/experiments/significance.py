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
    queries, values = per_query_arrays(result["runs"], result["qrels"], metrics)
    primary = metrics[0]
    dense = values["dense"][primary]
    rows, pvalues = [], []
    resampling = {"resamples": resamples, "seed": seed}
    for name, per in values.items():
        row = {"method": name, "queries": len(queries), "train_s": result["seconds"].get(name, 0.0)}
        for key in ("wall_s", "cpu_s"):
            if name in result.get(key, {}):
                row[key] = result[key][name]
        for metric in metrics:
            row[metric] = float(per[metric].mean())
            row[f"{metric}_ci"] = bootstrap_ci(per[metric], **resampling)
        if name != "dense":
            row["delta"] = float((per[primary] - dense).mean())
            row["p"] = paired_permutation_p(per[primary], dense, **resampling)
            pvalues.append(row["p"])
        rows.append(row)
    for row, p in zip([r for r in rows if r["method"] != "dense"], holm(pvalues), strict=True):
        row["p_holm"] = p
    # the geometry's own gain: "<m> learned+map" against "map alone", Holm over those rows
    mapped = [r for r in rows if r["method"].endswith("learned+map")]
    if mapped and "map alone" in values:
        alone = values["map alone"][primary]
        raw = []
        for row in mapped:
            x = values[row["method"]][primary]
            raw.append(paired_permutation_p(x, alone, **resampling))
            row["delta_map"] = float((x - alone).mean())
        for row, p in zip(mapped, holm(raw), strict=True):
            row["p_map_holm"] = p
    return rows
