"""georag.experiments.phrase_multihop (scripts/quality/quality_multihop.py): its splits are
those of ``learned_folds``, its knobs are tuned by the data set's tested metric (computed as
pytrec_eval computes it), and its per-query runs file is written and read back with every
row's flags and seconds.

The phrase graph and its PPR are tested in tests/retrieval/ and tests/rerank/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from georag.batch import Corpus, QueryBatch
from georag.eval.metrics import evaluate
from georag.experiments.folds import learned_folds
from georag.experiments.runs import load_runs, path_of, save_runs
from train.corpus_data import QuerySet
from train.pools import kfold_split


@pytest.fixture(scope="module")
def mh():
    from georag.experiments import phrase_multihop

    return phrase_multihop


@pytest.fixture(scope="module")
def encoder(text_encoder):
    return text_encoder  # the session's encoder (tests/conftest.py)


def _present(data_dir: Path, name: str) -> bool:
    from georag.data.datasets import MULTIHOP_FILES

    return (data_dir / MULTIHOP_FILES.get(name, name)).exists()


def _learned_folds(name: str, data_dir: Path, encoder):
    """The pools of ``learned_folds`` as scripts/quality/quality_geometry_adds.py asks them."""
    return learned_folds(
        name,
        data_dir=str(data_dir),
        encoder=encoder,
        corpus=False,
        folds=5,
        val_fraction=0.2,
        seed=0,
    )


# the splits are a function of the ids: the hash encoder embeds no passage (conftest.py)
@pytest.mark.parametrize("name", ["cranfield", "musique_qa100", "cisi", "hotpotqa_dev500"])
def test_the_cv_splits_are_those_of_learned_folds(mh, data_dir, hash_encoder, name):
    encoder = hash_encoder
    if not _present(data_dir, name):
        pytest.skip(f"{name} not under {data_dir}")
    args = mh.parse_args(["--data-dir", str(data_dir), "--datasets", name])
    splits = mh.folds_of(name, args, encoder)
    folds = _learned_folds(name, data_dir, encoder)
    assert [s[0] for s in splits] == [f.label for f in folds] == [f"fold{i}" for i in range(5)]
    # the seeded 5-fold partition (train.pools.kfold_split) of the queries in loading order
    queries = mh.load_query_set(name, data_dir=str(data_dir), encoder=encoder).batch.ids
    for i, ((_, pool, train, report), fold) in enumerate(zip(splits, folds, strict=True)):
        assert pool.batch.query_ids == train.batch.ids == fold.train.batch.query_ids
        assert report.batch.ids == fold.report.batch.query_ids
        assert not set(train.batch.ids) & set(report.batch.ids)
        held = kfold_split(len(queries), folds=5, fold=i, seed=0)[1]
        assert report.batch.ids == [queries[r] for r in held]
    reported = [q for _, _, _, report in splits for q in report.batch.ids]
    assert sorted(reported) == sorted(set(reported)) == sorted(queries)


@pytest.mark.slow
def test_scifact_trains_on_its_training_split_and_reports_on_test(mh, data_dir, encoder):
    if not _present(data_dir, "scifact"):
        pytest.skip(f"scifact not under {data_dir}")
    args = mh.parse_args(["--data-dir", str(data_dir), "--datasets", "scifact"])
    [(label, pool, train, report)] = mh.folds_of("scifact", args, encoder)
    [fold] = _learned_folds("scifact", data_dir, encoder)
    assert label == fold.label == "holdout"
    assert train.batch.ids == pool.batch.query_ids == fold.train.batch.query_ids
    assert report.batch.ids == fold.report.batch.query_ids
    assert len(train.batch.ids) == 809 and len(report.batch.ids) == 300


def _queries(n: int = 20) -> QuerySet:
    """Two queries over ``n`` passages, each with two relevant ones (gains 1 and 2)."""
    generator = torch.Generator().manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(n, 384, generator=generator), dim=1)
    ids = [f"d{i}" for i in range(n)]
    corpus = Corpus(ids, [""] * n, ["text"] * n, emb)
    batch = QueryBatch(["a", "b"], ["query a", "query b"], emb[:2].clone())
    return QuerySet.build(corpus, batch, {"a": {"d0": 1, "d1": 2}, "b": {"d2": 1, "d3": 1}})


def _ranking(n: int, first: dict[int, int]) -> torch.Tensor:
    """Scores (n,) that put passage ``d`` at rank ``first[d]`` (1-based), the rest after."""
    rest = iter(d for d in range(n) if d not in first)
    order = [None] * n
    for doc, rank in first.items():
        order[rank - 1] = doc
    order = [next(rest) if d is None else d for d in order]
    scores = torch.empty(n)
    scores[torch.tensor(order)] = torch.arange(n, 0, -1).float()
    return scores


def test_the_knobs_are_tuned_by_the_tested_metric(mh):
    assert [mh.metrics_for(n)[0] for n in mh.DATASETS] == [
        "ndcg@10",
        "ndcg@10",
        "ndcg@10",
        "recall@5",
        "recall@5",
        "recall@5",
    ]
    q, n = _queries(), 20
    # "top": the relevant passages at ranks 1 and 8; "both": at ranks 4 and 5
    top = torch.stack([_ranking(n, {1: 1, 0: 8}), _ranking(n, {2: 1, 3: 8})])
    both = torch.stack([_ranking(n, {1: 4, 0: 5}), _ranking(n, {2: 4, 3: 5})])
    for scores in (top, both):
        keep = torch.ones_like(scores, dtype=torch.bool)
        run = mh.scores_to_run(scores, keep, q.batch.ids, q.corpus.doc_ids)
        pytrec = evaluate(run, q.qrels, ["ndcg@10", "recall@5"])
        for metric, value in pytrec.items():
            assert mh.mean_metric(scores, q, metric) == pytest.approx(value, rel=1e-6)
    candidates = [("top", top), ("both", both)]
    assert mh.choose(candidates, q, "ndcg@10") == "top"
    assert mh.choose(candidates, q, "recall@5") == "both"
    assert mh.choose([("first", top), ("tie", top.clone())], q, "ndcg@10") == "first"
    with pytest.raises(ValueError, match="metric"):
        mh.mean_metric(top, q, "mrr@10")


ROWS = (
    "dense",
    "map alone",
    "map+bm25",
    "map+phrase-PPR",
    "map+bm25+phrase-PPR",
    "iso paper",
    "ppr_global",
)


def _part(label: str, queries: list[str]) -> dict:
    """A split's results as ``run_split`` returns them (runs, qrels, seconds, knobs)."""
    rows = ROWS
    return {
        "label": label,
        "runs": {row: {q: {"d0": 1.0, "d1": 0.5} for q in queries} for row in rows},
        "qrels": {q: {"d0": 1} for q in queries},
        "seconds": {row: 1.5 if row != "dense" else 0.0 for row in rows},
        "row_knobs": {row: {"fold": label} for row in rows},
    }


