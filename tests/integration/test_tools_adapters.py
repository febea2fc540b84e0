"""The adapters' output, accepted by the real libraries: OpenAI and Anthropic shapes,
LangChain's StructuredTool, and an MCP server from the ``mcp`` package listed and called
by its real client (in process, and over stdio in a subprocess)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import mcp
import pytest
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder
from memseal.ledger.errors import (
    Conflict,
    NotFound,
    ProvenanceError,
    ReplayDivergence,
    StorageError,
    Unsupported,
)
from memseal.tools import (
    TOOL_NAMES,
    AsyncToolset,
    MemoryTools,
    ToolScope,
    Toolset,
    ToolSpec,
    mcp_server,
    runner_for,
    spec_for,
)
from memseal.tools.specs import root_rules

PLACE = "team:acme/agent:writer"


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    async with open_engine(
        tmp_path / "data", create=True, embedder=HashingEmbedder(dim=32)
    ) as opened:
        yield opened


@pytest.fixture
def toolset(engine: Engine) -> AsyncToolset:
    return MemoryTools(engine, ToolScope.placed_at(PLACE)).toolset()


async def test_openai_and_anthropic_definitions(toolset: AsyncToolset) -> None:
    assert [tool.name for tool in toolset] == list(TOOL_NAMES)
    openai = toolset.to_openai()
    anthropic = toolset.to_anthropic()
    for tool, o, a in zip(toolset, openai, anthropic, strict=True):
        assert o == {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        assert a == {
            "name": tool.name,
            "description": tool.description,
            "input_schema": {**tool.parameters, **root_rules(tool.name)},
        }
        assert tool.parameters == spec_for(tool.name).parameters
        assert tool.side_effects == (tool.name in ("memory_store", "memory_forget"))
    openai[0]["function"]["parameters"]["properties"].clear()  # copies: the toolset is unmoved
    assert toolset.to_openai()[0]["function"]["parameters"]["properties"]


async def test_call_takes_objects_and_json_text_and_reports_model_errors(
    toolset: AsyncToolset,
) -> None:
    stored = json.loads(await toolset.call("memory_store", {"learning": {"text": "tea at four"}}))
    assert stored["replayed"] is False
    # What OpenAI hands back: the arguments as JSON text.
    found = json.loads(await toolset.call("memory_fetch", '{"query": "tea"}'))
    assert [h["id"] for h in found["hits"]] == [stored["id"]]
    text = await toolset.call("memory_list", {"filter": {"kinds": ["memo"]}})
    assert text.startswith("error: memory_list: `filter.kinds` is not an item kind")
    assert (await toolset.outcome("memory_list", "{")).is_error
    assert not (await toolset.outcome("memory_list", "{}")).is_error
    assert (await toolset.call("nope", {})).startswith("error: unknown tool `nope`")
    by_keyword = await toolset[2].call(limit=1)
    assert json.loads(by_keyword)["items"][0]["id"] == stored["id"]


class _Failing:
    """A tool source whose call raises what it is told to."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def specs(self) -> Sequence[ToolSpec]:
        return [spec_for("memory_list")]

    async def call(self, name: str, arguments: object) -> dict[str, Any]:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [NotFound("memory_get: no such run"), Unsupported("memory_fetch: not here")],
)
async def test_what_a_model_can_act_on_comes_back_as_text(error: Exception) -> None:
    toolset = AsyncToolset.of(_Failing(error))
    assert await toolset.call("memory_list", {}) == f"error: {error}"
    assert (await toolset.call_mcp("memory_list", None))["isError"] is True


@pytest.mark.parametrize(
    "error",
    [
        StorageError("disk full"),
        ProvenanceError("memo mismatch"),
        ReplayDivergence("run r step 3"),
        Conflict("lease held"),
        RuntimeError("bug"),
    ],
)
async def test_anything_else_is_raised(error: Exception) -> None:
    toolset = AsyncToolset.of(_Failing(error))
    with pytest.raises(type(error)):
        await toolset.call("memory_list", {})
    with pytest.raises(type(error)):
        await toolset.to_langchain()[0].ainvoke({})


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture
def loop_thread() -> Iterator[_LoopThread]:
    made = _LoopThread()
    try:
        yield made
    finally:
        made.close()


