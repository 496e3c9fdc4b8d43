"""One encoder and one disk text cache for every service test: each text is encoded once."""

from __future__ import annotations

import pytest

import georag


@pytest.fixture(scope="session")
def serve_reranker(tmp_path_factory):
    """``make(method)``: a georag.Reranker sharing the test run's encoder and text cache."""
    encoder = georag.TextEncoder(show_progress=False)
    cache = tmp_path_factory.mktemp("serve-text-cache")

    def make(method: str) -> georag.Reranker:
        return georag.Reranker(method, encoder=encoder, cache_dir=cache)

    return make


@pytest.fixture()
def corpus_retriever():
    """``make()``: a retriever over the bundled demo corpus (each call a fresh one)."""
    from tests.serve.fake_retriever import FakeRetriever
    from tests.serve.harness import demo_texts

    def make():
        _, docs = demo_texts()
        return FakeRetriever([{"id": f"d{i}", "text": t} for i, t in enumerate(docs)])

    return make
