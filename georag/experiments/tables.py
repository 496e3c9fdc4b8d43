"""The tables of the learned-geometry experiment, in Markdown and LaTeX.

One section per data set and selection: a heading with the report query count, the note,
the command, date, load and protocol line, and the table of
:func:`~georag.experiments.significance.learned_rows`. The cells are built once
(:func:`learned_cells`) and rendered by the same code as ``georag eval``'s results tables
(:func:`georag.eval.report.render_markdown`, :func:`~georag.eval.report.render_latex`).

A section is saved as a dict (the work file ``<dataset>__<selection>.json``): ``title``,
``metrics``, ``rows``, ``notes`` (``{row: [per-fold note]}``), ``command``, ``date``,
``load``, ``protocol`` and optionally ``note``.
"""

from __future__ import annotations

import numpy as np

from georag.eval.report import render_latex, render_markdown

__all__ = [
    "METRIC_NAMES",
    "learned_cells",
    "learned_markdown",
    "learned_latex",
    "training_text",
    "protocol_text",
    "learned_header",
]

METRIC_NAMES = {
    "ndcg@10": "NDCG@10",
    "recall@10": "Recall@10",
    "recall@2": "Recall@2",
    "recall@5": "Recall@5",
    "mrr@10": "MRR@10",
}


def learned_cells(saved: dict) -> tuple[list[str], list[list[tuple[str, str, str]]]]:
    """The header and the cells of one section's table.

    Parameters
    ----------
    saved : dict
        A saved section (module docstring).

    Returns
    -------
    columns : list of str, length C
        ``method``, each metric with its interval, Δ and Holm p against dense, Δ and Holm p
        against the map alone, training seconds, and (when some row has them) the role's
        wall / CPU seconds.
    cells : list of list of (str, str, str)
        Per row, C cells ``(value, interval, mark)`` (empty strings where a row has no
        value); a learned row's name carries its validation NDCG@10 at the start and at
        the exported epoch, mean over folds.
    """
    metrics, rows = saved["metrics"], saved["rows"]
    first = METRIC_NAMES[metrics[0]]
    columns = ["method", *(f"{METRIC_NAMES[m]} [95% CI]" for m in metrics)]
    columns += [f"Δ{first} vs dense", "p (Holm)", "Δ vs map alone", "p (Holm)", "training s"]
    timed_roles = any("cpu_s" in r for r in rows)
    columns += ["role wall s / CPU s"] if timed_roles else []
    table = []
    for r in rows:
        name = r["method"]
        if name in saved["notes"] and "val_init" in saved["notes"][name][0]:
            folds = saved["notes"][name]
            start = np.mean([f["val_init"] for f in folds])
            best = np.mean([f["val_best"] for f in folds])
            name += f" (val {start:.3f} → {best:.3f})"
        cells = [(name, "", "")]
        for metric in metrics:
            low, high = r[f"{metric}_ci"]
            cells.append((f"{r[metric]:.4f}", f"{low:.4f}, {high:.4f}", ""))
        text = [
            f"{r['delta']:+.4f}" if "delta" in r else "",
            f"{r['p_holm']:.4f}" if "p_holm" in r else "",
            f"{r['delta_map']:+.4f}" if "delta_map" in r else "",
            f"{r['p_map_holm']:.4f}" if "p_map_holm" in r else "",
            f"{r['train_s']:.1f}" if r["train_s"] else "",
        ]
        if timed_roles:
            text.append(f"{r['wall_s']:.0f} / {r['cpu_s']:.0f}" if "cpu_s" in r else "")
        table.append(cells + [(t, "", "") for t in text])
    return columns, table


def learned_markdown(saved: dict) -> str:
    """One section in Markdown (no final newline; see the module docstring)."""
    rows = saved["rows"]
    note = f"{saved['note']}\n\n" if saved.get("note") else ""
    return (
        f"### {saved['title']} ({rows[0]['queries']} report queries)\n\n{note}"
        "Learned rows: validation NDCG@10 on held-out training queries at the start "
        "(paper defaults) → at the exported epoch, mean over folds.\n\n"
        f"`{saved['command']}`; {saved['date']}, load average {saved['load']}; "
        f"{saved['protocol']}\n\n" + render_markdown(*learned_cells(saved))
    )


