"""georag.experiments.significance: the rows' means, intervals and Holm-corrected tests."""

from __future__ import annotations

import numpy as np
import pytest

from georag.eval.stats import holm, paired_permutation_p
from georag.experiments.significance import (
    holm_tests,
    interval_rows,
    learned_rows,
    metrics_of,
    per_query_arrays,
)


def hand_holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment written out: the i-th smallest p times (m - i), made
    monotone, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def test_holm_against_a_hand_example():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, 2 * 0.03, max(0.06, 1 * 0.04): in input order
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.2]) == pytest.approx([0.5, 0.4])
    assert hand_holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def _result(seed: int = 0, queries: int = 12) -> dict:
    """Runs of four rows over ``queries`` queries of two documents each, ``d1`` relevant:
    a row ranks it first for a share of the queries."""
    rng = np.random.default_rng(seed)
    qrels = {f"q{i}": {"d1": 1} for i in range(queries)}
    share = {"dense": 0.4, "ricci paper": 0.5, "ricci learned+map": 0.9, "map alone": 0.7}
    runs = {}
    for name, p in share.items():
        first = rng.random(queries) < p
        runs[name] = {
            q: {"d1": 2.0, "d2": 1.0} if hit else {"d1": 1.0, "d2": 2.0}
            for q, hit in zip(qrels, first, strict=True)
        }
    seconds = {"ricci learned+map": 3.0, "map alone": 2.0}
    return {"runs": runs, "qrels": qrels, "seconds": seconds, "cpu_s": {"map alone": 1.5}}


def test_learned_rows_test_against_dense_and_the_map_alone_with_holm():
    result = _result()
    metrics = metrics_of("cisi")
    rows = {r["method"]: r for r in learned_rows(result, metrics, resamples=500, seed=0)}
    assert list(rows) == list(result["runs"]) and metrics[0] == "ndcg@10"
    _, values = per_query_arrays(result["runs"], result["qrels"], metrics)
    dense = values["dense"]["ndcg@10"]
    others = [n for n in rows if n != "dense"]
    raw = [paired_permutation_p(values[n]["ndcg@10"], dense, resamples=500, seed=0) for n in others]
    assert [rows[n]["p"] for n in others] == raw
    assert [rows[n]["p_holm"] for n in others] == pytest.approx(hand_holm(raw))
    assert "p" not in rows["dense"] and "delta" not in rows["dense"]
    for name in others:
        delta = (values[name]["ndcg@10"] - dense).mean()
        assert rows[name]["delta"] == pytest.approx(delta)
    mapped = rows["ricci learned+map"]
    alone = values["map alone"]["ndcg@10"]
    assert mapped["delta_map"] == pytest.approx(
        (values["ricci learned+map"]["ndcg@10"] - alone).mean()
    )
    one = paired_permutation_p(values["ricci learned+map"]["ndcg@10"], alone, resamples=500, seed=0)
    assert mapped["p_map_holm"] == pytest.approx(one)  # Holm over one row: the raw p
    assert all("p_map_holm" not in r for n, r in rows.items() if n != "ricci learned+map")
    for row in rows.values():
        low, high = row["ndcg@10_ci"]
        assert low <= row["ndcg@10"] <= high and row["queries"] == 12
    assert rows["map alone"]["cpu_s"] == 1.5 and "cpu_s" not in rows["dense"]
    assert rows["ricci learned+map"]["train_s"] == 3.0 and rows["dense"]["train_s"] == 0.0


def test_multihop_sets_test_recall_at_5_and_a_missing_query_counts_zero():
    assert metrics_of("hotpotqa_dev500")[0] == "recall@5" and metrics_of("scifact")[0] == "ndcg@10"
    runs = {"dense": {"q0": {"d1": 1.0}}}
    queries, values = per_query_arrays(runs, {"q0": {"d1": 1}, "q1": {"d1": 1}}, ("ndcg@10",))
    assert queries == ["q0", "q1"] and values["dense"]["ndcg@10"].tolist() == [1.0, 0.0]


def test_holm_tests_are_one_family_in_the_order_of_the_pairs():
    result = _result(seed=3, queries=16)
    _, values = per_query_arrays(result["runs"], result["qrels"], ("ndcg@10",))
    pairs = [("ricci learned+map", "map alone"), ("ricci paper", "dense"), ("map alone", "dense")]
    tests = holm_tests(values, "ndcg@10", pairs, resamples=400, seed=2)
    raw = [
        paired_permutation_p(values[a]["ndcg@10"], values[b]["ndcg@10"], resamples=400, seed=2)
        for a, b in pairs
    ]
    assert [t[1] for t in tests] == raw
    assert [t[2] for t in tests] == pytest.approx(hand_holm(raw))
    for (a, b), (delta, _, _) in zip(pairs, tests, strict=True):
        assert delta == pytest.approx((values[a]["ndcg@10"] - values[b]["ndcg@10"]).mean())
    assert holm_tests(values, "ndcg@10", [], resamples=400, seed=2) == []


def test_interval_rows_hold_every_row_in_order_with_its_interval():
    result = _result(seed=4)
    metrics = metrics_of("cisi")
    _, values = per_query_arrays(result["runs"], result["qrels"], metrics)
    rows = interval_rows(values, metrics, resamples=300, seed=0)
    assert [r["method"] for r in rows] == list(result["runs"])
    for row in rows:
        assert row["queries"] == 12
        for metric in metrics:
            low, high = row[f"{metric}_ci"]
            assert row[metric] == pytest.approx(values[row["method"]][metric].mean())
            assert low <= row[metric] <= high
