"""georag.experiments.entity_trained: its pools join without repeating a question, its splits
are learned_folds' or the training files', and its table (a seeded 20 questions of
musique_train100, one epoch, reported on musique_qa100) has every row, flags the bars,
runs HippoRAG 2 with the saved map and tunes its knobs on their grids."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import georag.retrievers.phrase_ppr as map_loader
from georag.experiments import entity_trained as et
from georag.experiments.folds import learned_folds
from georag.experiments.training import Training
from georag.rerank.baselines.learned_map import LearnedMap
from georag.rerank.learned import load_weights
from georag.resources import default_cache_dir

TRAIN = ("musique_train100",)
REPORT = "musique_qa100"


@pytest.fixture(scope="module")
def encoder(text_encoder):
    return text_encoder  # the test run's one encoder (tests/conftest.py)


def test_concat_pools_keeps_every_query_in_order(labelled_pool):
    a, b = labelled_pool(1, b=4), labelled_pool(2, b=3)
    b = dataclasses.replace(
        b,
        batch=dataclasses.replace(b.batch, query_ids=[f"other-{q}" for q in b.batch.query_ids]),
        qrels={f"other-{q}": judged for q, judged in b.qrels.items()},
    )
    joined = et.concat_pools([a, b])
    assert joined.batch.query_ids == a.batch.query_ids + b.batch.query_ids
    assert joined.batch.doc_ids == a.batch.doc_ids + b.batch.doc_ids
    assert torch.equal(joined.batch.cands, torch.cat([a.batch.cands, b.batch.cands]))
    assert torch.equal(joined.gains, torch.cat([a.gains, b.gains]))
    assert torch.equal(joined.ideal, torch.cat([a.ideal, b.ideal]))
    assert joined.qrels == {**a.qrels, **b.qrels}


def test_concat_pools_refuses_a_question_twice(labelled_pool):
    pool = labelled_pool(1, b=4)
    with pytest.raises(ValueError, match="more than one pool"):
        et.concat_pools([pool, pool.subset([0])])


# the splits are a function of the ids: the hash encoder embeds no passage (conftest.py)
def test_both_musique_training_files_give_one_pool_without_their_shared_question(
    data_dir, hash_encoder
):
    (split,) = et.splits(
        REPORT,
        data_dir=data_dir,
        encoder=hash_encoder,
        training=Training(),
        train_sets=et.TRAINING[REPORT],
    )
    ids = split.pool.batch.query_ids
    first, second = split.tune
    assert len(ids) == len(set(ids)) == 299  # 100 + 200, one question in both files
    assert ids == first.batch.ids + second.batch.ids
    assert len(first.batch.ids) == 100 and not set(first.batch.ids) & set(second.batch.ids)
    assert first.corpus is not second.corpus  # each file's questions over its own corpus


def test_cross_validation_splits_are_learned_folds(data_dir, hash_encoder):
    found = et.splits(
        REPORT, data_dir=data_dir, encoder=hash_encoder, training=Training(), train_sets=(),
        keep=10,
    )  # fmt: skip
    folds = learned_folds(
        REPORT, data_dir=str(data_dir), encoder=hash_encoder, corpus=True, folds=5,
        val_fraction=0.2, seed=0,
    )  # fmt: skip
    assert [s.label for s in found] == [f.label for f in folds]
    for split, fold in zip(found, folds, strict=True):
        assert split.report.ids == fold.report_queries.batch.ids
        assert len(split.pool.batch.query_ids) == 10
        assert split.pool.batch.query_ids == split.tune[0].batch.ids
        assert set(split.pool.batch.query_ids) <= set(fold.train.batch.query_ids)
    reported = [q for s in found for q in s.report.ids]
    assert len(reported) == len(set(reported)) == 100


@pytest.fixture(scope="module")
def table(data_dir, encoder, tmp_path_factory):
    """The trained table of musique_qa100 and the weights files HippoRAG 2 was built with."""
    loaded = []

    class Recorded(LearnedMap):
        def __init__(self, config=None):
            loaded.append(config.weights)
            super().__init__(config)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(map_loader, "LearnedMap", Recorded)
        result = et.trained_table(
            REPORT,
            data_dir=data_dir,
            encoder=encoder,
            cache=default_cache_dir(),
            work=tmp_path_factory.mktemp("entity-trained"),
            training=Training(epochs=1),
            train_sets=TRAIN,
            keep=20,
        )
    return result, loaded


def test_the_table_has_every_row_and_flags_the_bars(table):
    result, _ = table
    rows = {row["method"]: row for row in result["rows"]}
    assert list(rows) == list(et.ROWS)
    assert [r for r in rows if rows[r]["bar"]] == list(et.BARS)
    (baseline,) = [r for r in rows if rows[r]["baseline"]]
    assert baseline == max(et.BARS, key=lambda r: rows[r]["recall@5"])
    assert rows[baseline]["recall@5_p_value"] is None
    for label, row in rows.items():
        assert row["train_s"] > 0 and set(row["knobs"]) == {"+".join(TRAIN)}
        if label != baseline:
            assert 0 <= row["recall@5_p_value"] <= 1
    assert result["questions"] == 100 and result["splits"]["+".join(TRAIN)]["train_queries"] == 20
    for values in result["per_query"].values():
        assert len(values["recall@5"]) == 100


def test_hipporag2_with_the_map_loads_the_saved_file(table):
    result, loaded = table
    path = result["splits"]["+".join(TRAIN)]["map"]
    assert Path(path).is_file() and load_weights(path, "learned_map")
    # four fusion weights tuned on the training set, the two reported rows, then the
    # learned twin's fixed method (each time its knobs change)
    assert loaded[: len(et.FUSION_WEIGHTS) + 2] == [path] * (len(et.FUSION_WEIGHTS) + 2)
    assert set(loaded) == {path}


def test_the_tuned_knobs_are_the_best_of_their_grids(table):
    result, _ = table
    knobs = {row["method"]: row["knobs"]["+".join(TRAIN)] for row in result["rows"]}
    for row, key, grid in (
        ("map+bm25", "bm25_weight", et.BM25_WEIGHTS),
        ("hipporag2 + map, fusion weight tuned", "fusion_weight", et.FUSION_WEIGHTS),
    ):
        chosen, tuning = knobs[row][key], knobs[row]["tuning"]
        assert chosen in grid and list(tuning) == list(grid)
        assert tuning[chosen] == max(tuning.values())
        assert all(tuning[g] < tuning[chosen] for g in grid[: grid.index(chosen)])
