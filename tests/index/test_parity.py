"""georag.Retriever ranks as ``georag eval`` does: the same method on the same corpus, every
query of the demo data set, 0 mismatches."""

from __future__ import annotations

import pytest

from tests.index.conftest import GRAPHS, METHODS


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory, cache_env, encoder):
    from georag.data.bundled import DEMO_DIR
    from georag.data.datasets import load_dataset
    from georag.retrievers.index import build_index, documents_from_dataset

    root = tmp_path_factory.mktemp("demo-index") / "index"
    docs = documents_from_dataset(load_dataset(str(DEMO_DIR)))
    build_index(docs, root, graphs=GRAPHS, encoder=encoder)
    return root


@pytest.mark.parametrize(
    "methods",
    [
        ["dense", "hybrid", "iso", "hipporag2"],
        pytest.param(
            [m for m in METHODS if m not in ("dense", "hybrid", "iso", "hipporag2")],
            marks=pytest.mark.slow,
        ),
    ],
)
def test_retrieve_equals_eval(demo_index, methods):
    from georag.data.bundled import DEMO_DIR
    from georag.experiments.index_bench import eval_parity

    found = eval_parity(str(DEMO_DIR), demo_index, methods, k=10)
    for method, row in found.items():
        assert row["queries"] == 30 and row["mismatches"] == 0, (method, row)
        assert row["max_score_gap"] <= 1e-5, (method, row)


@pytest.mark.slow
def test_hyte_update_equals_rebuild(tmp_path, cache_env, demo_docs):
    from georag.experiments.index_bench import add_delete_parity
    from tests.index.conftest import QUERIES

    found = add_delete_parity(demo_docs, ["hyte"], ["hyte"], QUERIES)
    assert found["hyte"]["mismatches"] == 0 and found["hyte"]["max_score_gap"] <= 1e-5
