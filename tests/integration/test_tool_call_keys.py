"""The toolset adapters key each call by the model's tool-call id, with no host code.

A LangChain tool invoked with a ``ToolCall`` (as ``ToolNode`` does) and the sync
``Toolset.call`` handed an SDK tool call both pass the call's id to the run as
its key: re-invoked on a resumed run, the same id gets its memo (nothing
written twice), and a new id with equal arguments runs live. Calls with no id
keep the run's step numbering. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

import memseal
from memseal.memory import STORE_ENV, Memory
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call
from memseal.tools import ToolScope

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
STORE = {"learning": {"text": "the deploy key lives in vault path ops/deploy"}}
FETCH = {"query": "deploy key", "mode": "exact"}


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


def _tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


async def _calls(memory: Memory, run_id: str) -> list[tuple[int, str | None, str]]:
    """The run's signed calls in log order: (step, key or None, tool)."""
    found = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            call = decode_tool_call(bytes(entry.body))
            if call.run_id == run_id:
                key = call.key if isinstance(call.key, str) else None
                found.append((call.step, key, call.tool))
    return found


def _hits(text: str) -> list[str]:
    return [hit["text"] for hit in json.loads(text)["hits"]]


async def test_a_langchain_tool_call_id_is_the_key_a_resumed_run_answers_from_its_memo(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        async with memory.run("thread-1", SCOPE) as run:
            tools = {tool.name: tool for tool in run.toolset().to_langchain()}
            first = await tools["memory_fetch"].ainvoke(_tool_call("memory_fetch", FETCH, "c0"))
            stored = await tools["memory_store"].ainvoke(_tool_call("memory_store", STORE, "c1"))
        assert isinstance(first, ToolMessage) and first.tool_call_id == "c0"
        assert _hits(str(first.content)) == []  # it ran before the store
        size = await memory.ledger.size()
        async with memory.run("thread-1", SCOPE) as run:
            tools = {tool.name: tool for tool in run.toolset().to_langchain()}
            # The resumed graph re-issues the calls after its checkpoint, in its own order.
            again = await tools["memory_store"].ainvoke(_tool_call("memory_store", STORE, "c1"))
            replayed = await tools["memory_fetch"].ainvoke(_tool_call("memory_fetch", FETCH, "c0"))
            assert (again.content, replayed.content) == (stored.content, first.content)
            assert await memory.ledger.size() == size  # nothing written twice
            # A new id with step 0's arguments is a new call: live, it finds the store.
            fresh = await tools["memory_fetch"].ainvoke(_tool_call("memory_fetch", FETCH, "c2"))
            assert _hits(str(fresh.content)) == [STORE["learning"]["text"]]
            # A plain dict (no ToolCall, no id) keeps the unkeyed numbering.
            await tools["memory_list"].ainvoke({})
        assert await _calls(memory, "thread-1") == [
            (0, "c0", "memory_fetch"),
            (1, "c1", "memory_store"),
            (2, "c2", "memory_fetch"),
            (3, None, "memory_list"),
        ]
        await memory.verify()


def _tool_graph(tools: list[Any]) -> Any:
    """A graph whose one node is LangGraph's own ToolNode over ``tools``."""
    graph = pytest.importorskip("langgraph.graph")
    prebuilt = pytest.importorskip("langgraph.prebuilt")
    builder = graph.StateGraph(graph.MessagesState)
    builder.add_node("tools", prebuilt.ToolNode(tools))
    builder.add_edge(graph.START, "tools")
    builder.add_edge("tools", graph.END)
    return builder.compile()


async def test_toolnode_keys_the_calls_of_recorded_tools_bound_to_a_thread(tmp_path: Path) -> None:
    ask = AIMessage(
        content="",
        tool_calls=[
            {"name": "memory_store", "args": STORE, "id": "call_store"},
            {"name": "memory_fetch", "args": FETCH, "id": "call_fetch"},
        ],
    )
    async with _open(tmp_path / "d") as memory:
        async with memory.tools(SCOPE, run_id="thread-1") as recorded:
            graph = _tool_graph(recorded.toolset().to_langchain())
            before = (await graph.ainvoke({"messages": [ask]}))["messages"][1:]
        size = await memory.ledger.size()
        async with memory.tools(SCOPE, run_id="thread-1") as recorded:
            # LangGraph re-executes the node on resume: both calls get their memos.
            graph = _tool_graph(recorded.toolset().to_langchain())
            after = (await graph.ainvoke({"messages": [ask]}))["messages"][1:]
        assert [m.tool_call_id for m in after] == ["call_store", "call_fetch"]
        assert [m.content for m in after] == [m.content for m in before]
        assert await memory.ledger.size() == size
        keys = sorted(str(key) for _, key, _ in await _calls(memory, "thread-1"))
        assert keys == ["call_fetch", "call_store"]
        await memory.verify()


def test_the_sync_langchain_tools_pass_the_tool_call_id_too(tmp_path: Path) -> None:
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.toolset(SCOPE, run_id="thread-1")
        tools = {tool.name: tool for tool in toolset.to_langchain()}
        first = tools["memory_fetch"].invoke(_tool_call("memory_fetch", FETCH, "c0"))
        tools["memory_store"].invoke(_tool_call("memory_store", STORE, "c1"))
        assert toolset.last_call is not None and toolset.last_call.step == 1
        size = memory.ledger.size()
        again = tools["memory_fetch"].invoke(_tool_call("memory_fetch", FETCH, "c0"))
        assert again.content == first.content and memory.ledger.size() == size
        assert toolset.last_call is not None and toolset.last_call.step == 0
        fresh = tools["memory_fetch"].invoke(_tool_call("memory_fetch", FETCH, "c2"))
        assert _hits(str(fresh.content)) == [STORE["learning"]["text"]]
        assert toolset.last_call is not None and toolset.last_call.step == 2


async def test_a_bad_langchain_tool_call_id_is_an_error_naming_key_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory, memory.run("thread-1", SCOPE) as run:
        tools = {tool.name: tool for tool in run.toolset().to_langchain()}
        size = await memory.ledger.size()
        answer = await tools["memory_list"].ainvoke(_tool_call("memory_list", {}, "c" * 201))
        assert answer.status == "error" and "`key`" in str(answer.content)
        assert await memory.ledger.size() == size


def _openai_call(name: str, args: dict[str, Any], call_id: str) -> Any:
    from openai.types.chat.chat_completion_message_function_tool_call import (
        ChatCompletionMessageFunctionToolCall,
        Function,
    )

    return ChatCompletionMessageFunctionToolCall(
        id=call_id, type="function", function=Function(name=name, arguments=json.dumps(args))
    )


def _anthropic_call(name: str, args: dict[str, Any], call_id: str) -> Any:
    from anthropic.types import ToolUseBlock

    return ToolUseBlock(id=call_id, type="tool_use", name=name, input=args)


def test_the_sync_toolset_keys_sdk_tool_calls_and_a_reopened_run_answers_from_memos(
    tmp_path: Path,
) -> None:
    def facade() -> Any:
        return memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None)

    with facade() as memory:
        toolset = memory.toolset(SCOPE, run_id="thread-1")
        first = toolset.call(_openai_call("memory_fetch", FETCH, "call_f0"))
        stored = toolset.call(_anthropic_call("memory_store", STORE, "toolu_s"))
        assert _hits(first) == [] and toolset.last_call is not None
        assert (toolset.last_call.run_id, toolset.last_call.step) == ("thread-1", 1)
        size = memory.ledger.size()
    with facade() as memory:
        toolset = memory.toolset(SCOPE, run_id="thread-1")
        # The resumed host re-issues both, in another order: each gets its memo.
        assert toolset.call(_anthropic_call("memory_store", STORE, "toolu_s")) == stored
        assert toolset.last_call is not None and toolset.last_call.step == 1
        assert toolset.call(_openai_call("memory_fetch", FETCH, "call_f0")) == first
        assert toolset.last_call is not None and toolset.last_call.step == 0
        assert memory.ledger.size() == size
        # A new id with step 0's arguments runs live; an error the model can act on is
        # recorded at its own step and named in last_call.
        fresh = toolset.call(_openai_call("memory_fetch", FETCH, "call_f1"))
        assert _hits(fresh) == [STORE["learning"]["text"]]
        bad = toolset.call(_openai_call("memory_list", {"limit": 500}, "call_bad"))
        assert bad.startswith("error: ") and toolset.last_call is not None
        assert (toolset.last_call.step, toolset.last_call.error is not None) == (3, True)
        # The same id with other arguments is a divergence naming the key, nothing written.
        size = memory.ledger.size()
        with pytest.raises(memseal.ReplayDivergence, match="key 'call_f0'"):
            toolset.call(_openai_call("memory_fetch", {"query": "vault"}, "call_f0"))
        assert memory.ledger.size() == size
        # Name and arguments (no id) keep the step numbering, as before.
        toolset.call("memory_list", {})
        assert toolset.last_call is not None and toolset.last_call.step == 4
        memory.ledger.verify(memory.trust_root)


