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
