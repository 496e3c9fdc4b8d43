"""georag as a Model Context Protocol server (extra ``mcp``; ``georag mcp``).

Tools, on the official ``mcp`` SDK's low-level server:

- with an index (``config.index``): ``retrieve(query, top_k)``, and with ``allow_writes``
  ``add_documents(documents)`` and ``delete_documents(ids)``, which write the index's next
  generation as ``POST`` / ``DELETE /documents`` do;
- with a method alone: ``rerank(query, documents, top_n)``.

Each tool's input schema is the request model of the HTTP route it mirrors
(:func:`georag.serve.schema.request_models`), bounded by the same
:class:`~georag.serve.config.ServeConfig` limits (``maxLength``, ``maxItems``, ``maximum``),
and its arguments are checked by the same parsers (:mod:`georag.serve.shapes`): a bad
argument is a tool error (``isError``) holding the service's one-line refusal, and the server
goes on. A tool's answer is the route's JSON body, as structured content and as text.

The work runs in a thread beside the event loop, writes one at a time; before each
``retrieve`` the server reloads the index when another process made another generation live.
Transports: stdio, or streamable HTTP on loopback (``POST /mcp``).
"""

from __future__ import annotations

import dataclasses
import logging

import anyio
import mcp_types as types
import orjson
from mcp.server import Server
from pydantic import BaseModel, create_model

import georag
from georag.serve.config import ServeConfig
from georag.serve.corpus import apply_update, follow, one_line
from georag.serve.schema import request_models
from georag.serve.service import warm_up
from georag.serve.shapes import (
    Limits,
    RequestError,
    answer_retrieve,
    answer_v1,
    parse_documents,
    parse_ids,
    parse_retrieve,
    parse_v1,
)

__all__ = ["GeoragTools", "build_server", "run"]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
DESCRIPTIONS = {
    "retrieve": "The index's best top_k documents for a query, best first.",
    "add_documents": "Add documents ({id, title?, text}) to the index; ids must be new.",
    "delete_documents": "Delete documents from the index by id.",
    "rerank": "Rerank the given documents for a query; the kept ones, best top_n first.",
}
WRITES = ("add_documents", "delete_documents")


def tool_models(config: ServeConfig) -> dict[str, type[BaseModel]]:
    """The argument model of each tool the configuration offers, with the HTTP limits."""
    models = request_models(config)
    if config.index is None:
        v2 = models["V2Request"]
        fields = {
            n: (v2.model_fields[n].annotation, v2.model_fields[n])
            for n in ("query", "documents", "top_n")
        }
        return {"rerank": create_model("RerankArguments", **fields)}
    return {
        "retrieve": models["RetrieveRequest"],
        "add_documents": models["DocumentsRequest"],
        "delete_documents": models["DeleteRequest"],
    }


class GeoragTools:
    """The tools of one ``georag mcp`` server.

    Parameters
    ----------
    config : ServeConfig
        The method, the index (or none) and the limits.
    model : georag.Retriever or georag.Reranker
        Loaded and ready: a retriever of ``config.index``, else a reranker of the method.
    allow_writes : bool
        Offer ``add_documents`` and ``delete_documents`` (an index only).
    """

    def __init__(self, config: ServeConfig, model, allow_writes: bool = False) -> None:
        if allow_writes and config.index is None:
            raise ValueError("--allow-writes: writes go to an index; give --index")
        self.config, self.model, self.allow_writes = config, model, allow_writes
        self.limits = Limits(config.max_docs, config.max_text_chars, config.max_top_k)
        self.models = tool_models(config)
        self._writes = anyio.Lock()

    def offered(self) -> list[types.Tool]:
        """The tools ``tools/list`` answers (writes only with ``allow_writes``)."""
        read_only = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
        tools = []
        for name, model in self.models.items():
            if name in WRITES and not self.allow_writes:
                continue
            hints = types.ToolAnnotations(
                read_only_hint=False, destructive_hint=name == "delete_documents"
            )
            tools.append(
                types.Tool(
                    name=name,
                    description=DESCRIPTIONS[name],
                    input_schema=model.model_json_schema(),
                    annotations=hints if name in WRITES else read_only,
                )
            )
        return tools

    async def call(self, name: str, arguments: dict | None) -> types.CallToolResult:
        """Run one tool; a refusal or a failure is a tool error of one line."""
        try:
            answer = await self._answer(name, dict(arguments or {}))
        except RequestError as error:
            return _error(error.message)
        except Exception as error:  # noqa: BLE001 - a tool error, never a dead server
            log.exception("tool %s failed", name)
            return _error(f"{name}: {type(error).__name__}: {one_line(error)}")
        text = orjson.dumps(answer).decode()
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=answer
        )

    def _check(self, name: str, arguments: dict) -> None:
        if name not in self.models:
            raise RequestError(404, f"tool: unknown {name!r} (offered: {', '.join(self.models)})")
        if name in WRITES and not self.allow_writes:
            raise RequestError(403, f"{name}: writes are off; start georag mcp with --allow-writes")
        known = self.models[name].model_fields
        for key in arguments:
            if key not in known:
                raise RequestError(422, f"{key}: unknown argument of {name} ({', '.join(known)})")

    async def _answer(self, name: str, arguments: dict) -> dict:
        self._check(name, arguments)
        if name == "rerank":
            request = dataclasses.replace(parse_v1(arguments, self.limits), return_text=True)
            ranked = await anyio.to_thread.run_sync(self.model.rank, request.query, request.texts)
            return answer_v1(request, ranked, self.config.served_name)
        if name == "retrieve":
            request = parse_retrieve(arguments, self.limits)
            await self._follow()
            found = await anyio.to_thread.run_sync(
                self.model.retrieve, request.query, request.top_k
            )
            return answer_retrieve(request, found, {"method": self.config.method})
        if name == "add_documents":
            documents = parse_documents(arguments, self.limits)
            return {
                "added": len(documents),
                "size": await self._write(self.model.add, documents, "documents"),
            }
        ids = parse_ids(arguments, self.limits)
        return {"deleted": len(ids), "size": await self._write(self.model.delete, ids, "ids")}

    async def _follow(self) -> None:
        async with self._writes:
            await anyio.to_thread.run_sync(follow, self.model, self.config.index)

    async def _write(self, apply, items: list, where: str) -> int:
        async with self._writes:
            await anyio.to_thread.run_sync(apply_update, apply, items, where)
            return self.model.size


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def build_server(tools: GeoragTools) -> Server:
    """The low-level MCP server answering ``tools/list`` and ``tools/call`` with ``tools``."""

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.offered())

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await tools.call(params.name, params.arguments)

    return Server(
        "georag",
        version=georag.__version__,
        instructions=f"georag {tools.config.method}: "
        + " ".join(DESCRIPTIONS[n] for n in tools.models),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def warm(model, config: ServeConfig) -> None:
    """Run the loaded model once, so that the first call pays no start-up."""
    if config.index is None:
        warm_up(model)
    else:
        model.retrieve("warm-up", k=1)


def run(server: Server, transport: str, port: int) -> None:
    """Serve over ``transport`` ("stdio", or "http": streamable HTTP on 127.0.0.1:``port``)."""
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
