"""Significance and intervals: hand-computed cases, scipy references, ranx on real scifact runs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import ttest_rel

from georag.eval.metrics import per_query
from georag.eval.report import latex_table, markdown_table
from georag.eval.stats import annotate, bootstrap_ci, holm, mark, paired_permutation_p


def test_permutation_p_hand_computed():
    # d = 1..5: of the 2**5 sign flips only all-plus and all-minus reach |mean| >= 3
    assert paired_permutation_p([1, 2, 3, 4, 5], [0] * 5) == pytest.approx(2 / 32)
    # one negative difference: count the flips with |sum| >= |1 + 2 + 3 + 4 - 5| by hand
    d = np.array([1, 2, 3, 4, -5])
    flips = [abs((d * s).sum()) >= abs(d.sum()) for s in itertools.product([1, -1], repeat=5)]
    assert paired_permutation_p(d, np.zeros(5)) == pytest.approx(np.mean(flips))
    assert paired_permutation_p([0.3, 0.2], [0.3, 0.2]) == 1.0


def test_permutation_p_near_the_t_test_on_a_large_sample():
    rng = np.random.default_rng(3)
    a = rng.normal(0.5, 0.2, 400)
    b = a - 0.03 + rng.normal(0, 0.15, 400)
    ours = paired_permutation_p(a, b)
    assert ours == pytest.approx(ttest_rel(a, b).pvalue, abs=0.01)


def test_holm_hand_computed():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([]) == []


def test_bootstrap_ci_contains_the_mean_and_matches_the_normal_interval():
    rng = np.random.default_rng(0)
    values = rng.random(2000)
    low, high = bootstrap_ci(values)
    se = values.std(ddof=1) / np.sqrt(values.size)
    assert low < values.mean() < high
    assert low == pytest.approx(values.mean() - 1.96 * se, abs=0.15 * se + 1e-3)
    assert high == pytest.approx(values.mean() + 1.96 * se, abs=0.15 * se + 1e-3)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    with pytest.raises(ValueError, match="values"):
        bootstrap_ci([])


def test_annotate_marks_and_tables():
    qids = [f"q{i}" for i in range(40)]
    rng = np.random.default_rng(1)
    base = rng.random(40)
    values = {
        "none": {"ndcg@10": dict(zip(qids, base))},
        "better": {"ndcg@10": dict(zip(qids, np.clip(base + 0.3, 0, 1)))},
        "same": {"ndcg@10": dict(zip(qids, base + rng.normal(0, 1e-3, 40)))},
    }
    rows = [
        {"dataset": "d", "method": m, "ndcg@10": float(np.mean(list(v["ndcg@10"].values())))}
        for m, v in values.items()
    ]
    annotate(rows, values, ["ndcg@10"], baseline="none")
    by = {r["method"]: r for r in rows}
    assert by["none"]["ndcg@10_p_value"] is None
    assert by["better"]["ndcg@10_p_value"] < 0.05
    assert mark(by["better"], "ndcg@10", by["none"]["ndcg@10"]) == "▲"
    assert by["same"]["ndcg@10_p_value"] > 0.05 and mark(by["same"], "ndcg@10", 0.0) == ""
    table = markdown_table(rows, ("dataset", "method", "ndcg@10", "ndcg@10_p_value"))
    assert table.count("▲") == 1 and f"[{by['better']['ndcg@10_ci_low']:.4f}, " in table
    tex = latex_table(rows, ("dataset", "method", "ndcg@10"))
    assert "\\blacktriangle" in tex and "ndcg@10" in tex and tex.count("\\\\\n") == 4
    with pytest.raises(ValueError, match="baseline"):
        annotate(rows, values, ["ndcg@10"], baseline="dense")


@pytest.mark.slow  # ranx compiles its metrics with numba: about 2.5 min on a loaded 2-core CPU
@pytest.mark.data
def test_against_ranx_on_scifact_bm25_runs(data_dir):
    """Two real scifact runs (BM25 at k1=1.2, b=0.75 and at Anserini's k1=0.9, b=0.4): our
    metrics and p against ranx'."""
    ranx = pytest.importorskip("ranx")
    from georag.data.beir import load_beir
    from georag.retrieval.bm25 import BM25Index

    data = load_beir("scifact", data_dir=data_dir, download=False)
    ids, texts = list(data.corpus), [d.full_text for d in data.corpus.values()]
    qids = list(data.queries)
    runs = {}
    for name, k1, b in (("default", 1.2, 0.75), ("anserini", 0.9, 0.4)):
        index = BM25Index.build(texts, k1=k1, b=b)
        scores, rows = index.search([data.queries[q] for q in qids], 100)
        runs[name] = {
            q: {ids[j]: float(s) for s, j in zip(sc.tolist(), rw.tolist()) if j >= 0}
            for q, sc, rw in zip(qids, scores, rows)
        }
    ours = {name: per_query(run, data.qrels, ["ndcg@10"])["ndcg@10"] for name, run in runs.items()}
    judged = sorted(data.qrels)
    p = paired_permutation_p(
        [ours["anserini"][q] for q in judged], [ours["default"][q] for q in judged]
    )

    qrels = ranx.Qrels(data.qrels)
    report = ranx.compare(
        qrels,
        [ranx.Run(runs["default"], name="default"), ranx.Run(runs["anserini"], name="anserini")],
        metrics=["ndcg@10"],
        stat_test="fisher",
        n_permutations=20000,
        random_seed=0,
    )
    assert report.results["default"]["ndcg@10"] == pytest.approx(
        np.mean(list(ours["default"].values())), abs=1e-4
    )
    ranx_p = report.comparisons["default", "anserini"]["ndcg@10"]["p_value"]
    print(
        f"scifact BM25 k1=1.2,b=0.75 vs k1=0.9,b=0.4, ndcg@10: georag p = {p:.4f}, "
        f"ranx fisher p = {ranx_p:.4f}"
    )
    assert 0.01 < p < 0.99  # not at the extremes, where any two tests agree trivially
    assert p == pytest.approx(ranx_p, abs=0.02)
