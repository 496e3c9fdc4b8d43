"""The service without its web framework: a reranker, its micro-batcher, limits, metrics.

:class:`Service` turns the raw body of a rerank request into an answer or a
:class:`~georag.serve.shapes.RequestError` (400 malformed JSON, 413 over a limit, 422
wrong types or empty texts, 429 queue full, 503 not warm yet). The reranker is built and
warmed in the start-up, before the worker takes connections
(``GET /health`` is ready only then): real texts of the demo corpus run every kernel of
the method once, alone and batched.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os

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
    answer_v2,
    parse_tei,
    parse_v1,
    parse_v2,
)

__all__ = [
    "Service",
    "build_reranker",
    "encode_batch",
    "warm_up",
    "demo_texts",
    "parse_json",
    "truncate_tokens",
]

PARSERS = {"tei": parse_tei, "v1": parse_v1, "v2": parse_v2}
# a token covers at least one byte of UTF-8 and a character at most four: a text of at most
# max_tokens / 4 characters has at most max_tokens tokens under any tokenizer
BYTES_PER_CHAR = 4

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


def truncate_tokens(tokenizer, texts: list[str], max_tokens: int) -> list[str]:
    """Each text cut after its first ``max_tokens`` tokens of ``tokenizer`` (a fast Hugging
    Face tokenizer, special tokens not counted), at the end of the last token kept; texts
    within the limit are returned as they are."""
    long = [i for i, text in enumerate(texts) if len(text) * BYTES_PER_CHAR > max_tokens]
    if not long:
        return texts
    encoded = tokenizer(
        [texts[i] for i in long],
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=True,
        max_length=max_tokens + 1,
    )
    out = list(texts)
    for i, offsets in zip(long, encoded["offset_mapping"]):
        if len(offsets) > max_tokens:
            out[i] = texts[i][: offsets[max_tokens - 1][1]]
    return out


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
        """The answer to a rerank body in ``shape`` ("tei", "v1" or "v2"), and its fallback
        flag."""
        request = PARSERS[shape](self.body(raw), self.limits)
        if request.max_tokens is not None:
            tokenizer = self.reranker.encoder.model.tokenizer
            texts = truncate_tokens(tokenizer, request.texts, request.max_tokens)
            request = dataclasses.replace(request, texts=texts)
        ranked = await self.batcher.submit(request)
        fallback = bool(ranked and ranked[0].fallback)
        if shape == "tei":
            return answer_tei(request, ranked), fallback
        if shape == "v2":
            return answer_v2(request, ranked), fallback
        return answer_v1(request, ranked, self.config.served_name), fallback
