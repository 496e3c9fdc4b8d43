"""The document of ``scripts/quality/quality_combined.py``: one section per data set over
the merged runs of the quality scripts (:mod:`georag.experiments.combined`), the outcome,
and a plot of each geometric row's difference to the best bar.

* :func:`section`: a data set's sources, its table and its outcome;
* :func:`plot`: per data set, Δ of each geometric row to the best bar with its 95%
  interval, sorted, the rows with Holm p < 0.05 coloured;
* :func:`document`: the whole file; :func:`write_combined`: merge, test and write both.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import numpy as np

from georag._io import atomic_write
from georag.experiments.combined import (
    ALPHA,
    POOL,
    combined_rows,
    merge,
    outcome,
    table_metrics,
)
from georag.experiments.runs import load_runs, path_of

NAMES = {"ndcg@10": "NDCG@10", "recall@10": "Recall@10", "mrr@10": "MRR@10"}
NAMES |= {"recall@5": "Recall@5", "recall@2": "Recall@2", POOL: "pool R@100"}
SMALL_SET = 100  # report queries at or below which a section says only large differences resolve


def _p(row: dict, key: str) -> str:
    if f"holm_{key}" not in row:
        return " | "
    mark = "**" if row[f"holm_{key}"] < ALPHA else ""
    return f"{mark}{row[f'delta_{key}']:+.4f}{mark} | {row[f'holm_{key}']:.4f}"


def section(dataset: str, merged, rows: list[dict], best: str, *, resamples: int) -> str:
    """The Markdown section of one data set: its sources, the table and the outcome."""
    metrics = table_metrics(dataset)
    queries = rows[0]["queries"]
    lines = [f"## {dataset} ({queries} report queries)", ""]
    if queries <= SMALL_SET:
        low, high = next(r for r in rows if r["method"] == best)[metrics[0] + "_ci"]
        lines += [
            f"{queries} report queries resolve only large differences: the 95% interval of "
            f"the bar's {NAMES[metrics[0]]} is {high - low:.3f} wide.",
            "",
        ]
    for path, runs in merged.sources:
        when = "date and load not recorded"
        if "date" in runs.extra:
            when = f"{runs.extra['date']}, load average {runs.extra.get('load', '?')}"
        lines.append(f"- {runs.source} (`{path}`): `{runs.command}`; {when}; {runs.protocol}")
    head = [f"{NAMES[m]} [95% CI]" if m != POOL else NAMES[m] for m in metrics]
    head += ["Δ vs map", "p (Holm)", f"Δ vs best ({best}) [95% CI]", "p (Holm)", "training s"]
    lines += [
        "",
        "| row | source | geometric | " + " | ".join(head) + " |",
        "|---" * (len(head) + 3) + "|",
    ]
    for r in rows:
        cells = [r["method"], r["source"], "yes" if r["geometric"] else "no"]
        for m in metrics:
            if m == POOL:
                cells.append(f"{r[m]:.4f}" if r["pool"] else "–")
            else:
                cells.append(f"{r[m]:.4f} [{r[m + '_ci'][0]:.4f}, {r[m + '_ci'][1]:.4f}]")
        cells.append(_p(r, "map"))
        best_cell = _p(r, "best")
        if "delta_best_ci" in r:
            low, high = r["delta_best_ci"]
            best_cell = best_cell.replace(" | ", f" [{low:+.4f}, {high:+.4f}] | ", 1)
        cells.append(best_cell)
        cells.append(f"{r['train_s']:.1f}" if r["train_s"] else "")
        lines.append("| " + " | ".join(cells) + " |")
    family = sum("holm_best" in r for r in rows)
    floor = min(1.0, 2 * family / (resamples + 1))
    return (
        "\n".join(lines)
        + f"\n\nEach family: {family} tests; the smallest attainable Holm p (Monte Carlo, "
        f"two-sided) is about {floor:.4f}.\n\nOutcome: " + outcome(dataset, rows, best) + "\n"
    )


def plot(tables: dict[str, tuple[list[dict], str]], path: Path) -> None:
    """Per data set, Δ of each geometric row to the best bar with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [sum(r["geometric"] for r in rows) for rows, _ in tables.values()]
    columns = min(3, len(tables))
    lines = -(-len(tables) // columns)
    fig, axes = plt.subplots(
        lines,
        columns,
        figsize=(5.5 * columns, (0.2 * max(sizes) + 1.4) * lines),
        squeeze=False,
    )
    for ax in axes.flat[len(tables) :]:
        ax.set_axis_off()
    for ax, (dataset, (rows, best)) in zip(axes.flat, tables.items()):
        geometric = sorted(
            (r for r in rows if r["geometric"] and "delta_best" in r),
            key=lambda r: r["delta_best"],
        )
        y = np.arange(len(geometric))
        delta = np.array([r["delta_best"] for r in geometric])
        ci = np.array([r["delta_best_ci"] for r in geometric]).reshape(-1, 2)
        low, high = np.maximum(0, delta - ci[:, 0]), np.maximum(0, ci[:, 1] - delta)
        colors = [
            "tab:gray" if r["holm_best"] >= ALPHA else "tab:green" if d > 0 else "tab:red"
            for r, d in zip(geometric, delta, strict=True)
        ]
        ax.barh(y, delta, xerr=[low, high], color=colors, error_kw={"lw": 0.8})
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(y, [r["method"] for r in geometric], fontsize=6)
        ax.set_title(f"{dataset}\nvs {best}", fontsize=8)
        ax.set_xlabel(f"Δ {NAMES[table_metrics(dataset)[0]]}", fontsize=7)
        ax.tick_params(axis="x", labelsize=6)
    fig.suptitle(
        "Δ to the best non-geometric row, 95% CI (green / red: better / worse, Holm p < 0.05)",
        size=9,
    )
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=130)
    plt.close(fig)
    atomic_write(path, buffer.getvalue())


