import math

import pytest

from georag.eval.metrics import evaluate, mrr_at_k, per_query
from georag.eval.trec import manifest_path, read_run, write_run

QRELS = {"q1": {"a": 2, "c": 1, "x": 0}, "q2": {"b": 1}}
RUN = {"q1": {"a": 0.9, "b": 0.8, "c": 0.7}, "q2": {"a": 0.5, "c": 0.4, "b": 0.3}}


def test_hand_computed_values():
    # trec_eval's ndcg uses linear gains (gain = relevance), as BEIR reports it
    ndcg_q1 = (2 / math.log2(2) + 1 / math.log2(4)) / (2 / math.log2(2) + 1 / math.log2(3))
    ndcg_q2 = (1 / math.log2(4)) / 1.0
    got = evaluate(RUN, QRELS, ["ndcg@10", "mrr@10", "recall@2", "p@2", "map@10", "mrr@2"])
    assert got["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2) / 2)
    assert got["mrr@10"] == pytest.approx((1 + 1 / 3) / 2)
    assert got["mrr@2"] == pytest.approx((1 + 0) / 2)
    assert got["recall@2"] == pytest.approx((1 / 2 + 0) / 2)
    assert got["p@2"] == pytest.approx((1 / 2 + 0) / 2)
    assert got["map@10"] == pytest.approx(((1 + 2 / 3) / 2 + 1 / 3) / 2)
    assert mrr_at_k(RUN, QRELS, 10) == pytest.approx(got["mrr@10"])


def test_missing_or_empty_queries_count_as_zero():
    got = per_query({"q1": {"a": 1.0}, "q2": {}}, QRELS, ["mrr@10"])
    assert got["mrr@10"] == {"q1": 1.0, "q2": 0.0}
    assert evaluate({}, QRELS, ["ndcg@10"])["ndcg@10"] == 0.0


def test_unknown_metric():
    with pytest.raises(ValueError, match="unknown metric 'foo@3'"):
        evaluate(RUN, QRELS, ["foo@3"])
    with pytest.raises(ValueError, match="does not know 'bogus'"):
        evaluate(RUN, QRELS, ["bogus"])


def test_trec_round_trip(tmp_path):
    path = tmp_path / "run.trec"
    write_run(RUN, path, tag="t")
    assert path.read_text().splitlines()[0] == "q1 Q0 a 1 0.900000 t"
    assert read_run(path) == RUN
    path.write_text("q1 Q0 a 1\n")  # changed behind georag's back: the manifest says so
    with pytest.raises(ValueError, match="run.trec: checksum mismatch"):
        read_run(path)
    manifest_path(path).unlink()  # a foreign run (no manifest) is parsed as it is
    with pytest.raises(ValueError, match="run.trec:1: expected 6 fields"):
        read_run(path)
