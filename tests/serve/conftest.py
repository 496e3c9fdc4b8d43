"""One encoder and one disk text cache for every service test: each text is encoded once."""

from __future__ import annotations

import pytest

import georag


@pytest.fixture(scope="session")
def serve_reranker(tmp_path_factory, text_encoder):
    """``make(method)``: a georag.Reranker sharing the test run's encoder and text cache."""
    encoder = text_encoder
    cache = tmp_path_factory.mktemp("serve-text-cache")

    def make(method: str) -> georag.Reranker:
        return georag.Reranker(method, encoder=encoder, cache_dir=cache)

    return make


TINY = 40  # documents of the bundled demo corpus in the tiny test index


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory):
    """A real index (``georag.retrievers.index.build_index``, MiniLM, flat) of the first
    40 demo documents, built once; copy it before updating it."""
    from georag.retrievers.index import build_index
    from tests.serve.harness import demo_documents

    folder = tmp_path_factory.mktemp("tiny-index") / "index"
    build_index(demo_documents()[:TINY], folder)
    return folder


@pytest.fixture(scope="module")
def corpus_retriever(tiny_index, tmp_path_factory):
    """``make(method="dense")``: a georag.Retriever on a fresh copy of the tiny index."""
    import shutil

    def make(method: str = "dense") -> georag.Retriever:
        folder = tmp_path_factory.mktemp("index-copy") / "index"
        shutil.copytree(tiny_index, folder)
        return georag.Retriever(folder, method=method)

    return make
