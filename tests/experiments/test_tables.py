"""georag.experiments.tables: one set of cells, rendered in Markdown and LaTeX."""

from __future__ import annotations

import pytest

from georag.experiments.tables import (
    learned_cells,
    learned_latex,
    learned_markdown,
    protocol_text,
    training_text,
)


def _saved(timed: bool = True) -> dict:
    rows = [
        {"method": "dense", "queries": 4, "train_s": 0.0},
        {
            "method": "ricci learned+map",
            "queries": 4,
            "train_s": 12.34,
            "delta": 0.0123,
            "p": 0.02,
            "p_holm": 0.04,
            "delta_map": -0.001,
            "p_map_holm": 0.9,
        },
    ]
    for row, base in zip(rows, (0.5, 0.55), strict=True):
        for k, metric in enumerate(("ndcg@10", "recall@10", "mrr@10")):
            row[metric] = base + k / 10
            row[f"{metric}_ci"] = [base + k / 10 - 0.05, base + k / 10 + 0.05]
    if timed:
        rows[1].update(wall_s=100.4, cpu_s=80.6)
    return {
        "title": "cisi: learned_ricci",
        "metrics": ["ndcg@10", "recall@10", "mrr@10"],
        "rows": rows,
        "notes": {
            "ricci learned+map": [
                {"val_init": 0.4, "val_best": 0.5},
                {"val_init": 0.6, "val_best": 0.7},
            ]
        },
        "command": "python scripts/quality/quality_learned.py --datasets cisi",
        "date": "today",
        "load": "1.0 -> 2.0",
        "protocol": "2 folds",
        "note": "",
    }


@pytest.mark.parametrize("timed", [True, False])
def test_markdown_and_latex_show_the_same_cells(timed):
    saved = _saved(timed)
    columns, cells = learned_cells(saved)
    assert len(columns) == 9 + timed and all(len(row) == len(columns) for row in cells)
    text = learned_markdown(saved)
    lines = text.splitlines()
    assert lines[0] == "### cisi: learned_ricci (4 report queries)"
    command = "`python scripts/quality/quality_learned.py --datasets cisi`; today, "
    assert command + "load average 1.0 -> 2.0; 2 folds" in text
    head = "| method | NDCG@10 [95% CI] | Recall@10 [95% CI] | MRR@10 [95% CI] | ΔNDCG@10 vs dense "
    assert head + "| p (Holm) | Δ vs map alone | p (Holm) | training s |" in text
    assert ("| role wall s / CPU s |" in text) == timed
    learned = lines[-1]
    assert learned.startswith(
        "| ricci learned+map (val 0.500 → 0.600) | 0.5500 [0.5000, 0.6000] | "
    )
    assert "| +0.0123 | 0.0400 | -0.0010 | 0.9000 | 12.3 |" in learned
    assert learned.endswith("| 100 / 81 |" if timed else "| 12.3 |")
    assert lines[-2].startswith("| dense | 0.5000 [0.4500, 0.5500] |") and lines[-2].endswith(
        "|  |"
    )
    tex = learned_latex(saved).splitlines()
    assert tex[0] == "\\begin{tabular}{l" + "r" * (len(columns) - 1) + "}"
    assert "$\\Delta$NDCG@10 vs dense" in tex[2] and tex[2].count(" & ") == len(columns) - 1
    body = tex[4:-2]
    assert len(body) == len(cells) and all(r.count(" & ") == len(columns) - 1 for r in body)
    assert body[1].startswith(
        "ricci learned+map (val 0.500 $\\to$ 0.600) & 0.5500 {\\scriptsize [0.5000, 0.6000]}"
    )


def test_the_protocol_line_names_the_split_the_subset_and_the_failures():
    assert protocol_text("scifact", folds=5, seed=0, work_file="w.json") == (
        "train on qrels/train.tsv, report on test"
    )
    cv = protocol_text("cisi", folds=5, seed=3, work_file="runs/x/cisi__a.json")
    assert cv == (
        "5-fold CV over queries, seed 3 (the report queries of each fold: `folds` in "
        "`runs/x/cisi__a.json`)"
    )
    notes = {
        "ricci tuned": [{"trials": 50, "failed_trials": 2}, {"trials": 50, "failed_trials": 0}]
    }
    text = training_text({"fold0": [60, 60], "fold1": [61, 61]}, notes, 0.2)
    assert "on all 60-61 training queries of each fold (learned rows: a seeded 20% of" in text
    assert "ricci tuned: 2 of 100 TPE trials failed" in text
    holdout = training_text({"holdout": [320, 809]}, {}, 0.2)
    assert holdout.startswith("; trained and tuned on a seeded 320 of the 809 training queries (")
    stopped = training_text(
        {"fold0": [5, 5], "fold1": [5, 5]}, {"ricci learned": [{}, {"error": "epoch 0: E"}]}, 0.2
    )
    assert (
        "ricci learned: training stopped by an error in 1 of 2 folds (fold1 at epoch 0: E)"
        in stopped
    )
