"""The service without its web framework: a reranker, its micro-batcher, limits, metrics.

:class:`Service` turns the raw body of a rerank request into an answer or a
:class:`~georag.serve.shapes.RequestError` (400 malformed JSON, 413 over a limit, 422
wrong types or empty texts, 429 queue full, 503 not warm yet). The reranker is built and
warmed in the start-up, before the worker takes connections
(``GET /health`` is ready only then): real texts of the demo corpus run every kernel of
the method once, alone and batched.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable

import orjson

from georag.api import Reranker
from georag.rerank.small_pool import small_pool
from georag.serve.auth import authorized, read_api_key
from georag.serve.batcher import MicroBatcher
from georag.serve.config import ServeConfig
from georag.serve.metrics import Metrics
from georag.serve.shapes import (
    Limits,
    RequestError,
    answer_tei,
    answer_v1,
    parse_tei,
    parse_v1,
)

__all__ = ["Service", "build_reranker", "encode_batch", "warm_up", "demo_texts", "parse_json"]

# Texts per encoder forward pass. The encoder sorts a call's texts by length; torch pads
# each pass to its longest: 64 SciFact queries (8 to 49 tokens) cost 13.3 ms a query in one
# pass of 64, 7.7 in passes of 16, 10.9 one by one (CPU, one thread). An exported model
# runs a pass in groups of one padded length, so a longer pass pads no more and makes
# fuller groups: micro-batches of 30 queries cost 2.5 ms a query in passes of 64 against
# 2.7-3.1 in passes of 16 (openvino-int8, one thread).
ENCODE_BATCH = 16
ENCODE_BATCH_EXPORTED = 64


def encode_batch(backend: str) -> int:
    """Texts per encoder forward pass of a service on ``backend``."""
    return ENCODE_BATCH if backend == "torch" else ENCODE_BATCH_EXPORTED


def build_reranker(config: ServeConfig) -> Reranker:
    """The text reranker of ``config`` (raises at once when a model is missing: the
    method's stages are built before the encoder is loaded)."""
    reranker = Reranker(
        config.method,
        options=config.options,
        cache_dir=config.cache_dir,
        cache_size=config.cache_size,
        cache_queries=config.cache_queries,
        encoder_backend=config.encoder_backend,
    )
    reranker.encoder.batch_size = encode_batch(reranker.encoder.backend)
    return reranker


def demo_texts(name: str) -> list[str]:
    """The texts of a bundled demo file (``queries.jsonl``, ``corpus.jsonl``)."""
    from georag.data.bundled import DEMO_DIR

    lines = (DEMO_DIR / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines]


def parse_json(raw: bytes) -> object:
    """The JSON of a request body (400 when it is not JSON)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise RequestError(400, f"body: malformed JSON ({error})") from None


def warm_up(reranker: Reranker) -> None:
    """Run the method once alone and once batched on twelve bundled demo texts."""
    queries, docs = demo_texts("queries.jsonl"), demo_texts("corpus.jsonl")[:12]
    reranker.rank(queries[0], docs[:3])
    reranker.rank_batch(queries[:2], [docs, docs[:5]])


class Service:
    """One worker's rerank service.

    Parameters
    ----------
    config : ServeConfig
    reranker : Reranker, optional
        Already built (the command builds it first, to fail fast); else built at start.
    """

    def __init__(self, config: ServeConfig, reranker: Reranker | None = None) -> None:
        self.config = config
        self.reranker = reranker
        self.metrics = Metrics()
        self.limits = Limits(config.max_docs, config.max_text_chars, config.max_top_k)
        self.key = read_api_key(config.api_key_file) if config.api_key_file else None
        self.ready = False
        self.batcher: MicroBatcher | None = None

    async def start(self) -> None:
        """Start the batcher, build and warm the reranker (on the server's event loop, in
        the lifespan start-up: uvicorn accepts no connection for this worker before)."""
        self.batcher = MicroBatcher(
            self._run,
            max_batch=self.config.max_batch,
            max_wait_ms=self.config.max_wait_ms,
            max_queue=self.config.max_queue,
            metrics=self.metrics,
            max_read_ms=self.config.max_read_ms,
        )
        self.batcher.start()
        self._prepare()
        # what start-up built (the model, the libraries, the cached embeddings) lives as
        # long as the worker: out of the collector's passes, which a request's thousands of
        # short-lived objects trigger (they doubled the cost of building the rankings)
        gc.collect()
        gc.freeze()
        self.ready = True

    def _prepare(self) -> None:
        """Build the reranker unless given, and warm it."""
        if self.reranker is None:
            self.reranker = build_reranker(self.config)
        warm_up(self.reranker)

    async def stop(self) -> None:
        """Answer what was accepted, then stop the batcher."""
        if self.batcher is not None:
            await self.batcher.close()

    def _run(self, requests: list) -> list:
        return self.reranker.rank_batch([r.query for r in requests], [r.texts for r in requests])

    def health(self) -> tuple[int, dict]:
        """``(status, body)`` of ``GET /health``: 200 once warm, 503 before."""
        body = {"status": "ready" if self.ready else "warming up", "pid": os.getpid()}
        body["method"] = self.config.method
        if self.ready:
            body["small_pool"] = small_pool(self.reranker.stage).rule
            body["max_batch"] = self.config.max_batch
        return (200 if self.ready else 503), body

    def check_key(self, header: str | None) -> None:
        """Raise 401 unless the service has no key or ``header`` carries it."""
        if self.key is not None and not authorized(header, self.key):
            raise RequestError(401, "missing or wrong API key (Authorization: Bearer KEY)")

    def body(self, raw: bytes) -> object:
        """The JSON of a request body, once the service is ready (503 before)."""
        if not self.ready:
            raise RequestError(503, "not ready (warming up)")
        return parse_json(raw)

    async def rerank(self, shape: str, raw: bytes) -> tuple[object, bool]:
        """The answer to a rerank body in ``shape`` ("tei" or "v1"), and its fallback flag."""
        parse: Callable = parse_tei if shape == "tei" else parse_v1
        request = parse(self.body(raw), self.limits)
        ranked = await self.batcher.submit(request)
        fallback = bool(ranked and ranked[0].fallback)
        if shape == "tei":
            return answer_tei(request, ranked), fallback
        return answer_v1(request, ranked, self.config.served_name), fallback