@pytest.mark.parametrize(("name", "saved_as"), [("cisi", "cisi"), ("musique", "musique_transfer")])
def test_the_runs_file_is_written_and_read_back(mh, tmp_path, name, saved_as):
    args = mh.parse_args(["--datasets", name, "--epochs", "20", "--patience", "3"])
    args.metric = mh.metrics_for(name)[0]
    parts = [_part("fold0", ["q1", "q3"]), _part("fold1", ["q2"])]
    runs = mh.query_runs(name, parts, args)
    path = save_runs(tmp_path, runs, k=mh.TOP_K)
    assert path == path_of(tmp_path, saved_as)
    back = load_runs(path)
    assert back.dataset == saved_as and back.source == "multihop"
    assert back.folds == {"fold0": ["q1", "q3"], "fold1": ["q2"]}
    assert set(back.qrels) == {"q1", "q2", "q3"} and set(back.runs) == set(ROWS)
    assert back.runs["map+bm25"]["q2"] == {"d0": 1.0, "d1": 0.5}
    flags = {row: info["geometric"] for row, info in back.extra["rows"].items()}
    assert flags == mh.GEOMETRIC
    assert [row for row, geometric in flags.items() if not geometric] == [
        "dense",
        "map alone",
        "map+bm25",
    ]
    assert back.extra["rows"]["map alone"]["train_s"] == 3.0
    assert back.extra["rows"]["dense"]["train_s"] == 0.0
    assert back.extra["rows"]["map+bm25"]["knobs"] == {
        "fold0": {"fold": "fold0"},
        "fold1": {"fold": "fold1"},
    }
    assert back.extra["metric"] == args.metric
    assert "at most 20 epochs, patience 3" in back.protocol
    assert ("musique_train100" in back.protocol) == (name == "musique")