def test_the_sync_toolset_refuses_a_bad_key_naming_it_and_writes_nothing(tmp_path: Path) -> None:
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.toolset(SCOPE, run_id="thread-1")
        size = memory.ledger.size()
        for bad in ("", "k" * 201, "tab\tkey", 7):
            call: dict[str, Any] = {
                "type": "tool_use",
                "id": bad,
                "name": "memory_list",
                "input": {},
            }
            answer = toolset.call(call)
            assert answer.startswith("error: `key`"), answer
        with pytest.raises(memseal.InvalidRequest, match="tool_call"):
            toolset.call(object())  # type: ignore[arg-type]
        assert memory.ledger.size() == size and toolset.last_call is None


async def test_mcp_server_over_a_runs_toolset_keys_calls_by_meta(tmp_path: Path) -> None:
    mcp = pytest.importorskip("mcp")
    from memseal.tools import mcp_server

    async with _open(tmp_path / "d") as memory:
        async with (
            memory.run("thread-1", SCOPE) as run,
            mcp.Client(mcp_server(run.toolset())) as client,
        ):
            first = await client.call_tool("memory_fetch", FETCH, meta={"memseal/key": "c0"})
            await client.call_tool("memory_store", STORE, meta={"memseal/key": "c1"})
            bad = await client.call_tool("memory_list", {}, meta={"memseal/key": ""})
            assert bad.is_error and "`key`" in bad.content[0].text
        size = await memory.ledger.size()
        async with (
            memory.run("thread-1", SCOPE) as run,
            mcp.Client(mcp_server(run.toolset())) as client,
        ):
            again = await client.call_tool("memory_fetch", FETCH, meta={"memseal/key": "c0"})
        assert again.content[0].text == first.content[0].text
        assert await memory.ledger.size() == size
        assert [key for _, key, _ in await _calls(memory, "thread-1")] == ["c0", "c1"]
