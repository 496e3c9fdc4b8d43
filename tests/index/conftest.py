"""A tiny corpus index of the bundled demo corpus, built once per test run."""

from __future__ import annotations

import pytest

from georag.retrievers.retriever import INDEX_METHODS

GRAPHS = ["passage", "phrase", "entity:title"]
#: every corpus method an index answers, but hyte (its own slow test)
METHODS = [m for m in INDEX_METHODS if m != "hyte"]
N = 92  # every third passage of the demo corpus
QUERIES = [
    "why do tides rise and fall",
    "how does the sun make energy",
    "what causes earthquakes",
    "how do vaccines train the immune system",
]


@pytest.fixture(scope="session")
def cache_env(embedding_cache_dir):
    """``$GEORAG_CACHE`` pointed at the run's shared embedding cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GEORAG_CACHE", str(embedding_cache_dir))
        yield embedding_cache_dir


@pytest.fixture(scope="session")
def demo_docs():
    from georag.data.beir import load_beir
    from georag.data.bundled import DEMO_DIR
    from georag.retrievers.index import documents_from_dataset

    docs = documents_from_dataset(load_beir(str(DEMO_DIR)))[::3]
    assert len(docs) == N
    return docs


@pytest.fixture(scope="session")
def encoder(text_encoder):
    return text_encoder  # the test run's one encoder (tests/conftest.py)


@pytest.fixture(scope="session")
def pair(tmp_path_factory, cache_env, demo_docs, encoder):
    """``(updated, full)``: an index of 90 % of the demo corpus plus a passage, that passage
    deleted and the last 10 % added; and an index built from the whole corpus."""
    from georag.retrievers.index import build_index, update_index

    root = tmp_path_factory.mktemp("index-pair")
    cut = int(len(demo_docs) * 0.9)
    extra = {"id": "gone", "title": "Leaving", "text": "A passage about tides that leaves."}
    build_index([*demo_docs[:cut], extra], root / "updated", graphs=GRAPHS, encoder=encoder)
    update_index(root / "updated", delete=["gone"], encoder=encoder)
    update_index(root / "updated", add=demo_docs[cut:], encoder=encoder)
    build_index(demo_docs, root / "full", graphs=GRAPHS, encoder=encoder)
    return root / "updated", root / "full"


@pytest.fixture
def index_copy(pair, tmp_path):
    """A private copy of the full index (for tests that change or damage it)."""
    import shutil

    return shutil.copytree(pair[1], tmp_path / "index")