def test_a_sync_toolset_and_langchain_structured_tools(
    tmp_path: Path, loop_thread: _LoopThread
) -> None:
    run = runner_for(loop_thread.loop)
    opened = open_engine(tmp_path / "sync", create=True, embedder=HashingEmbedder(dim=32))
    engine = run(opened.__aenter__())
    try:
        toolset = Toolset.of(MemoryTools(engine, ToolScope.placed_at(PLACE)), run)
        stored = json.loads(toolset.call("memory_store", {"learning": {"text": "sync tea"}}))
        tools = {tool.name: tool for tool in toolset.to_langchain()}
        assert all(isinstance(tool, StructuredTool) for tool in tools.values())
        fetched = json.loads(tools["memory_fetch"].invoke({"query": "tea"}))
        assert [h["id"] for h in fetched["hits"]] == [stored["id"]]
        refused = tools["memory_fetch"].invoke({"query": "tea", "namespace": "team:other"})
        assert refused.startswith("error: memory_fetch: `namespace` is not an argument")
        converted = convert_to_openai_tool(tools["memory_fetch"])
        assert converted == toolset.to_openai()[1]

        async def on_the_loop() -> None:
            with pytest.raises(RuntimeError, match="use AsyncToolset"):
                toolset.call("memory_list", {})

        run(on_the_loop())
    finally:
        run(opened.__aexit__(None, None, None))


async def test_langchain_coroutine_tools(toolset: AsyncToolset) -> None:
    tools = {tool.name: tool for tool in toolset.to_langchain()}
    stored = json.loads(
        await tools["memory_store"].ainvoke({"learning": {"text": "lc tea"}, "tags": ["drink"]})
    )
    got = json.loads(await tools["memory_get"].ainvoke({"ids": [stored["id"]]}))
    assert got["items"][0]["meta"]["tags"] == ["drink"]
    bad = await tools["memory_list"].ainvoke({"limit": 99})
    assert bad == "error: memory_list: `limit` must be at most 50"


def test_to_langchain_without_langchain_is_a_clear_import_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core.tools", None)
    with pytest.raises(ImportError, match=r"needs langchain-core.*memseal\[langchain\]"):
        AsyncToolset.of(_Failing(RuntimeError())).to_langchain()


def test_mcp_definitions_carry_the_annotations() -> None:
    toolset = AsyncToolset.of(_Failing(RuntimeError()))
    (definition,) = toolset.mcp_tools()
    assert definition["inputSchema"] == spec_for("memory_list").parameters
    assert definition["annotations"] == {
        "title": "List memory",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_real_mcp_server_and_client(toolset: AsyncToolset, mode: str) -> None:
    server = mcp_server(toolset, name="memseal-test")
    async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == list(TOOL_NAMES)
        by_name = {tool.name: tool for tool in listed.tools}
        for definition in toolset.mcp_tools():
            tool = by_name[definition["name"]]
            assert tool.input_schema == definition["inputSchema"]
            assert tool.description == definition["description"]
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is definition["annotations"]["readOnlyHint"]
        assert by_name["memory_forget"].annotations.destructive_hint is True  # type: ignore[union-attr]
        assert by_name["memory_store"].annotations.destructive_hint is False  # type: ignore[union-attr]

        stored = await client.call_tool("memory_store", {"learning": {"text": "mcp tea"}})
        assert not stored.is_error
        stored_id = json.loads(stored.content[0].text)["id"]  # type: ignore[union-attr]
        listed_items = await client.call_tool("memory_list")
        assert json.loads(listed_items.content[0].text)["items"][0]["id"] == stored_id  # type: ignore[union-attr]
        refused = await client.call_tool("memory_list", {"filter": {"reach": {"mode": "subtree"}}})
        assert refused.is_error
        assert "host fixes the namespace and reach" in refused.content[0].text  # type: ignore[union-attr]


SERVE = """
import asyncio, sys
from pathlib import Path
from mcp.server.stdio import stdio_server
from memseal.cli.engine import open_engine
from memseal.engine import HashingEmbedder
from memseal.tools import MemoryTools, ToolScope, mcp_server

async def main() -> None:
    folder = Path(sys.argv[1])
    async with open_engine(folder, create=True, embedder=HashingEmbedder(dim=32)) as engine:
        tools = MemoryTools(engine, ToolScope.placed_at("team:acme/agent:writer")).read_only()
        server = mcp_server(tools.toolset())
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

asyncio.run(main())
"""


async def test_the_mcp_server_over_stdio_in_a_subprocess(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"
    script.write_text(SERVE, encoding="utf-8")
    params = mcp.StdioServerParameters(
        command=sys.executable, args=[str(script), str(tmp_path / "data")]
    )
    async with mcp.Client(params) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == list(TOOL_NAMES[:5])  # read-only
        result = await client.call_tool("memory_explore", {"facet": "kind"})
        assert not result.is_error
        assert json.loads(result.content[0].text)["total"] == 0  # type: ignore[union-attr]
        refused = await client.call_tool("memory_store", {"learning": {"text": "x"}})
        assert refused.is_error
        assert "read-only" in refused.content[0].text  # type: ignore[union-attr]