def learned_latex(saved: dict) -> str:
    """The table of one section as a LaTeX ``tabular`` (booktabs, amssymb), the method
    column left-aligned."""
    return render_latex(*learned_cells(saved), text_columns=1)


def _span(counts) -> str:
    low, high = min(counts := list(counts)), max(counts)
    return f"{low}" if low == high else f"{low}-{high}"


def training_text(
    training: dict[str, list[int]], notes: dict[str, list], val_fraction: float
) -> str:
    """What the rows were trained and tuned on, which folds an error stopped and how many
    TPE trials failed (a continuation of the protocol line, starting ``"; "``).

    Parameters
    ----------
    training : dict
        ``{fold label: [training queries kept, training queries there were]}``.
    notes : dict
        ``{row: [per-fold note]}``; a trained row's note may hold ``error``, a tuned row's
        ``trials`` and ``failed_trials``.
    val_fraction : float
    """
    labels = list(training)
    used = _span(n for n, _ in training.values())
    total = _span(n for _, n in training.values())
    what = f"a seeded {used} of the {total}" if used != total else f"all {used}"
    text = (
        f"; trained and tuned on {what} training queries"
        + (" of each fold" if len(training) > 1 else "")
        + f" (learned rows: a seeded {val_fraction:.0%} of them for validation)"
    )
    for name, folds in notes.items():
        stopped = [f"{label} at {f['error']}" for label, f in zip(labels, folds) if "error" in f]
        if stopped:
            text += (
                f"; {name}: training stopped by an error in {len(stopped)} of {len(folds)} "
                f"folds ({'; '.join(stopped)}), the best validated weights before it are used"
            )
        if folds and "failed_trials" in folds[0]:
            failed = sum(f["failed_trials"] for f in folds)
            trials = sum(f["trials"] for f in folds)
            text += f"; {name}: {failed} of {trials} TPE trials failed"
    return text


def protocol_text(dataset: str, *, folds: int, seed: int, work_file: str) -> str:
    """The protocol line of a section (before :func:`training_text`): scifact's held-out
    split, or the k-fold cross-validation and where its report folds are saved."""
    if dataset == "scifact":
        return "train on qrels/train.tsv, report on test"
    return (
        f"{folds}-fold CV over queries, seed {seed} (the report queries of "
        f"each fold: `folds` in `{work_file}`)"
    )


def learned_header(*, machine: str, threads: int, torch_version: str, corpus_top_k: int) -> str:
    """The title and legend of the results file, above its sections."""
    return (
        "# Learned geometry: results\n\n"
        "Generated by `scripts/quality/quality_learned.py` (one section per data set, each with "
        "its command); do not edit by hand.\n\n"
        f"- machine: {machine}, {threads} torch thread(s), torch "
        f"{torch_version}, CPU; shared with other jobs (load average per section)\n"
        "- pool: dense all-MiniLM-L6-v2 top 100 (exact faiss); scifact: train on "
        "qrels/train.tsv, report on test; the others: seeded 5-fold CV over queries, "
        "report folds pooled\n"
        "- CI: 95% percentile bootstrap over queries; p: paired randomization test of the "
        "first metric against dense, Holm-corrected over the methods of the data set; "
        "'vs map alone': the same test of each learned+map row against the map alone (the "
        "geometry's own gain), Holm over those rows\n"
        "- training s: gradient training (learned rows) or the TPE search (tuned rows), summed "
        "over folds (wall seconds); role wall s / CPU s (sections that have it): the whole "
        "row (training or search and reranking, all folds), wall and CPU seconds of its "
        "process (`--jobs`: roles side by side, one torch thread each); the CPU seconds are "
        "the honest cost on a shared, sometimes paused machine\n"
        "- tuned rows: the TPE trial sequence depends on the parameter names as well as on "
        "the seed (optuna's multivariate TPE orders the search space by name before it "
        "draws), so a tuned row is reproducible per code version\n"
        "- corpus-level retrievers (`learned_iso`; `iso paper` = IsoRag at its defaults) rank "
        f"the top {corpus_top_k} of the whole corpus on the same folds, not the pool; `dense` "
        "and `map alone` stay the pool rows\n\n"
    )
