"""Queries are encoded afresh, a micro-batch's queries in one encoder call, and only
documents enter the text cache (``cache_queries=False``, the service's default)."""

from __future__ import annotations

import concurrent.futures

import httpx
import pytest

import georag
from georag.retrieval.text_cache import text_key
from georag.serve.config import ServeConfig
from tests.serve.harness import demo_texts, thread_server


class CountingEncoder:
    """The test run's encoder, recording the texts of each call."""

    def __init__(self, encoder) -> None:
        self.inner, self.calls = encoder, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts, **options):
        self.calls.append(list(texts))
        return self.inner.encode(texts, **options)


def test_a_batch_encodes_its_queries_once_and_caches_only_documents(serve_reranker, tmp_path):
    assert ServeConfig().cache_queries is False
    reference = serve_reranker("maniscope")  # caches queries too
    encoder = CountingEncoder(reference.encoder)
    reranker = georag.Reranker(
        "maniscope", encoder=encoder, cache_dir=tmp_path, cache_queries=False
    )
    queries, docs = demo_texts()
    asked = queries[3:6]  # not the warm-up's queries
    with thread_server(reranker, max_batch=3, max_wait_ms=2000) as url:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            bodies = [{"query": q, "texts": docs[:10]} for q in asked]
            answers = list(pool.map(lambda b: httpx.post(f"{url}/rerank", json=b), bodies))
    assert [a.status_code for a in answers] == [200] * 3
    with_queries = [call for call in encoder.calls if set(call) & set(asked)]
    assert len(with_queries) == 1 and sorted(with_queries[0]) == sorted(asked)
    assert all(text_key(q) not in reranker.cache._rows for q in queries)
    assert all(text_key(d) in reranker.cache._rows for d in docs[:10])
    for query, answer in zip(asked, answers):
        want = {d.index: d.score for d in reference.rank(query, docs[:10]) if d.kept}
        got = {r["index"]: r["score"] for r in answer.json()}
        assert got.keys() == want.keys()
        assert [got[i] for i in want] == pytest.approx(list(want.values()), abs=1e-5)


def test_an_exported_encoder_runs_longer_passes():
    from georag.serve.service import ENCODE_BATCH, ENCODE_BATCH_EXPORTED, encode_batch

    assert encode_batch("torch") == ENCODE_BATCH < ENCODE_BATCH_EXPORTED
    assert {encode_batch(b) for b in ("onnx", "onnx-int8", "openvino", "openvino-int8")} == {
        ENCODE_BATCH_EXPORTED
    }
