"""The int8 recipe comparison (georag.experiments.int8_recipe)."""

from __future__ import annotations

import numpy as np
import pytest

from georag.data.bundled import DEMO_DIR
from georag.experiments import int8_recipe


def test_recall_at_5_counts_gold_in_the_top_5():
    queries = np.eye(3, dtype=np.float32)
    corpus = np.eye(3, dtype=np.float32)
    assert int8_recipe._recall_at_5(queries, corpus, [{0}, {1}, {2}]) == 1.0
    corpus = np.concatenate([np.zeros((6, 3), np.float32), np.eye(3, dtype=np.float32)])
    corpus[:6, 0] = 2.0  # six passages above passage 6 for the first query
    assert int8_recipe._recall_at_5(queries[:1], corpus, [{6}]) == 0.0


@pytest.mark.slow
def test_recipes_on_a_small_corpus(tmp_path, monkeypatch):
    pytest.importorskip("nncf")
    monkeypatch.setenv("GEORAG_CACHE", str(tmp_path))
    rows = int8_recipe.compare(None, recipes=("ffn-fp32", "weights"), sets=(str(DEMO_DIR),))
    assert [r["recipe"] for r in rows] == ["torch", "ffn-fp32", "weights"]
    assert rows[0]["delta"] == 0.0 and rows[0]["cos_min"] > 0.9999
    assert all(r["cos_min"] > 0.95 and r["docs_per_s"] > 0 for r in rows)


@pytest.mark.slow
def test_sensitivity_scan_on_a_small_corpus(tmp_path, monkeypatch):
    pytest.importorskip("nncf")
    monkeypatch.setenv("GEORAG_CACHE", str(tmp_path))
    variants = {k: int8_recipe.SCAN[k] for k in ("nncf-defaults", "layer0-ffn-out-fp32")}
    rows = int8_recipe.sensitivity(None, variants, sets=(str(DEMO_DIR),), per_set=8)
    assert [r["variant"] for r in rows] == list(variants)
    assert all(0.95 < r["cos_min"] <= r["cos_p1"] <= r["cos_mean"] <= 1.0 + 1e-6 for r in rows)
