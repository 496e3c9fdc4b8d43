"""Saved per-query runs: a round trip, validation on save, and checks on load."""

from __future__ import annotations

import pytest

from georag._io import ArtifactError
from georag.experiments.runs import QueryRuns, load_runs, path_of, save_runs, top_k


def sample() -> QueryRuns:
    return QueryRuns(
        dataset="toy",
        source="unit",
        protocol="2-fold CV",
        command="python make.py",
        folds={"fold 1": ["q1"], "fold 2": ["q2"]},
        qrels={"q1": {"d1": 1}, "q2": {"d3": 2}},
        runs={"dense": {"q1": {"d1": 0.5, "d2": 0.7, "d3": 0.7}, "q2": {"d3": 1.0}}},
        extra={"dense": {"seconds": 0.0}},
    )


def test_round_trip_keeps_the_top_k(tmp_path):
    path = save_runs(tmp_path, sample(), k=2)
    assert path == path_of(tmp_path, "toy")
    loaded = load_runs(path)
    assert loaded.runs["dense"]["q1"] == {"d2": 0.7, "d3": 0.7}
    assert loaded.folds == sample().folds and loaded.qrels == sample().qrels
    assert loaded.extra == {"dense": {"seconds": 0.0}}


def test_top_k_breaks_ties_by_document_id():
    assert list(top_k({"q": {"b": 1.0, "a": 1.0, "c": 2.0}}, 2)["q"]) == ["c", "a"]


def test_folds_must_partition_the_judged_queries(tmp_path):
    runs = sample()
    runs.folds = {"fold 1": ["q1"], "fold 2": ["q1", "q2"]}
    with pytest.raises(ValueError, match="^folds: "):
        save_runs(tmp_path, runs)


def test_a_row_with_an_unjudged_query_is_refused(tmp_path):
    runs = sample()
    runs.runs["dense"]["q9"] = {"d1": 1.0}
    with pytest.raises(ValueError, match="^runs: row 'dense'"):
        save_runs(tmp_path, runs)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_file_is_named(tmp_path, damage):
    path = save_runs(tmp_path, sample())
    blob = bytearray(path.read_bytes())
    if damage == "truncate":
        del blob[len(blob) // 2 :]
    else:
        blob[10] ^= 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(ArtifactError, match=str(path)):
        load_runs(path)
