"""The API shapes, parsed and answered without any web framework.

Reranking, the shapes that RAG pipelines already call:

- ``POST /rerank``, the shape of Hugging Face text-embeddings-inference:
  ``{"query", "texts", "raw_scores", "return_text", "truncate"}`` ->
  ``[{"index", "score", "text"?}]``;
- ``POST /v1/rerank``, the Cohere / Jina shape: ``{"model", "query", "documents"
  (strings or {"text"}), "top_n", "return_documents"}`` ->
  ``{"id", "model", "results": [{"index", "relevance_score", "document"?}], "meta"}``;
- ``POST /v2/rerank``, Cohere's v2 shape: ``{"model", "query", "documents" (strings),
  "top_n"?, "max_tokens_per_doc"?, "priority"?, "relevant_spans"?}`` ->
  ``{"id", "results": [{"index", "relevance_score"}], "meta"}``.

Results are the documents the method kept, by descending score (a filter such as
Ricci-Filtration drops some); ``meta`` (and the ``X-Georag-Fallback`` header of both
shapes) says whether the query had too few documents for the method's geometry, in which
case the ranking is the first-stage order. georag's scores are the method's own (not
logits), so ``raw_scores`` changes nothing.

Corpus retrieval (``georag serve --index``):

- ``POST /retrieve``: ``{"query", "top_k"?}`` -> ``{"results": [{"id", "title", "text",
  "score"}], "meta"}``, the best ``top_k`` (default 10) documents of the index;
- ``POST /documents``: ``{"documents": [{"id", "title"?, "text"}]}`` -> ``{"added", "size"}``;
- ``DELETE /documents``: ``{"ids": [...]}`` -> ``{"deleted", "size"}``.

Malformed input raises :class:`RequestError` with the HTTP status: 422 for a wrong type,
a missing field or an empty text, 413 for a request over a size limit.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = [
    "RequestError",
    "RerankRequest",
    "RetrieveRequest",
    "DEFAULT_TOP_K",
    "parse_tei",
    "parse_v1",
    "parse_v2",
    "answer_tei",
    "answer_v1",
    "answer_v2",
    "parse_retrieve",
    "parse_documents",
    "parse_ids",
    "answer_retrieve",
]

DEFAULT_TOP_K = 10  # documents a /retrieve without top_k gets (georag.Retriever.retrieve's k)


class RequestError(Exception):
    """A request the service refuses: ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class RerankRequest:
    """One parsed request: a query and its documents, and how to answer (``max_tokens``:
    cut each document to that many tokens first)."""

    query: str
    texts: list[str]
    top_n: int | None = None
    return_text: bool = False
    max_tokens: int | None = None


@dataclass(frozen=True)
class RetrieveRequest:
    """One parsed ``/retrieve``: a query and how many documents to answer."""

    query: str
    top_k: int


@dataclass(frozen=True)
class Limits:
    """The size limits a request is checked against."""

    max_docs: int
    max_text_chars: int
    max_top_k: int


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


def _present(body: dict, key: str) -> object:
    if key not in body:
        raise RequestError(422, f"{key}: missing (required)")
    return body[key]


