"""Significance and confidence intervals of per-query metrics, through scipy and statsmodels.

The tests are the field's usual ones, taken from established libraries rather than written
here: the 95% percentile bootstrap confidence interval of a mean
(:func:`scipy.stats.bootstrap`), Fisher's paired randomization test of a mean difference
(:func:`scipy.stats.permutation_test` with ``permutation_type="samples"``, which flips the
sign of each query's difference; Smucker, Allan and Carterette, "A Comparison of
Statistical Significance Tests for Information Retrieval Evaluation", CIKM 2007) and Holm's
step-down correction across the methods compared with one baseline
(:func:`statsmodels.stats.multitest.multipletests`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import bootstrap, permutation_test

__all__ = [
    "ALPHA",
    "bootstrap_ci",
    "paired_permutation_p",
    "holm",
    "annotate",
    "summarize",
    "mark",
]

ALPHA = 0.05
CONFIDENCE = 0.95
RESAMPLES = 9999
SEED = 0

PerQuery = dict[str, dict[str, float]]  # {metric: {query_id: value}}


def bootstrap_ci(
    values: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``.

    Parameters
    ----------
    values : sequence of float, length N (one per query)

    Returns
    -------
    (low, high) : tuple of float
    """
    sample = np.asarray(values, dtype=np.float64)
    if sample.size == 0:
        raise ValueError("values: no per-query values to bootstrap")
    if np.all(sample == sample[0]):  # every resample has the same mean
        return float(sample[0]), float(sample[0])
    result = bootstrap(
        (sample,),
        np.mean,
        confidence_level=confidence,
        n_resamples=resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x - y, axis=axis)


def paired_permutation_p(
    ours: Sequence[float], base: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED
) -> float:
    """Two-sided p-value of Fisher's paired randomization test on the mean difference.

    Exact (all ``2**N`` sign flips) when ``2**N <= resamples``, else Monte Carlo.

    Parameters
    ----------
    ours, base : sequence of float, length N
        Per-query values of the two systems, in the same query order.
    """
    x = np.asarray(ours, dtype=np.float64)
    y = np.asarray(base, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(
            f"ours and base must be equal-length 1-D samples, got {x.shape}, {y.shape}"
        )
    if np.array_equal(x, y):
        return 1.0
    result = permutation_test(
        (x, y),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-corrected p-values (family-wise error rate), in the input order."""
    if len(pvalues) == 0:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(pvalues), method="holm")[1]]


def annotate(
    rows: list[dict],
    per_query: dict[str, PerQuery],
    metrics: Sequence[str],
    *,
    baseline: str | None = None,
) -> list[dict]:
    """Add ``<metric>_ci_low``, ``<metric>_ci_high`` (and ``<metric>_p_value``) to ``rows``.

    Parameters
    ----------
    rows : list of dict
        Result rows with a ``method`` key (one data set).
    per_query : dict
        ``{method: {metric: {query_id: value}}}``.
    metrics : sequence of str
    baseline : str, optional
        Method the others are tested against (two-sided paired randomization test); the
        p-values of one metric are Holm-corrected across the methods. The baseline row's
        p-value is None.

    Returns
    -------
    list of dict
        The same rows, updated in place.
    """
    methods = [row["method"] for row in rows]
    if baseline is not None and baseline not in per_query:
        raise ValueError(f"baseline: {baseline!r} is not among the methods {methods}")
    for row in rows:
        values = per_query[row["method"]]
        for metric in metrics:
            low, high = bootstrap_ci(list(values[metric].values()))
            row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = low, high
    if baseline is None:
        return rows
    base = per_query[baseline]
    others = [row for row in rows if row["method"] != baseline]
    for metric in metrics:
        qids = sorted(base[metric])
        raw = [
            paired_permutation_p(
                [per_query[row["method"]][metric][q] for q in qids],
                [base[metric][q] for q in qids],
            )
            for row in others
        ]
        for row, p in zip(others, holm(raw)):
            row[f"{metric}_p_value"] = p
        for row in rows:
            if row["method"] == baseline:
                row[f"{metric}_p_value"] = None
    return rows


def summarize(
    per_query: dict[str, PerQuery],
    metrics: Sequence[str],
    *,
    baseline: str | None = None,
    dataset: str = "",
) -> list[dict]:
    """Rows ``{dataset, method, <metric>, <metric>_ci_low, ...}`` from per-query values
    (means over the judged queries), annotated as by :func:`annotate`; for the scripts."""
    rows = [
        {
            "dataset": dataset,
            "method": method,
            **{m: float(np.mean(list(values[m].values()))) for m in metrics},
        }
        for method, values in per_query.items()
    ]
    return annotate(rows, per_query, metrics, baseline=baseline)


def mark(row: dict, metric: str, baseline_value: float | None, alpha: float = ALPHA) -> str:
    """``"▲"`` / ``"▼"`` when ``metric`` differs from the baseline at level ``alpha``
    (Holm-corrected), by the sign of the difference; ``""`` otherwise."""
    p = row.get(f"{metric}_p_value")
    if p is None or baseline_value is None or p >= alpha:
        return ""
    return "▲" if row[metric] > baseline_value else "▼"
