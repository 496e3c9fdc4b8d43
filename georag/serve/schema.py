"""The OpenAPI 3.1 document of the service (``GET /openapi.json``), from pydantic models.

The routes that carry the traffic are plain Starlette routes (no model validation per
request: :mod:`georag.serve.shapes` checks the bodies field by field), so FastAPI does not
see their bodies; this module writes the document of every route the app serves, with
the request and response schemas and the limits of the running service (``maxLength``,
``maxItems``, ``maximum``), from which clients can be generated. A body that breaks the
schema is refused with the JSON error below (400, 413 or 422), never a 5xx.

The module does not defer its annotations: pydantic reads those of the models built in
:func:`request_models`, whose bounds are the service's settings.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from georag.serve.config import ServeConfig
from georag.serve.shapes import DEFAULT_TOP_K

__all__ = ["openapi", "request_models"]

NON_BLANK = r"\S"  # a text holds at least one character other than white space


class Error(BaseModel):
    """Every refusal: one line naming the field, and the status code."""

    error: str
    status: int


class TeiResult(BaseModel):
    index: int = Field(description="position of the document in the request's texts")
    score: float
    text: str | None = Field(None, description="with return_text")


class V1Result(BaseModel):
    index: int
    relevance_score: float
    document: dict[str, str] | None = Field(None, description='{"text"} with return_documents')


class V1Meta(BaseModel):
    api_version: dict[str, str]
    fallback: bool = Field(description="too few documents for the method's geometry")
    kept: int
    documents: int


class V1Response(BaseModel):
    id: str
    model: str
    results: list[V1Result]
    meta: V1Meta


class V2Result(BaseModel):
    index: int = Field(description="position of the document in the request's documents")
    relevance_score: float


class V2Response(BaseModel):
    id: str
    results: list[V2Result] = Field(description="the kept documents, best first")
    meta: V1Meta


class RetrievedDocument(BaseModel):
    id: str
    title: str | None
    text: str
    score: float


class RetrieveMeta(BaseModel):
    method: str
    top_k: int
    returned: int


class RetrieveResponse(BaseModel):
    results: list[RetrievedDocument] = Field(description="best first")
    meta: RetrieveMeta


class Added(BaseModel):
    added: int
    size: int = Field(description="documents in the index after the update")


class Deleted(BaseModel):
    deleted: int
    size: int = Field(description="documents in the index after the update")


class Health(BaseModel):
    status: Literal["ready", "warming up", "draining"]
    pid: int
    method: str


def request_models(config: ServeConfig) -> dict[str, type[BaseModel]]:
    """The request bodies by model name, bounded by the settings of ``config`` (also the
    argument schemas of the MCP tools, :mod:`georag.serve.mcp`)."""
    chars = config.max_text_chars
    Text = Annotated[str, Field(min_length=1, max_length=chars, pattern=NON_BLANK)]
    Id = Annotated[str, Field(min_length=1, max_length=chars, pattern=NON_BLANK)]
    many = dict(min_length=1, max_length=config.max_docs)

    class TeiRequest(BaseModel):
        query: Text
        texts: Annotated[
            list[Annotated[str, Field(min_length=1, pattern=NON_BLANK)]],
            Field(**many, description=f"over {chars} characters: 413 unless truncate"),
        ]
        raw_scores: bool | None = Field(False, description="accepted; scores are the method's")
        return_text: bool | None = False
        truncate: bool | None = Field(False, description=f"cut texts at {chars} characters")

    class V1Document(BaseModel):
        text: Text

    class V1Request(BaseModel):
        model: str | None = Field(None, description="accepted and echoed")
        query: Text
        documents: Annotated[list[Text | V1Document], Field(**many)]
        top_n: Annotated[int, Field(ge=1)] | None = None
        return_documents: bool | None = False

    class RelevantSpans(BaseModel):
        mode: Literal["disabled"] = Field(description="georag returns no spans")

    class V2Request(BaseModel):
        model: str = Field(description="accepted whatever it names (the served method answers)")
        query: Text
        documents: Annotated[list[Text], Field(**many)]
        top_n: Annotated[int, Field(ge=1)] | None = None
        max_tokens_per_doc: Annotated[int, Field(ge=1)] | None = Field(
            None, description="cut each document to this many tokens of the query encoder"
        )
        priority: Annotated[int, Field(ge=0)] | None = Field(
            None, description="accepted; one queue serves every request"
        )
        relevant_spans: RelevantSpans | None = None

    class RetrieveRequest(BaseModel):
        query: Text
        top_k: Annotated[int, Field(ge=1, le=config.max_top_k)] | None = DEFAULT_TOP_K

    class Document(BaseModel):
        id: Id
        title: Annotated[str, Field(max_length=chars)] | None = None
        text: Text

    class DocumentsRequest(BaseModel):
        documents: Annotated[
            list[Document], Field(**many, description="ids unique, none in the index yet")
        ]

    class DeleteRequest(BaseModel):
        ids: Annotated[list[Id], Field(**many, description="unique ids held by the index")]

    return {
        m.__name__: m
        for m in (
            TeiRequest,
            V1Request,
            V2Request,
            RetrieveRequest,
            DocumentsRequest,
            DeleteRequest,
        )
    }


RESPONSES = (Error, TeiResult, V1Response, V2Response, RetrieveResponse, Added, Deleted, Health)


def _json(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _operation(summary: str, request: str | None, answer: dict, refusals: dict, secured: bool):
    """One operation: its request body, its 200 answer and its refusals."""
    responses = {"200": {"description": "the answer", "content": answer}}
    for status, when in refusals.items():
        responses[str(status)] = {"description": when, "content": _json(_ref("Error"))}
    operation: dict = {"summary": summary, "responses": responses}
    if request is not None:
        operation["requestBody"] = {"required": True, "content": _json(_ref(request))}
    if secured:
        operation["security"] = [{"bearer": []}]
        refused = {"description": "missing or wrong API key", "content": _json(_ref("Error"))}
        responses["401"] = refused
    return operation


def openapi(config: ServeConfig, title: str, version: str) -> dict:
    """The OpenAPI document of the app that ``config`` serves (rerank or corpus routes)."""
    requests = request_models(config)
    models = [(m, "validation") for m in requests.values()]
    models += [(m, "serialization") for m in RESPONSES]
    _, defs = models_json_schema(models, ref_template="#/components/schemas/{model}")
    secured = config.api_key_file is not None
    body = {
        400: "the body is not JSON",
        413: "a body, list or text over its limit",
        422: "a field missing, of a wrong type or empty",
        429: "the queue is full; retry later",
        503: "not warm yet",
    }
    if config.index is None:
        paths = {
            "/rerank": {
                "post": _operation(
                    "rerank texts (text-embeddings-inference shape)",
                    "TeiRequest",
                    _json({"type": "array", "items": _ref("TeiResult")}),
                    body,
                    secured,
                )
            },
            "/v1/rerank": {
                "post": _operation(
                    "rerank documents (Cohere / Jina shape)",
                    "V1Request",
                    _json(_ref("V1Response")),
                    body,
                    secured,
                )
            },
            "/v2/rerank": {
                "post": _operation(
                    "rerank documents (Cohere's v2 shape)",
                    "V2Request",
                    _json(_ref("V2Response")),
                    body,
                    secured,
                )
            },
        }
    else:
        update = {k: v for k, v in body.items() if k != 429}
        paths = {
            "/retrieve": {
                "post": _operation(
                    "the best top_k documents of the index for a query",
                    "RetrieveRequest",
                    _json(_ref("RetrieveResponse")),
                    body,
                    secured,
                )
            },
            "/documents": {
                "post": _operation(
                    "add documents (answered once applied)",
                    "DocumentsRequest",
                    _json(_ref("Added")),
                    {**update, 409: "an id already in the index, or given twice"},
                    secured,
                ),
                "delete": _operation(
                    "delete documents by id (answered once applied)",
                    "DeleteRequest",
                    _json(_ref("Deleted")),
                    {**update, 409: "an id not in the index, or the index's last passage"},
                    secured,
                ),
            },
        }
    health = _operation("ready once warm (open without the API key)", None, {}, {}, False)
    for status, when in (("200", "ready"), ("503", "warming up, or draining after SIGTERM")):
        health["responses"][status] = {"description": when, "content": _json(_ref("Health"))}
    paths["/health"] = {"get": health}
    paths["/metrics"] = {
        "get": _operation(
            "Prometheus text exposition",
            None,
            {"text/plain": {"schema": {"type": "string"}}},
            {},
            secured,
        )
    }
    components: dict = {"schemas": defs["$defs"]}
    if secured:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": components,
    }
