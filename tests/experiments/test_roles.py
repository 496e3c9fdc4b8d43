"""georag.experiments.roles: roles side by side (jobs) give the rows of one process, the
training subset and the role choice pick the rows, the tuned role's failed trials are
counted, and a training error stops that fold with its best validated weights."""

from __future__ import annotations

import json

import pytest

from georag.experiments.folds import training_subset
from georag.experiments.roles import role_tasks, row_name, run_dataset
from georag.experiments.selection import LearnedRun
from georag.experiments.significance import learned_rows, metrics_of
from georag.experiments.tables import learned_markdown, training_text
from georag.experiments.training import Training, fit


def _run(tmp_path, **fields) -> LearnedRun:
    """A run of learned_ricci sized for the tests: 2 TPE trials, 1 epoch, 200 resamples."""
    base = {
        "methods": ("learned_ricci",),
        "trials": 2,
        "work": tmp_path,
        "training": Training(epochs=1, patience=1, batch_size=2),
        "resamples": 200,
    }
    return LearnedRun(**{**base, **fields})


def _without_times(result):
    """The rows and notes without the timings (which differ from run to run)."""
    notes = {
        name: [{k: v for k, v in fold.items() if k != "seconds"} for fold in folds]
        for name, folds in result["notes"].items()
    }
    return result["runs"], notes, result["qrels"], result["folds"], result["training"]


def test_role_tasks_are_in_table_order():
    assert role_tasks(("learned_ricci", "learned_diffusion"), ("map", "paper", "learned")) == [
        ("paper", "learned_ricci"),
        ("learned", "learned_ricci"),
        ("paper", "learned_diffusion"),
        ("learned", "learned_diffusion"),
        ("map", None),
    ]
    assert row_name("learned+map", "learned_ricci") == "ricci learned+map"
    assert row_name("map", None) == "map alone"


def test_jobs_give_the_rows_of_one_process(two_folds, tmp_path):
    roles = ("map", "learned+map", "tuned")  # learned and paper: the same code
    one = run_dataset("tiny", two_folds, _run(tmp_path / "a", roles=roles, jobs=1))
    three = run_dataset("tiny", two_folds, _run(tmp_path / "b", roles=roles, jobs=3))
    assert list(three["runs"]) == ["dense", "ricci tuned", "ricci learned+map", "map alone"]
    assert _without_times(one) == _without_times(three)
    for result in (one, three):
        assert set(result["wall_s"]) == set(result["cpu_s"]) == set(result["runs"]) - {"dense"}
        assert all(t > 0 for t in [*result["wall_s"].values(), *result["cpu_s"].values()])
        assert result["seconds"]["ricci learned+map"] > 0 and result["seconds"]["ricci tuned"] > 0
    rows = {r["method"]: r for r in learned_rows(three, metrics_of("tiny"), resamples=200, seed=0)}
    same = {r["method"]: r for r in learned_rows(one, metrics_of("tiny"), resamples=200, seed=0)}
    timing = ("train_s", "wall_s", "cpu_s")
    for name, row in rows.items():
        assert {k: v for k, v in row.items() if k not in timing} == {
            k: v for k, v in same[name].items() if k not in timing
        }
    tuned = three["notes"]["ricci tuned"]
    assert [fold["trials"] for fold in tuned] == [2, 2]
    assert all(fold["failed_trials"] == 0 for fold in tuned)


def test_roles_choose_the_rows_and_the_section_times_them(two_folds, tmp_path):
    run = _run(tmp_path, roles=("map", "paper"), jobs=2)
    result = run_dataset("tiny", two_folds, run)
    assert list(result["runs"]) == ["dense", "ricci paper", "map alone"]
    saved = {
        "title": "tiny: learned_ricci",
        "metrics": metrics_of("tiny"),
        "rows": learned_rows(result, metrics_of("tiny"), resamples=200, seed=0),
        "notes": result["notes"],
        "note": "Sized for a loaded machine.",
        "command": "python scripts/quality/quality_learned.py",
        "date": "today",
        "load": "1.0",
        "protocol": "2 folds",
    }
    text = learned_markdown(saved)
    assert text.startswith("### tiny: learned_ricci (10 report queries)\n\n")
    assert "(10 report queries)\n\nSized for a loaded machine.\n\n" in text
    assert "| training s | role wall s / CPU s |" in text
    cpu = result["cpu_s"]["map alone"]
    assert f"| {result['wall_s']['map alone']:.0f} / {cpu:.0f} |" in text.splitlines()[-1]


def test_train_queries_train_on_a_seeded_subset(two_folds, tmp_path):
    run = _run(tmp_path, train_queries=4, roles=("paper", "learned"))
    result = run_dataset("tiny", two_folds, run)
    assert result["training"] == {"fold0": [4, 5], "fold1": [4, 5]}
    text = training_text(result["training"], result["notes"], 0.2)
    assert "trained and tuned on a seeded 4 of the 5 training queries of each fold (" in text
    # the learned row trained and validated on the 4 queries of the subset, none reported
    split = json.loads(
        (tmp_path / "tiny" / "fold0" / "learned_riccilearned" / "split.json").read_text()
    )
    pool = two_folds[0].train
    kept = [pool.batch.query_ids[i] for i in training_subset(5, 4, seed=0)]
    assert sorted(split["train"] + split["val"]) == sorted(kept) and split["val"]
    assert not set(kept) & set(two_folds[0].report.batch.query_ids)


def test_folds_that_share_a_query_are_refused(two_folds, tmp_path):
    leaky = [two_folds[0]._replace(report=two_folds[0].train)]
    with pytest.raises(ValueError, match="fold0 trains on some of its report queries"):
        run_dataset("tiny", leaky, _run(tmp_path, roles=("paper",)))


def test_a_training_error_stops_that_fold_with_its_best_validated_weights(
    two_folds, tmp_path, monkeypatch
):
    from georag.rerank.registry import make_method
    from train.learned_module import LearnedRerankerModule

    def diverges(self, batch, batch_idx):
        raise ValueError("lengths must be finite and non-negative on every edge")

    monkeypatch.setattr(LearnedRerankerModule, "training_step", diverges)
    training = _run(tmp_path).training
    train = two_folds[0].train
    reranker, spent, summary = fit("learned_ricci", {}, train, training, tmp_path / "fit")
    assert summary["error"] == (
        "epoch 0: ValueError: lengths must be finite and non-negative on every edge"
    )
    # it failed before the first step: the best validated weights are the starting ones
    assert reranker.knobs() == make_method("learned_ricci").knobs() and spent > 0
    assert summary["val_best"] == summary["val_init"] and not reranker.training
    text = training_text({"fold0": [5, 5], "fold1": [5, 5]}, {"ricci learned": [{}, summary]}, 0.2)
    assert "ricci learned: training stopped by an error in 1 of 2 folds (fold1 at epoch 0: " in text

    def broken_start(self):
        raise RuntimeError("no validation")

    monkeypatch.setattr(LearnedRerankerModule, "on_train_start", broken_start)
    with pytest.raises(RuntimeError, match="no validation"):
        fit("learned_ricci", {}, train, training, tmp_path / "again")
