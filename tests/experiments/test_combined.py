"""Merging the saved runs of several scripts into one table: agreement checks, renaming,
the best bar, Holm over the whole table, and the script's files (small synthetic runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from georag.eval.stats import holm, paired_permutation_p
from georag.experiments.combined import combined_rows, merge, outcome
from georag.experiments.runs import QueryRuns, load_runs, save_runs
from georag.experiments.significance import per_query_arrays

QUERIES = [f"q{i:02d}" for i in range(12)]


def ranked(rank: int | None) -> dict[str, dict[str, float]]:
    """Each query's relevant document at ``rank`` (1-based) among 5 (None: absent)."""
    run = {}
    for q in QUERIES:
        docs = [f"{q}-x{j}" for j in range(5)]
        if rank is not None:
            docs[rank - 1] = f"{q}-rel"
        run[q] = {d: 1.0 - 0.1 * j for j, d in enumerate(docs)}
    return run


def runs_of(source: str, rows: dict[str, tuple[int | None, bool]], **changes) -> QueryRuns:
    fields = {
        "dataset": "toy",
        "source": source,
        "protocol": "2-fold CV",
        "command": f"python {source}.py",
        "folds": {"fold0": QUERIES[:6], "fold1": QUERIES[6:]},
        "qrels": {q: {f"{q}-rel": 1} for q in QUERIES},
        "runs": {row: ranked(rank) for row, (rank, _) in rows.items()},
        "extra": {
            "rows": {row: {"geometric": geo, "train_s": 1.5} for row, (_, geo) in rows.items()}
        },
    }
    return QueryRuns(**(fields | changes))


ADDS = {"dense": (3, False), "map": (2, False), "map + head": (1, True), "worse": (None, True)}
GAR = {"dense": (3, False), "map": (2, False), "gar": (2, True)}


def files(*runs: QueryRuns) -> list[tuple[Path, QueryRuns]]:
    return [(Path(f"{r.source}/toy.runs.json.gz"), r) for r in runs]


def test_merge_keeps_one_dense_and_renames_colliding_rows():
    merged = merge(files(runs_of("adds", ADDS), runs_of("gar", GAR)))
    assert list(merged.runs) == ["dense", "map", "map + head", "worse", "map [gar]", "gar"]
    assert merged.rows["map [gar]"] == {"source": "gar", "geometric": False, "train_s": 1.5}
    assert merged.rows["gar"]["geometric"] and merged.rows["dense"]["source"] == "adds"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dataset": "other"}, "data set 'other'"),
        ({"qrels": {q: {f"{q}-rel": 1} for q in QUERIES[:-1]}}, "judged queries differ"),
        ({"qrels": {q: {f"{q}-rel": 2} for q in QUERIES}}, "qrels differ"),
        ({"folds": {"a": QUERIES[:4], "b": QUERIES[4:]}}, "report folds differ"),
        ({"runs": {"dense": ranked(1)}}, "dense row differs"),
        ({"extra": {"rows": {}}}, "row 'dense' has no geometric flag"),
    ],
)
def test_a_file_that_disagrees_is_a_one_line_error_naming_it(changes, message):
    other = runs_of("gar", GAR, **changes)
    with pytest.raises(ValueError, match=f"^gar/toy.runs.json.gz: .*{message}") as error:
        merge(files(runs_of("adds", ADDS), other))
    assert "\n" not in str(error.value)


def test_equal_partitions_under_other_fold_labels_agree():
    other = runs_of("gar", GAR, folds={"holdout1": QUERIES[6:], "holdout0": QUERIES[:6]})
    assert "gar" in merge(files(runs_of("adds", ADDS), other)).runs


def test_holm_runs_over_every_row_of_the_merged_table():
    merged = merge(files(runs_of("adds", ADDS), runs_of("gar", GAR)))
    rows, best = combined_rows(merged, resamples=5000, seed=0)
    assert best == "map"  # the highest non-geometric mean; "map [gar]" ties and comes later
    _, values = per_query_arrays(merged.runs, merged.qrels, ("ndcg@10",))
    family = [r for r in rows if r["method"] != "map"]
    assert len(family) == 5
    raw = [
        paired_permutation_p(values[r["method"]]["ndcg@10"], values["map"]["ndcg@10"], seed=0)
        for r in family
    ]
    np.testing.assert_allclose([r["holm_best"] for r in family], holm(raw))
    np.testing.assert_allclose([r["holm_map"] for r in family], holm(raw))
    head = next(r for r in rows if r["method"] == "map + head")
    assert head["delta_best"] > 0 and head["holm_best"] < 0.05
    low, high = head["delta_best_ci"]
    assert 0 < low == pytest.approx(high) == pytest.approx(head["delta_best"])  # constant gain
    assert not next(r for r in rows if r["method"] == "dense")["pool"]  # 5 documents a query


def test_the_outcome_names_the_rows_that_beat_the_bar_and_those_that_lose():
    merged = merge(files(runs_of("adds", ADDS)))
    rows, best = combined_rows(merged, resamples=5000, seed=0)
    text = outcome("toy", rows, best)
    assert text.startswith("toy (bar: map, ndcg@10 0.6309): beaten with Holm p < 0.05 by")
    assert "map + head (+0.3691" in text and "1 of 2 geometric rows are significantly worse" in text


def test_the_document_holds_the_table_and_the_plot(tmp_path, capsys):
    from georag.experiments.combined_doc import write_combined

    for source, rows in (("adds", ADDS), ("gar", GAR)):
        save_runs(tmp_path / source, runs_of(source, rows))
    assert load_runs(tmp_path / "gar" / "toy.runs.json.gz").source == "gar"
    sources = [str(tmp_path / s) for s in ("adds", "gar", "absent")]
    out = tmp_path / "doc" / "combined.md"
    write_combined(["toy"], sources, out=out, picture=out.with_suffix(".png"))
    text = out.read_text()
    assert "| map [gar] | gar | no |" in text and "`python gar.py`" in text
    assert f"{len(QUERIES)} report queries resolve only large differences" in text
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    save_runs(tmp_path / "gar", runs_of("gar", GAR, runs={"dense": ranked(1)}))
    with pytest.raises(ValueError, match="gar/toy.runs.json.gz: its dense row differs"):
        write_combined(["toy"], sources, out=out, picture=out.with_suffix(".png"))
    capsys.readouterr()
