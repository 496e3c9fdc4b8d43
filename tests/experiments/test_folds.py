"""georag.experiments.folds: report folds partition the queries, a fold never trains or
validates on its report queries, and training subsets are seeded."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from georag.experiments.folds import cv_folds, cv_rows, subset_training, training_subset
from georag.experiments.training import Training, fit


@settings(max_examples=40, deadline=None)
@given(
    num=st.integers(5, 60),
    folds=st.integers(2, 5),
    val=st.sampled_from([0.1, 0.2, 0.5]),
    seed=st.integers(0, 1000),
)
def test_report_folds_are_disjoint_and_cover_the_queries(num, folds, val, seed):
    parts = [cv_rows(num, folds=folds, fold=f, val_fraction=val, seed=seed) for f in range(folds)]
    reports = [set(report) for _, report in parts]
    assert sum(len(r) for r in reports) == num and set().union(*reports) == set(range(num))
    for (fit_rows, report), held in zip(parts, reports, strict=True):
        assert len(set(fit_rows)) == len(fit_rows) and not set(fit_rows) & held
        assert set(fit_rows) | held == set(range(num)) and report == sorted(report)
    # the seed fixes the folds
    assert parts[0] == cv_rows(num, folds=folds, fold=0, val_fraction=val, seed=seed)


def test_cv_folds_cut_the_pool_by_those_rows(labelled_pool):
    pool = labelled_pool(1)
    folds = cv_folds(pool, None, folds=5, val_fraction=0.2, seed=7)
    ids = pool.batch.query_ids
    assert [f.label for f in folds] == [f"fold{i}" for i in range(5)]
    for i, fold in enumerate(folds):
        fit_rows, report_rows = cv_rows(len(ids), folds=5, fold=i, val_fraction=0.2, seed=7)
        assert fold.train.batch.query_ids == [ids[r] for r in fit_rows]
        assert fold.report.batch.query_ids == [ids[r] for r in report_rows]
        assert set(fold.report.qrels) == set(fold.report.batch.query_ids)
        assert fold.train_queries is None and fold.report_queries is None


def test_nested_validation_never_touches_the_report_fold(labelled_pool, tmp_path):
    """The learned model's own training / validation split (``split.json`` of its run)
    holds only the fold's training queries, all of them."""
    pool = labelled_pool(2)
    training = Training(epochs=1, patience=1, batch_size=4)
    for fold in cv_folds(pool, None, folds=2, val_fraction=0.2, seed=0):
        folder = tmp_path / fold.label
        _, _, summary = fit("learned_map", {}, fold.train, training, folder)
        split = json.loads((folder / "split.json").read_text())
        assert split["val"] and split["train"]
        assert sorted(split["train"] + split["val"]) == sorted(fold.train.batch.query_ids)
        assert not set(split["train"] + split["val"]) & set(fold.report.batch.query_ids)
        assert summary["epochs"] >= 1


def test_training_subsets_are_seeded_and_keep_the_report_folds(two_folds):
    rows = training_subset(30, 12, seed=4)
    assert rows == sorted(rows) and len(set(rows)) == 12 and max(rows) < 30
    assert rows == training_subset(30, 12, seed=4) != training_subset(30, 12, seed=5)
    assert training_subset(30, 0, seed=4) == training_subset(30, 40, seed=4) == list(range(30))
    cut, counts = subset_training(two_folds, 3, seed=0)
    assert counts == {"fold0": [3, 5], "fold1": [3, 5]}
    for old, new in zip(two_folds, cut, strict=True):
        kept = [old.train.batch.query_ids[i] for i in training_subset(5, 3, seed=0)]
        assert new.train.batch.query_ids == kept and new.report is old.report
    same, counts = subset_training(two_folds, 0, seed=0)
    assert counts == {"fold0": [5, 5], "fold1": [5, 5]}
    assert [f.train for f in same] == [f.train for f in two_folds]
