"""The entity-graph tables: rows on a tiny corpus, the baseline and tests, the selection rule."""

from __future__ import annotations

import pytest

from georag.data.beir import BeirDataset, Document
from georag.experiments.entity_multihop import (
    BARS,
    CANDIDATES,
    DEFAULT,
    GRAPH_ROWS,
    Prepared,
    markdown,
    run_rows,
    selection,
    table_rows,
)
from tests.retrievers import entity_cases as cases


def prepared() -> Prepared:
    c, q = cases.corpus(), cases.queries()
    docs = {d: Document(d, t, x) for d, t, x in zip(c.doc_ids, c.titles, c.texts)}
    qrels = {"q0": {"d0": 1, "d1": 1}, "q1": {"d3": 1, "d4": 1}, "q2": {"d5": 1, "d6": 1}}
    answers = {"q0": ("Lyon",), "q1": ("Dublin",), "q2": ("Echo Lake",)}
    data = BeirDataset("toy", docs, dict(zip(q.ids, q.texts)), qrels, answers)
    return Prepared(data, c, q, 0.0)


def test_rows_metrics_baseline_and_tests(monkeypatch):
    p = prepared()
    graph = {"hipporag2, PPR alone": GRAPH_ROWS["hipporag2, PPR alone"]}
    rows = {"dense": BARS["dense"], "bm25": BARS["bm25"], **graph}
    # the toy graph comes from the stand-in encoder, handed over instead of MiniLM's
    monkeypatch.setattr(
        "georag.retrievers.entity.entity_graph_for", lambda corpus, options: cases.graph()
    )
    values, costs = run_rows(p, rows, top_k=5)
    table = table_rows("toy", values, costs, bars=("dense", "bm25"))
    assert [r["method"] for r in table] == list(rows)
    assert sum(r["baseline"] for r in table) == 1 and all(r["bar"] for r in table[:2])
    graph_row = table[2]
    assert 0.0 <= graph_row["recall@5"] <= 1.0 and graph_row["answer_recall@5"] == 1.0
    assert graph_row["recall@5_p_value"] is not None
    text = markdown(table, counts=": 7 passages")
    assert text.startswith("**toy**: 7 passages") and "(bar)" in text


def test_selection_ranks_by_the_mean_of_both_recalls_over_the_sets():
    def rows(a, b):
        return [
            {"method": "a", "recall@2": a[0], "recall@5": a[1]},
            {"method": "b", "recall@2": b[0], "recall@5": b[1]},
        ]

    ranked = selection({"s1": rows((0.5, 0.9), (0.7, 0.8)), "s2": rows((0.5, 0.7), (0.6, 0.7))})
    assert [name for name, _ in ranked] == ["b", "a"]
    assert ranked[0][1] == pytest.approx((0.75 + 0.65) / 2)


def test_the_default_is_among_the_candidates_at_its_config_defaults():
    method, options = DEFAULT
    assert method == "hipporag2" and options == {}
    assert any(m == "hipporag2" and o["extractors"] == "title" for m, o in CANDIDATES.values())


def test_ablation_tests_pair_iso_entity_with_each_ablation_under_holm():
    from georag.experiments.entity_multihop import ABLATIONS, ablation_markdown, ablation_rows

    qids = [f"q{i}" for i in range(12)]
    high = {m: dict.fromkeys(qids, 1.0) for m in ("recall@2", "recall@5")}
    low = {m: dict.fromkeys(qids, 0.0) for m in ("recall@2", "recall@5")}
    values = {"iso_entity": high, **dict.fromkeys(ABLATIONS["iso_entity"], low)}
    tests = ablation_rows(values)
    assert len(tests) == 2 * len(ABLATIONS["iso_entity"])
    assert all(t["difference"] == 1.0 and t["p_holm"] < 0.01 for t in tests)
    assert ablation_markdown(tests[:1]).startswith("- iso_entity - iso_entity, no pruning:")
    assert ablation_rows({"iso_entity": high}) == []
