"""One table per data set from the saved per-query runs of several scripts, tested jointly.

The runs files (:mod:`georag.experiments.runs`) of one data set are merged when they agree:
the same judged queries and qrels, the same partition of them into report folds, and the
shared ``dense`` row giving the same per-query values (one copy is kept). A row name that
an earlier file already holds is renamed ``<row> [<source>]``. Every row then gets its mean
and 95% percentile bootstrap interval of each metric and two paired randomization tests of
the tested metric (:func:`georag.experiments.significance.metrics_of`): against ``map`` and
against the best non-geometric row (the highest report mean among the rows flagged
non-geometric: the bar that favours the baseline), each family Holm-corrected over every
row of the table but its bar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from georag.eval.stats import bootstrap_ci
from georag.experiments.runs import QueryRuns
from georag.experiments.significance import (
    holm_tests,
    interval_rows,
    metrics_of,
    per_query_arrays,
)

__all__ = ["Merged", "merge", "table_metrics", "combined_rows", "outcome", "POOL", "ALPHA"]

POOL = "recall@100"  # pool recall, shown for rows whose runs hold 100 documents a query
ALPHA = 0.05


@dataclass
class Merged:
    """The runs of one data set merged over its files.

    Attributes
    ----------
    dataset : str
    qrels : dict
        ``{query id: {doc id: gain}}``, Q judged queries.
    runs : dict
        ``{row: {query id: {doc id: score}}}``, the rows in file order, within a file the
        non-geometric rows first, each part by name.
    rows : dict
        ``{row: {"source": str, "geometric": bool, "train_s": float}}``.
    sources : list of (Path, QueryRuns)
        The files merged, in order.
    """

    dataset: str
    qrels: dict
    runs: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)
    sources: list = field(default_factory=list)


def _partition(runs: QueryRuns) -> set[frozenset]:
    return {frozenset(ids) for ids in runs.folds.values()}


def _row_notes(path: Path, runs: QueryRuns, row: str) -> dict:
    note = runs.extra.get("rows", {}).get(row)
    if not isinstance(note, dict) or not isinstance(note.get("geometric"), bool):
        raise ValueError(f"{path}: row {row!r} has no geometric flag in extra['rows']")
    return note


def table_metrics(dataset: str) -> tuple[str, ...]:
    """The metrics of ``dataset``'s table, the tested one first: those of
    :func:`~georag.experiments.significance.metrics_of`, Recall@10 and the pool recall."""
    metrics = metrics_of(dataset)
    return metrics + tuple(m for m in ("recall@10", POOL) if m not in metrics)


def merge(files: list[tuple[Path, QueryRuns]]) -> Merged:
    """Merge the runs files of one data set, checking that they agree.

    Parameters
    ----------
    files : list of (Path, QueryRuns)
        At least one; the first one's row names are kept, later colliding names renamed
        ``<row> [<source>]``.

    Returns
    -------
    Merged

    Raises
    ------
    ValueError
        One line naming the file: another data set, other judged queries or qrels, another
        fold partition, a ``dense`` row with other per-query values, a row without its
        geometric flag, or a renamed row that still collides.
    """
    if not files:
        raise ValueError("files: no runs file to merge")
    first_path, first = files[0]
    merged = Merged(first.dataset, first.qrels)
    metrics = table_metrics(first.dataset)
    for path, runs in files:
        if runs.dataset != first.dataset:
            raise ValueError(f"{path}: data set {runs.dataset!r}, not {first.dataset!r}")
        if set(runs.qrels) != set(first.qrels):
            raise ValueError(f"{path}: its judged queries differ from those of {first_path}")
        if runs.qrels != first.qrels:
            raise ValueError(f"{path}: its qrels differ from those of {first_path}")
        if _partition(runs) != _partition(first):
            raise ValueError(f"{path}: its report folds differ from those of {first_path}")
        notes = {row: _row_notes(path, runs, row) for row in runs.runs}
        for row in sorted(runs.runs, key=lambda row: (notes[row]["geometric"], row)):
            run, note = runs.runs[row], notes[row]
            if row == "dense" and row in merged.runs:
                _, values = per_query_arrays(
                    {"kept": merged.runs[row], "new": run}, merged.qrels, metrics
                )
                if any(not np.allclose(values["kept"][m], values["new"][m]) for m in metrics):
                    raise ValueError(f"{path}: its dense row differs from the one already read")
                continue
            name = row if row not in merged.runs else f"{row} [{runs.source}]"
            if name in merged.runs:
                raise ValueError(f"{path}: row {name!r} is already in the table")
            merged.runs[name] = run
            merged.rows[name] = {
                "source": runs.source,
                "geometric": note["geometric"],
                "train_s": float(note.get("train_s", 0.0)),
            }
        merged.sources.append((path, runs))
    return merged


def combined_rows(
    merged: Merged, *, map_row: str = "map", resamples: int, seed: int
) -> tuple[list[dict], str]:
    """The rows of the combined table and the name of the best non-geometric row.

    Parameters
    ----------
    merged : Merged
    map_row : str
        The first bar (its family is skipped when the table has no such row).
    resamples, seed : int
        Of every interval and test (each seeded alone).

    Returns
    -------
    rows : list of dict
        In table order: ``method``, ``queries``, ``source``, ``geometric``, ``train_s``,
        ``<metric>`` and ``<metric>_ci`` of every :func:`table_metrics` metric (the pool
        recall ``nan`` for a row whose runs hold fewer than 100 documents a query), ``pool``
        (whether they hold 100); for every row but the bar of a family ``key`` (``map``,
        ``best``): ``delta_<key>`` (mean paired difference of the tested metric),
        ``p_<key>`` (raw) and ``holm_<key>`` (Holm over the family); against the best bar
        also ``delta_best_ci``, the 95% bootstrap interval of the paired difference.
    best : str
        The best non-geometric row.

    Raises
    ------
    ValueError
        When no row is flagged non-geometric.
    """
    metrics = table_metrics(merged.dataset)
    tested = metrics[0]
    _, values = per_query_arrays(merged.runs, merged.qrels, metrics)
    resampling = {"resamples": resamples, "seed": seed}
    rows = interval_rows(values, metrics, **resampling)
    for row in rows:
        row.update(merged.rows[row["method"]])
        row["pool"] = max(len(docs) for docs in merged.runs[row["method"]].values()) >= 100
        if not row["pool"]:
            row[POOL], row[f"{POOL}_ci"] = float("nan"), (float("nan"), float("nan"))
    bars = [r for r in rows if not r["geometric"]]
    if not bars:
        raise ValueError(f"runs: no row of {merged.dataset} is flagged non-geometric")
    best = max(bars, key=lambda r: r[tested])["method"]
    for key, bar in (("map", map_row), ("best", best)):
        if bar not in values:
            continue
        family = [r for r in rows if r["method"] != bar]
        pairs = [(r["method"], bar) for r in family]
        for row, (delta, p, p_holm) in zip(
            family, holm_tests(values, tested, pairs, **resampling), strict=True
        ):
            row[f"delta_{key}"], row[f"p_{key}"], row[f"holm_{key}"] = delta, p, p_holm
            if key == "best":
                difference = values[row["method"]][tested] - values[bar][tested]
                row["delta_best_ci"] = bootstrap_ci(difference, **resampling)
    return rows, best


def outcome(dataset: str, rows: list[dict], best: str) -> str:
    """One sentence per data set: the geometric rows that beat (or lose to) the best bar
    with Holm p < :data:`ALPHA`, and the best geometric row otherwise."""
    tested = table_metrics(dataset)[0]
    geometric = [r for r in rows if r["geometric"] and "holm_best" in r]
    if not geometric:
        return f"{dataset}: no geometric row."
    wins = [r for r in geometric if r["holm_best"] < ALPHA and r["delta_best"] > 0]
    losses = [r for r in geometric if r["holm_best"] < ALPHA and r["delta_best"] < 0]
    top = max(geometric, key=lambda r: r["delta_best"])
    text = f"{dataset} (bar: {best}, {tested} {_row(rows, best)[tested]:.4f}): "
    if wins:
        text += "beaten with Holm p < 0.05 by " + ", ".join(_delta(r) for r in wins)
    else:
        text += f"no geometric row beats it with Holm p < 0.05 (best: {_delta(top)})"
    if losses:
        text += f"; {len(losses)} of {len(geometric)} geometric rows are significantly worse"
    return text + "."


def _row(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["method"] == name)


def _delta(row: dict) -> str:
    return f"{row['method']} ({row['delta_best']:+.4f}, Holm p {row['holm_best']:.4f})"
