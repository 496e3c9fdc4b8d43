"""The two rerank API shapes, parsed and answered without any web framework.

- ``POST /rerank``, the shape of Hugging Face text-embeddings-inference:
  ``{"query", "texts", "raw_scores", "return_text", "truncate"}`` ->
  ``[{"index", "score", "text"?}]``;
- ``POST /v1/rerank``, the Cohere / Jina shape: ``{"model", "query", "documents"
  (strings or {"text"}), "top_n", "return_documents"}`` ->
  ``{"id", "model", "results": [{"index", "relevance_score", "document"?}], "meta"}``.

Results are the documents the method kept, by descending score (a filter such as
Ricci-Filtration drops some); ``meta`` (and the ``X-Georag-Fallback`` header of both
shapes) says whether the query had too few documents for the method's geometry, in which
case the ranking is the first-stage order. georag's scores are the method's own (not
logits), so ``raw_scores`` changes nothing.

Malformed input raises :class:`RequestError` with the HTTP status: 422 for a wrong type,
a missing field or an empty text, 413 for a request over a size limit.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["RequestError", "RerankRequest", "parse_tei", "parse_v1", "answer_tei", "answer_v1"]


class RequestError(Exception):
    """A request the service refuses: ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class RerankRequest:
    """One parsed request: a query and its documents, and how to answer."""

    query: str
    texts: list[str]
    top_n: int | None = None
    return_text: bool = False


@dataclass(frozen=True)
class Limits:
    """The size limits a request is checked against."""

    max_docs: int
    max_text_chars: int


def _body(body: object) -> dict:
    if not isinstance(body, dict):
        raise RequestError(422, f"body: expected a JSON object, got {type(body).__name__}")
    return body


def _flag(body: dict, key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise RequestError(422, f"{key}: expected true or false, got {value!r:.40}")
    return value


def _text(value: object, where: str, limits: Limits, truncate: bool) -> str:
    if not isinstance(value, str):
        raise RequestError(422, f"{where}: expected a string, got {type(value).__name__}")
    if not value or value.isspace():  # as ``not value.strip()``, without copying the text
        raise RequestError(422, f"{where}: empty text")
    if len(value) > limits.max_text_chars:
        if not truncate:
            raise RequestError(
                413, f"{where}: {len(value)} characters, over the limit {limits.max_text_chars}"
            )
        value = value[: limits.max_text_chars]
    return value


def _texts(values: object, where: str, limits: Limits, truncate: bool, dicts: bool) -> list[str]:
    if not isinstance(values, list):
        raise RequestError(422, f"{where}: expected a list, got {type(values).__name__}")
    if not values:
        raise RequestError(422, f"{where}: empty list, give at least one document")
    if len(values) > limits.max_docs:
        raise RequestError(
            413, f"{where}: {len(values)} documents, over the limit {limits.max_docs}"
        )
    out = []
    for i, value in enumerate(values):
        if dicts and isinstance(value, dict):
            value = value.get("text")
        out.append(_text(value, f"{where}[{i}]", limits, truncate))
    return out


def parse_tei(body: object, limits: Limits) -> RerankRequest:
    """A text-embeddings-inference ``/rerank`` body (``truncate`` cuts long texts)."""
    body = _body(body)
    truncate = _flag(body, "truncate", False)
    _flag(body, "raw_scores", False)
    return RerankRequest(
        query=_text(body.get("query"), "query", limits, truncate),
        texts=_texts(body.get("texts"), "texts", limits, truncate, dicts=False),
        return_text=_flag(body, "return_text", False),
    )


def parse_v1(body: object, limits: Limits) -> RerankRequest:
    """A Cohere / Jina ``/v1/rerank`` body (``model`` is accepted and echoed)."""
    body = _body(body)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(422, f"model: expected a string, got {type(model).__name__}")
    top_n = body.get("top_n")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise RequestError(422, f"top_n: expected a positive integer, got {top_n!r:.40}")
    return RerankRequest(
        query=_text(body.get("query"), "query", limits, False),
        texts=_texts(body.get("documents"), "documents", limits, False, dicts=True),
        top_n=top_n,
        return_text=_flag(body, "return_documents", False),
    )


def _kept(ranked: list) -> list:
    return [doc for doc in ranked if doc.kept]


def answer_tei(request: RerankRequest, ranked: list) -> list[dict]:
    """``[{"index", "score", "text"?}]`` of the kept documents (``ranked``: RankedDoc list)."""
    return [
        {
            "index": doc.index,
            "score": doc.score,
            **({"text": doc.text} if request.return_text else {}),
        }
        for doc in _kept(ranked)
    ]


def answer_v1(request: RerankRequest, ranked: list, model: str) -> dict:
    """The Cohere / Jina response of the kept documents, best ``top_n`` first."""
    kept = _kept(ranked)
    results = [
        {
            "index": doc.index,
            "relevance_score": doc.score,
            **({"document": {"text": doc.text}} if request.return_text else {}),
        }
        for doc in kept[: request.top_n]
    ]
    return {
        "id": str(uuid.uuid4()),
        "model": model,
        "results": results,
        "meta": {
            "api_version": {"version": "1"},
            "fallback": bool(ranked and ranked[0].fallback),
            "kept": len(kept),
            "documents": len(ranked),
        },
    }
