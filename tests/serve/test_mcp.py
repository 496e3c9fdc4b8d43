"""``georag mcp`` through the MCP SDK's own client: the tools listed with the HTTP service's
limits, each call equal to ``georag.Retriever`` / ``georag.Reranker`` in-process, a write
then a read that sees it, writes refused without ``--allow-writes``, bad arguments refused
in one line with the server answering after. In the default suite the client talks to the
server in-process; under ``-m slow`` to ``georag mcp`` over stdio and streamable HTTP."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from georag.cli import main
from georag.serve.config import ServeConfig
from tests.serve.harness import ROOT, demo_texts, environment, free_port, wait_listening

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from georag.serve.mcp import GeoragTools, build_server  # noqa: E402

LIMITS = dict(max_docs=8, max_text_chars=400, max_top_k=5)
PROBE = {"id": "mcp-1", "title": "Lanterns", "text": "zebrafish lanterns orbit quietly"}


def _session(tools: GeoragTools, scenario):
    """Run ``scenario(client)`` against ``tools`` served in-process; its result."""

    async def run():
        async with Client(build_server(tools)) as client:
            return await scenario(client)

    return anyio.run(run)


def _index_tools(retriever, allow_writes: bool) -> GeoragTools:
    config = ServeConfig(method="dense", index=str(retriever.index_dir), **LIMITS)
    return GeoragTools(config, retriever, allow_writes=allow_writes)


def _ids(result) -> list[str]:
    return [r["id"] for r in result.structured_content["results"]]


def test_the_index_tools_answer_as_the_retriever(corpus_retriever):
    retriever = corpus_retriever()
    queries, _ = demo_texts()

    async def scenario(client):
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        found = [await client.call_tool("retrieve", {"query": q, "top_k": 3}) for q in queries[:3]]
        default = await client.call_tool("retrieve", {"query": queries[3]})
        return listed, found, default

    listed, found, default = _session(_index_tools(retriever, False), scenario)
    assert set(listed) == {"retrieve"}  # no writes without allow_writes
    schema = listed["retrieve"].input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["maxLength"] == LIMITS["max_text_chars"]
    assert schema["properties"]["top_k"]["anyOf"][0]["maximum"] == LIMITS["max_top_k"]
    assert listed["retrieve"].annotations.read_only_hint
    for query, result in zip(queries, found):
        want = retriever.retrieve(query, k=3)
        assert not result.is_error and _ids(result) == [d.id for d in want]
        got = [r["score"] for r in result.structured_content["results"]]
        assert got == pytest.approx([d.score for d in want], abs=1e-6)
        assert json.loads(result.content[0].text) == result.structured_content
    assert _ids(default) == [d.id for d in retriever.retrieve(queries[3], k=10)]


def test_a_write_then_a_read_sees_it(corpus_retriever):
    retriever = corpus_retriever()
    size = retriever.size

    async def scenario(client):
        listed = [tool.name for tool in (await client.list_tools()).tools]
        added = await client.call_tool("add_documents", {"documents": [PROBE]})
        seen = await client.call_tool("retrieve", {"query": PROBE["text"], "top_k": 1})
        again = await client.call_tool("add_documents", {"documents": [PROBE]})
        deleted = await client.call_tool("delete_documents", {"ids": [PROBE["id"]]})
        gone = await client.call_tool("retrieve", {"query": PROBE["text"], "top_k": 1})
        return listed, added, seen, again, deleted, gone

    listed, added, seen, again, deleted, gone = _session(_index_tools(retriever, True), scenario)
    assert listed == ["retrieve", "add_documents", "delete_documents"]
    assert added.structured_content == {"added": 1, "size": size + 1}
    assert _ids(seen) == [PROBE["id"]]
    assert again.is_error and again.content[0].text.startswith("documents: ")
    assert deleted.structured_content == {"deleted": 1, "size": size}
    assert _ids(gone) != [PROBE["id"]] and retriever.size == size


def test_writes_are_refused_without_the_flag(corpus_retriever):
    retriever = corpus_retriever()
    size = retriever.size

    async def scenario(client):
        add = await client.call_tool("add_documents", {"documents": [PROBE]})
        delete = await client.call_tool(
            "delete_documents", {"ids": [retriever.retrieve("x")[0].id]}
        )
        return add, delete

    for result in _session(_index_tools(retriever, False), scenario):
        assert result.is_error and "writes are off" in result.content[0].text
        assert "--allow-writes" in result.content[0].text
    assert retriever.size == size


BAD = [
    ("retrieve", {}, "query: expected a string"),
    ("retrieve", {"query": ""}, "query: empty text"),
    ("retrieve", {"query": "q", "top_k": 6}, "top_k: 6, over the limit 5"),
    ("retrieve", {"query": "q", "top_k": "3"}, "top_k: expected a positive integer"),
    ("retrieve", {"query": "q" * 401}, "query: 401 characters, over the limit 400"),
    ("retrieve", {"query": "q", "k": 3}, "k: unknown argument of retrieve"),
    ("add_documents", {"documents": [{"text": "t"}]}, "documents[0].id: expected a string"),
    ("add_documents", {"documents": [PROBE] * 9}, "documents: 9 items, over the limit 8"),
    ("delete_documents", {"ids": ["no-such-id"]}, "ids: "),
    ("delete_documents", {"ids": "d1"}, "ids: expected a list"),
    ("search", {"query": "q"}, "tool: unknown 'search'"),
]


def test_bad_arguments_are_one_line_tool_errors_and_the_server_goes_on(corpus_retriever):
    retriever = corpus_retriever()
    queries, _ = demo_texts()

    async def scenario(client):
        refused = [await client.call_tool(name, arguments) for name, arguments, _ in BAD]
        return refused, await client.call_tool("retrieve", {"query": queries[0], "top_k": 2})

    refused, after = _session(_index_tools(retriever, True), scenario)
    for (_, _, message), result in zip(BAD, refused):
        text = result.content[0].text
        assert result.is_error and text.startswith(message) and "\n" not in text, text
    assert _ids(after) == [d.id for d in retriever.retrieve(queries[0], k=2)]


def test_the_rerank_tool_answers_as_the_reranker(serve_reranker):
    reranker = serve_reranker("maniscope")
    queries, docs = demo_texts()
    tools = GeoragTools(ServeConfig(method="maniscope", **LIMITS), reranker)

    async def scenario(client):
        listed = (await client.list_tools()).tools
        ranked = await client.call_tool(
            "rerank", {"query": queries[0], "documents": docs[:8], "top_n": 3}
        )
        refused = await client.call_tool("rerank", {"query": queries[0], "documents": docs[:9]})
        return listed, ranked, refused

    listed, ranked, refused = _session(tools, scenario)
    assert [tool.name for tool in listed] == ["rerank"]
    schema = listed[0].input_schema
    assert schema["required"] == ["query", "documents"]
    assert schema["properties"]["documents"]["maxItems"] == LIMITS["max_docs"]
    want = [d for d in reranker.rank(queries[0], docs[:8]) if d.kept][:3]
    results = ranked.structured_content["results"]
    assert [r["index"] for r in results] == [d.index for d in want]
    assert [r["document"]["text"] for r in results] == [d.text for d in want]
    assert (
        refused.is_error and refused.content[0].text == "documents: 9 documents, over the limit 8"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["mcp"], "--method: give a method spec, or --index DIR"),
        (
            ["mcp", "--method", "maniscope", "--allow-writes"],
            "--allow-writes: writes go to an index",
        ),
        (["mcp", "--method", "maniscope", "--transport", "ws"], "argument --transport"),
        (["mcp", "--method", "maniscope", "--max-docs", "0"], "argument --max-docs"),
    ],
)
def test_bad_mcp_arguments_fail_in_one_line(args, message, capsys):
    try:
        status = main(args)
    except SystemExit as exit:  # argparse's own refusals
        status = exit.code
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("georag: error: ") and message in err and err.count("\n") == 1


def _mcp_command(*args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "georag", "mcp", *args], env=environment(), cwd=ROOT
    )


@pytest.mark.slow
def test_georag_mcp_over_stdio(corpus_retriever):
    retriever = corpus_retriever()
    queries, _ = demo_texts()

    async def scenario():
        args = ("--index", str(retriever.index_dir), "--allow-writes")
        async with Client(_mcp_command(*args), read_timeout_seconds=120) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            found = await client.call_tool("retrieve", {"query": queries[0], "top_k": 3})
            await client.call_tool("add_documents", {"documents": [PROBE]})
            seen = await client.call_tool("retrieve", {"query": PROBE["text"], "top_k": 1})
            return names, found, seen

    names, found, seen = anyio.run(scenario)
    assert names == ["retrieve", "add_documents", "delete_documents"]
    assert _ids(found) == [d.id for d in retriever.retrieve(queries[0], k=3)]
    assert _ids(seen) == [PROBE["id"]]


@pytest.mark.slow
def test_georag_mcp_over_streamable_http(serve_reranker):
    reranker = serve_reranker("maniscope")
    queries, docs = demo_texts()
    port = free_port()
    command = [sys.executable, "-m", "georag", "mcp", "--method", "maniscope"]
    command += ["--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, env=environment(), stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, 240, process)

        async def scenario():
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                arguments = {"query": queries[1], "documents": docs[:6]}
                return await client.call_tool("rerank", arguments)

        ranked = anyio.run(scenario)
    finally:
        process.terminate()
        process.wait(30)
    want = [d.index for d in reranker.rank(queries[1], docs[:6]) if d.kept]
    assert [r["index"] for r in ranked.structured_content["results"]] == want
