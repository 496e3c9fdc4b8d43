"""scripts/quality/quality_learned.py: roles side by side (--jobs) give the rows of one process,
the training subset (--train-queries) and the role choice (--roles) are seeded and named,
and the tuned role's failed trials are reported."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from test_learned_train import labelled_pool  # same folder (rootdir-relative import)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "quality" / "quality_learned.py"


@pytest.fixture(scope="module")
def q():
    spec = importlib.util.spec_from_file_location("quality_learned", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # the workers receive its functions by name, as a script's from ``__main__``
    sys.modules["quality_learned"] = module
    yield module
    del sys.modules["quality_learned"]


def synthetic_folds(dataset, args, encoder, corpus):
    """Two folds of a small labelled pool (384-dim, as the embedding map expects)."""
    assert dataset == "tiny" and not corpus
    pool = labelled_pool(3, b=10, m=12, d=384)
    halves = [list(range(0, 5)), list(range(5, 10))]
    return [
        (pool.subset(halves[1 - f]), pool.subset(halves[f]), None, None, f"fold{f}")
        for f in range(2)
    ]


def _args(q, tmp_path, *extra):
    return q.parse_args(
        ["--methods", "learned_ricci", "--trials", "2", "--epochs", "1", "--patience", "1"]
        + ["--batch-size", "2", "--resamples", "200", "--work", str(tmp_path), *extra]
    )


def _without_times(result):
    """The rows and notes without the timings (which differ from run to run)."""
    notes = {
        name: [{k: v for k, v in fold.items() if k != "seconds"} for fold in folds]
        for name, folds in result["notes"].items()
    }
    return result["runs"], notes, result["qrels"], result["folds"], result["training"]


def test_jobs_give_the_rows_of_one_process(q, tmp_path, monkeypatch):
    monkeypatch.setattr(q, "folds_of", synthetic_folds)
    roles = ["--roles", "map", "learned+map", "tuned"]  # learned and paper: the same code
    one = q.run_dataset("tiny", _args(q, tmp_path / "a", *roles, "--jobs", "1"), None)
    three = q.run_dataset("tiny", _args(q, tmp_path / "b", *roles, "--jobs", "3"), None)
    assert list(three["runs"]) == ["dense", "ricci tuned", "ricci learned+map", "map alone"]
    assert _without_times(one) == _without_times(three)
    for result in (one, three):
        assert set(result["wall_s"]) == set(result["cpu_s"]) == set(result["runs"]) - {"dense"}
        assert all(t > 0 for t in [*result["wall_s"].values(), *result["cpu_s"].values()])
        assert result["seconds"]["ricci learned+map"] > 0 and result["seconds"]["ricci tuned"] > 0
    args = _args(q, tmp_path / "b", *roles, "--jobs", "3")
    rows = {r["method"]: r for r in q.statistics(three, q.metrics_of("tiny"), args)}
    same = {r["method"]: r for r in q.statistics(one, q.metrics_of("tiny"), args)}
    timing = ("train_s", "wall_s", "cpu_s")
    for name, row in rows.items():
        assert {k: v for k, v in row.items() if k not in timing} == {
            k: v for k, v in same[name].items() if k not in timing
        }
    tuned = three["notes"]["ricci tuned"]
    assert [fold["trials"] for fold in tuned] == [2, 2]
    assert all(fold["failed_trials"] == 0 for fold in tuned)


def test_roles_choose_the_rows(q, tmp_path, monkeypatch):
    monkeypatch.setattr(q, "folds_of", synthetic_folds)
    args = _args(q, tmp_path, "--roles", "map", "paper", "--jobs", "2")
    result = q.run_dataset("tiny", args, None)
    assert list(result["runs"]) == ["dense", "ricci paper", "map alone"]
    heading, stem, command = q.selection_of(args)
    assert heading == ": learned_ricci [roles paper map]"
    assert stem == "learned_ricci__roles-paper-map"
    assert "--roles paper map " in command and "--train-queries" not in command
    saved = {
        "title": "tiny" + heading,
        "metrics": q.metrics_of("tiny"),
        "rows": q.statistics(result, q.metrics_of("tiny"), args),
        "notes": result["notes"],
        "note": "Sized for a loaded machine.",
        "command": command,
        "date": "today",
        "load": "1.0",
        "protocol": "2 folds",
    }
    text = q.markdown(saved)
    assert text.startswith("### tiny: learned_ricci [roles paper map] (10 report queries)\n\n")
    assert "(10 report queries)\n\nSized for a loaded machine.\n\n" in text
    assert "| training s | role wall s / CPU s |" in text
    cpu = result["cpu_s"]["map alone"]
    assert f"| {result['wall_s']['map alone']:.0f} / {cpu:.0f} |" in text.splitlines()[-1]
    with pytest.raises(SystemExit):
        q.parse_args(["--roles", "learned", "geometry"])


def test_train_queries_is_a_seeded_subset_named_in_the_section(q, tmp_path, monkeypatch):
    rows = q.training_subset(30, 12, seed=4)
    assert rows == sorted(rows) and len(set(rows)) == 12 and max(rows) < 30
    assert rows == q.training_subset(30, 12, seed=4) != q.training_subset(30, 12, seed=5)
    assert q.training_subset(30, 0, seed=4) == q.training_subset(30, 40, seed=4) == list(range(30))

    monkeypatch.setattr(q, "folds_of", synthetic_folds)
    args = _args(q, tmp_path, "--train-queries", "4", "--roles", "paper", "learned")
    result = q.run_dataset("tiny", args, None)
    assert result["training"] == {"fold0": [4, 5], "fold1": [4, 5]}
    text = q.training_text(result["training"], result["notes"], 0.2)
    assert "trained and tuned on a seeded 4 of the 5 training queries of each fold (" in text
    heading, stem, command = q.selection_of(args)
    assert heading == ": learned_ricci [4 training queries, roles paper learned]"
    assert "--train-queries 4 " in command and stem.endswith(
        "__4-training-queries__roles-paper-learned"
    )
    # the learned row trained and validated on the 4 queries of the subset
    split = json.loads(
        (tmp_path / "tiny" / "fold0" / "learned_riccilearned" / "split.json").read_text()
    )
    pool = synthetic_folds("tiny", args, None, False)[0][0]
    kept = [pool.batch.query_ids[i] for i in q.training_subset(5, 4, seed=0)]
    assert sorted(split["train"] + split["val"]) == sorted(kept) and split["val"]


def test_failed_trials_are_reported(q):
    notes = {
        "ricci tuned": [{"trials": 50, "failed_trials": 2}, {"trials": 50, "failed_trials": 0}]
    }
    text = q.training_text({"fold0": [60, 60], "fold1": [61, 61]}, notes, 0.2)
    assert "on all 60-61 training queries of each fold (learned rows: a seeded 20% of" in text
    holdout = q.training_text({"holdout": [320, 809]}, {}, 0.2)
    assert holdout.startswith("; trained and tuned on a seeded 320 of the 809 training queries (")
    assert "ricci tuned: 2 of 100 TPE trials failed" in text


def test_a_training_error_stops_that_fold_with_its_best_validated_weights(q, tmp_path, monkeypatch):
    from georag.rerank.registry import make_method
    from train.learned_module import LearnedRerankerModule

    def diverges(self, batch, batch_idx):
        raise ValueError("lengths must be finite and non-negative on every edge")

    monkeypatch.setattr(LearnedRerankerModule, "training_step", diverges)
    args = _args(q, tmp_path)
    train = synthetic_folds("tiny", args, None, False)[0][0]
    reranker, spent, summary = q.fit("learned_ricci", {}, train, args, tmp_path / "fit")
    assert summary["error"] == (
        "epoch 0: ValueError: lengths must be finite and non-negative on every edge"
    )
    # it failed before the first step: the best validated weights are the starting ones
    assert reranker.knobs() == make_method("learned_ricci").knobs() and spent > 0
    assert summary["val_best"] == summary["val_init"] and not reranker.training
    text = q.training_text(
        {"fold0": [5, 5], "fold1": [5, 5]}, {"ricci learned": [{}, summary]}, 0.2
    )
    assert "ricci learned: training stopped by an error in 1 of 2 folds (fold1 at epoch 0: " in text

    def broken_start(self):
        raise RuntimeError("no validation")

    monkeypatch.setattr(LearnedRerankerModule, "on_train_start", broken_start)
    with pytest.raises(RuntimeError, match="no validation"):
        q.fit("learned_ricci", {}, train, args, tmp_path / "again")
