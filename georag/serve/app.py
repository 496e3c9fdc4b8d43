"""The FastAPI application and its uvicorn runner (both imported only here, on use).

FastAPI resolves the handlers' annotations at run time, so this module does not defer
them (``from __future__ import annotations``) and imports FastAPI at its top; only the
``serve`` command imports it.

Routes: ``POST /rerank`` (text-embeddings-inference shape), ``POST /v1/rerank`` (Cohere /
Jina shape) and ``POST /v2/rerank`` (Cohere's v2 shape), or with an index ``POST
/retrieve``, ``POST /documents`` and ``DELETE /documents``; and ``GET /health``, ``GET
/metrics`` (Prometheus text), ``GET /openapi.json`` (every route,
:mod:`georag.serve.schema`). Every error is a JSON body ``{"error", "status"}`` with its
status code; nothing a request sends takes the worker down. With ``workers > 1``
uvicorn's supervisor runs the processes (and restarts one that dies); each builds its
reranker from the settings in ``$GEORAG_SERVE_CONFIG``.
"""

import contextlib
import logging
import os
import time

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.requests import ClientDisconnect

import georag
from georag.serve.config import ServeConfig
from georag.serve.corpus import CorpusService
from georag.serve.drain import DRAINING, DrainingServer
from georag.serve.schema import openapi
from georag.serve.service import Service
from georag.serve.shapes import RequestError

__all__ = ["create_app", "app_from_env", "run"]

CONFIG_ENV = "GEORAG_SERVE_CONFIG"
RERANK_ROUTES = {"/rerank": "tei", "/v1/rerank": "v1", "/v2/rerank": "v2"}
CORPUS_ROUTES = ("/retrieve", "/documents")
ROUTES = (*RERANK_ROUTES, *CORPUS_ROUTES, "/health", "/metrics", "/openapi.json")

log = logging.getLogger(__name__)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 past ``limit`` bytes (announced or streamed)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise RequestError(413, f"body: {length} bytes, over the limit {limit}")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"body: over the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # nobody is left to answer; counted, not logged as a crash
        raise RequestError(400, "body: the client went away before its end") from None
    return b"".join(chunks)


class _Count:
    """ASGI middleware: requests by route, responses by status, latency of answered reranks
    (plain ASGI: Starlette's ``BaseHTTPMiddleware`` costs a task and streams per request)."""

    def __init__(self, app, metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, path = time.perf_counter(), scope["path"]
        self.metrics.requests[path if path in ROUTES else "other"] += 1
        latency = self.metrics.by_route.get(path)

        async def counted(message):
            if message["type"] == "http.response.start":
                status = message["status"]
                self.metrics.responses[status] += 1
                if latency is not None and status == 200:
                    latency.observe(time.perf_counter() - start)
            await send(message)

        await self.app(scope, receive, counted)


def create_app(config: ServeConfig, model=None) -> FastAPI:
    """The FastAPI app of one worker (``model``: an already built georag.Reranker, or with
    ``config.index`` an already loaded georag.Retriever)."""
    service = CorpusService(config, model) if config.index else Service(config, model)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await service.start()
        yield
        await service.stop()

    title = "georag retrieve" if config.index else "georag rerank"
    app = FastAPI(title=title, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    document = openapi(config, title, georag.__version__)
    app.openapi = lambda: document

    def error(status: int, message: str) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"error": message, "status": status}, status, headers=headers)

    @app.exception_handler(RequestError)
    async def refused(request, exc: RequestError):
        return error(exc.status, exc.message)

    app.add_middleware(_Count, metrics=service.metrics)

    def route(work, batched: bool = False):
        """A plain Starlette route (no dependency solving per request) of ``work(request,
        raw body) -> (answer, headers)``; its schema is in :mod:`georag.serve.schema`. The
        body of a ``batched`` route is read under the batcher's ``reading`` mark."""

        async def handle(request: Request):
            service.check_key(request.headers.get("authorization"))
            marked = contextlib.nullcontext()
            if batched and service.batcher is not None:
                marked = service.batcher.reading()
            with marked:
                raw = await _read_body(request, config.max_body_bytes)
            try:
                answer, headers = await work(request, raw)
            except RequestError:
                raise
            except Exception as exc:  # noqa: BLE001 - a JSON error, never a dead worker
                log.exception("request failed")
                status = 422 if isinstance(exc, ValueError) else 500
                return error(status, f"{type(exc).__name__}: {exc}".splitlines()[0])
            return Response(orjson.dumps(answer), media_type="application/json", headers=headers)

        return handle

    async def rerank(request: Request, raw: bytes):
        answer, fallback = await service.rerank(RERANK_ROUTES[request.url.path], raw)
        return answer, {"X-Georag-Fallback": str(fallback).lower()}

    async def retrieve(request: Request, raw: bytes):
        return await service.retrieve(raw), None

    async def documents(request: Request, raw: bytes):
        update = service.add if request.method == "POST" else service.delete
        return await update(raw), None

    if config.index:
        app.router.add_route(
            "/retrieve", route(retrieve, batched=True), ["POST"], include_in_schema=False
        )
        app.router.add_route(
            "/documents", route(documents), ["POST", "DELETE"], include_in_schema=False
        )
    else:
        for path in RERANK_ROUTES:
            app.router.add_route(
                path, route(rerank, batched=True), ["POST"], include_in_schema=False
            )

    @app.get("/health", include_in_schema=False)
    async def health(request: Request):
        status, body = service.health()
        if request.scope.get("state", {}).get(DRAINING):  # set by the server at SIGTERM
            status, body = 503, {**body, "status": "draining"}
        return JSONResponse(body, status)

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request):
        service.check_key(request.headers.get("authorization"))
        waiting = service.batcher.waiting if service.batcher else 0
        size = service.retriever.size if config.index and service.ready else None
        return PlainTextResponse(service.metrics.render(waiting, size))

    return app


def app_from_env() -> FastAPI:
    """The app of a worker process started by uvicorn's supervisor."""
    from georag.perf.threads import apply_thread_policy

    config = ServeConfig.from_json(os.environ[CONFIG_ENV])
    apply_thread_policy(config.threads)
    return create_app(config)


def run(config: ServeConfig, model=None) -> None:
    """Serve until SIGTERM / SIGINT, then answer what reached the server and exit: one
    worker drains its listener first (:mod:`georag.serve.drain`); ``workers > 1`` run
    under uvicorn's supervisor and shut down as uvicorn does."""
    import uvicorn

    options = dict(host=config.host, port=config.port, log_level="warning", access_log=False)
    served = f"{config.method} retrieval from {config.index}" if config.index else config.method
    print(
        f"georag serve: {served} on http://{config.host}:{config.port} "
        f"(workers {config.workers}, max batch {config.max_batch}, "
        f"max wait {config.max_wait_ms:g} ms, {config.max_read_ms:g} ms while reading)",
        flush=True,
    )
    if config.workers == 1:
        DrainingServer(uvicorn.Config(create_app(config, model), **options)).run()
        return
    os.environ[CONFIG_ENV] = config.to_json()
    uvicorn.run("georag.serve.app:app_from_env", factory=True, workers=config.workers, **options)