def document(
    tables: dict, sections: list[str], *, out: Path, picture: Path, resamples: int, seed: int
) -> str:
    """The whole results file at ``out``: legend, outcome, the plot and every section."""
    command = "python scripts/quality/quality_combined.py " + " ".join(sys.argv[1:])
    embed = os.path.relpath(picture, Path(out).parent)
    summary = "\n".join(f"- {outcome(d, rows, best)}" for d, (rows, best) in tables.items())
    return (
        "# Combined results: every row of every quality script, tested jointly\n\n"
        f"Generated by `{command.strip()}` from the saved per-query runs "
        "(`georag/experiments/runs.py`) of the scripts named in each section; merging and "
        "tests: `georag/experiments/combined.py`. Per data set the files must agree (same "
        "judged queries and qrels, same report folds, the shared `dense` row equal; one "
        "copy kept); a row name already in the table is suffixed with its source.\n\n"
        "Tests: paired two-sided randomization tests (resamples "
        f"{resamples}, seed {seed}) of the tested metric (NDCG@10; Recall@5 on "
        "the multi-hop sets) of every row against `map` (geometry_adds' learned map) and "
        "against the best non-geometric row (the highest report mean among the rows "
        "flagged non-geometric: the bar that favours the baseline), each family "
        "Holm-corrected over every row of the table but its bar; bold: Holm p < 0.05. "
        "Intervals: 95% percentile bootstrap over queries (of the mean; of the paired "
        "difference for Δ vs best). Pool R@100: recall of the row's top 100 (– where the "
        "saved run holds fewer). Training s: the row's training or search wall time, "
        "summed over folds, as its script recorded it. Geometric: as the source flags the "
        "row (geometry_adds: all but dense, prior, map, map+bm25, map+prf and ltr; gar: the "
        "gar rows, which expand through a corpus graph; multihop: its own flags). Plot: "
        f"`{picture}`.\n\n"
        f"## Outcome\n\n{summary}\n\n![Δ of the geometric rows to the best bar]({embed})\n\n"
        + "\n".join(sections)
    )


def write_combined(
    datasets: list[str],
    sources: list[str],
    *,
    out: Path,
    picture: Path,
    map_row: str = "map",
    resamples: int = 5000,
    seed: int = 0,
    log=print,
) -> dict[str, tuple[list[dict], str]]:
    """Merge and test each data set's runs files of ``sources``; write the document at
    ``out`` and the plot at ``picture``.

    Parameters
    ----------
    datasets : list of str
        Data sets; one without a runs file in any source is reported through ``log`` and
        left out.
    sources : list of str
        Folders of ``<dataset>.runs.json.gz`` files (:func:`~georag.experiments.runs.save_runs`).
    out, picture : Path
        The Markdown file and the PNG.
    map_row : str
        The first bar (:func:`~georag.experiments.combined.combined_rows`).
    resamples, seed : int
        Of the bootstrap intervals and randomization tests.
    log : callable
        Receives each data set's section as it is done.

    Returns
    -------
    dict
        ``{dataset: (rows, best bar)}``.

    Raises
    ------
    ValueError
        Files of a data set that disagree (one line naming the file), or no runs file at
        all.
    """
    tables, sections = {}, []
    for dataset in datasets:
        files = [path_of(folder, dataset) for folder in sources]
        found = [(path, load_runs(path)) for path in files if path.is_file()]
        if not found:
            log(f"{dataset}: no runs file in {sources}")
            continue
        merged = merge(found)
        rows, best = combined_rows(merged, map_row=map_row, resamples=resamples, seed=seed)
        tables[dataset] = (rows, best)
        sections.append(section(dataset, merged, rows, best, resamples=resamples))
        log(sections[-1])
    if not tables:
        raise ValueError(f"--sources: no runs file of {datasets} in {sources}")
    atomic_write(
        Path(out),
        document(tables, sections, out=out, picture=picture, resamples=resamples, seed=seed),
    )
    plot(tables, picture)
    return tables