def _positive(value: object, where: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise RequestError(422, f"{where}: expected a positive integer, got {value!r:.40}")
    return value


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
    return RerankRequest(
        query=_text(body.get("query"), "query", limits, False),
        texts=_texts(body.get("documents"), "documents", limits, False, dicts=True),
        top_n=_positive(body.get("top_n"), "top_n"),
        return_text=_flag(body, "return_documents", False),
    )


def parse_v2(body: object, limits: Limits) -> RerankRequest:
    """A Cohere v2 ``/v2/rerank`` body: ``model`` (required, accepted whatever it names),
    ``query``, ``documents`` (strings), ``top_n``, ``max_tokens_per_doc`` (documents are cut
    to that many tokens of the query encoder), ``priority`` (accepted; one queue serves
    all) and ``relevant_spans`` (only ``{"mode": "disabled"}``: georag returns no spans)."""
    body = _body(body)
    model = _present(body, "model")
    if not isinstance(model, str):
        raise RequestError(422, f"model: expected a string, got {type(model).__name__}")
    priority = body.get("priority")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or priority < 0
    ):
        raise RequestError(422, f"priority: expected an integer >= 0, got {priority!r:.40}")
    spans = body.get("relevant_spans")
    if spans is not None and (not isinstance(spans, dict) or spans.get("mode") != "disabled"):
        raise RequestError(
            422, "relevant_spans: georag returns no spans; leave it out or send mode 'disabled'"
        )
    return RerankRequest(
        query=_text(_present(body, "query"), "query", limits, False),
        texts=_texts(_present(body, "documents"), "documents", limits, False, dicts=False),
        top_n=_positive(body.get("top_n"), "top_n"),
        max_tokens=_positive(body.get("max_tokens_per_doc"), "max_tokens_per_doc"),
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


def answer_v2(request: RerankRequest, ranked: list) -> dict:
    """Cohere's v2 response of the kept documents, best ``top_n`` first."""
    kept = _kept(ranked)
    results = [{"index": d.index, "relevance_score": d.score} for d in kept[: request.top_n]]
    return {
        "id": str(uuid.uuid4()),
        "results": results,
        "meta": {
            "api_version": {"version": "2"},
            "fallback": bool(ranked and ranked[0].fallback),
            "kept": len(kept),
            "documents": len(ranked),
        },
    }


def _count(value: object, where: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(422, f"{where}: expected a positive integer, got {value!r:.40}")
    if value > most:
        raise RequestError(413, f"{where}: {value}, over the limit {most}")
    return value


def _items(body: dict, key: str, limits: Limits) -> list:
    values = body.get(key)
    if not isinstance(values, list):
        raise RequestError(422, f"{key}: expected a list, got {type(values).__name__}")
    if not values:
        raise RequestError(422, f"{key}: empty list, give at least one")
    if len(values) > limits.max_docs:
        raise RequestError(413, f"{key}: {len(values)} items, over the limit {limits.max_docs}")
    return values


def _unique(ids: list[str], where: str) -> None:
    seen: set[str] = set()
    for i, doc_id in enumerate(ids):
        if doc_id in seen:
            raise RequestError(422, f"{where}[{i}]: id {doc_id!r:.60} given twice")
        seen.add(doc_id)


def parse_retrieve(body: object, limits: Limits) -> RetrieveRequest:
    """A ``/retrieve`` body: ``query`` (a non-empty string), ``top_k`` (1 to the limit)."""
    body = _body(body)
    top_k = body.get("top_k")
    return RetrieveRequest(
        query=_text(body.get("query"), "query", limits, False),
        top_k=DEFAULT_TOP_K if top_k is None else _count(top_k, "top_k", limits.max_top_k),
    )


def parse_documents(body: object, limits: Limits) -> list[dict]:
    """A ``POST /documents`` body: ``[{"id", "title"?, "text"}]`` as georag.Retriever.add
    takes them (ids unique within the request)."""
    documents = []
    for i, value in enumerate(_items(_body(body), "documents", limits)):
        where = f"documents[{i}]"
        if not isinstance(value, dict):
            raise RequestError(422, f"{where}: expected an object, got {type(value).__name__}")
        document = {"id": _text(value.get("id"), f"{where}.id", limits, False)}
        title = value.get("title")
        if title is not None:
            if not isinstance(title, str):
                raise RequestError(
                    422, f"{where}.title: expected a string, got {type(title).__name__}"
                )
            if len(title) > limits.max_text_chars:
                raise RequestError(
                    413,
                    f"{where}.title: {len(title)} characters, over the limit "
                    f"{limits.max_text_chars}",
                )
            document["title"] = title
        document["text"] = _text(value.get("text"), f"{where}.text", limits, False)
        documents.append(document)
    _unique([d["id"] for d in documents], "documents")
    return documents


def parse_ids(body: object, limits: Limits) -> list[str]:
    """A ``DELETE /documents`` body: ``{"ids": [...]}``, non-empty strings, each once."""
    values = _items(_body(body), "ids", limits)
    ids = [_text(value, f"ids[{i}]", limits, False) for i, value in enumerate(values)]
    _unique(ids, "ids")
    return ids


def answer_retrieve(request: RetrieveRequest, docs: list, meta: dict) -> dict:
    """``{"results", "meta"}`` of ``docs`` (georag.RetrievedDoc, best first)."""
    results = [
        {"id": d.id, "title": d.title, "text": d.text, "score": float(d.score)} for d in docs
    ]
    return {"results": results, "meta": {**meta, "top_k": request.top_k, "returned": len(docs)}}
