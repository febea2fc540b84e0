"""Attacks on a LangGraph thread resumed through ``tool_node``: never a stale or foreign memo.

The worst failure a durable memory can have is a memo handed to a different
logical call. Here a resumed thread re-issues a call with step 0's arguments
under a new id, replays an id with other arguments, sends ids that are not
ids, sends no id, names another thread's subgraph run, reuses another
thread's ids, or opens a thread's run with another scope. Each gets a live
result of its own, or a clear error that writes nothing. On SQLite and
PostgreSQL, with LangGraph's own ``StateGraph`` and ``ToolNode``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph

import memseal
from memseal.integrations.langgraph import run_id_for, tool_node
from memseal.memory import STORE_ENV
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
FETCH = {"query": "deploy key", "mode": "exact"}
STORE = {"learning": {"text": "the deploy key lives in vault path ops/deploy"}}


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


def _call(name: str, args: dict[str, Any], call_id: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _graph(node: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


async def _run(graph: Any, thread: Any, *calls: dict[str, Any]) -> dict[str, ToolMessage]:
    """The node run on one AI message's calls in ``thread``: its ToolMessages by id."""
    ask = AIMessage(content="", tool_calls=list(calls))
    config: Any = {"configurable": {"thread_id": thread}}
    state = await graph.ainvoke({"messages": [ask]}, config)
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


def _hits(message: ToolMessage) -> list[str]:
    return [hit["text"] for hit in json.loads(str(message.content))["hits"]]


async def _signed(memory: memseal.Memory) -> list[tuple[str, int, str | None]]:
    found = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            call = decode_tool_call(bytes(entry.body))
            found.append((call.run_id, call.step, call.key if isinstance(call.key, str) else None))
    return found


async def test_a_resumed_thread_never_hands_step_0s_memo_to_a_new_call_with_its_arguments(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        graph = _graph(tool_node(memory, SCOPE))
        first = await _run(graph, "t1", _call("memory_fetch", FETCH, "c0"))
        await _run(graph, "t1", _call("memory_store", STORE, "c1"))
        assert _hits(first["c0"]) == []
    async with _open(tmp_path / "d") as memory:  # the restarted worker
        graph = _graph(tool_node(memory, SCOPE))
        # The resumed graph re-issues only the calls after its checkpoint: a new id with
        # step 0's arguments is the first call. It is live, and sees the store.
        fresh = await _run(graph, "t1", _call("memory_fetch", FETCH, "c2"))
        assert _hits(fresh["c2"]) == [STORE["learning"]["text"]]
        replayed = await _run(graph, "t1", _call("memory_fetch", FETCH, "c0"))
        assert replayed["c0"].content == first["c0"].content  # the old id: its own memo
        assert await _signed(memory) == [("t1", 0, "c0"), ("t1", 1, "c1"), ("t1", 2, "c2")]
        await memory.verify()


async def test_a_tool_call_id_replayed_with_other_arguments_is_a_divergence_naming_the_key(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        graph = _graph(tool_node(memory, SCOPE))
        await _run(graph, "t1", _call("memory_fetch", FETCH, "c0"))
        size = await memory.ledger.size()
        # In the same process (a re-executed node) and after a restart alike.
        with pytest.raises(memseal.ReplayDivergence, match="key 'c0'"):
            await _run(graph, "t1", _call("memory_fetch", {"query": "vault"}, "c0"))
        assert await memory.ledger.size() == size
    async with _open(tmp_path / "d") as memory:
        graph = _graph(tool_node(memory, SCOPE))
        with pytest.raises(memseal.ReplayDivergence, match="key 'c0'"):
            await _run(graph, "t1", _call("memory_list", {}, "c0"))
        assert await memory.ledger.size() == size


@pytest.mark.parametrize("bad", [7, "k" * 201, "", "tab\tid"], ids=["int", "long", "empty", "tab"])
async def test_a_tool_call_id_that_is_no_valid_key_is_refused_naming_key_and_writes_nothing(
    tmp_path: Path, bad: Any
) -> None:
    async with _open(tmp_path / "d") as memory:
        node = tool_node(memory, SCOPE)
        size = await memory.ledger.size()
        config: Any = {"configurable": {"thread_id": "t1"}}
        with pytest.raises(memseal.InvalidRequest, match="`key`"):
            await node.tools_by_name["memory_store"].ainvoke(
                _call("memory_store", STORE, bad), config
            )
        assert await memory.ledger.size() == size


async def test_a_tool_call_without_an_id_is_refused_never_numbered_by_position(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        graph = _graph(tool_node(memory, SCOPE))
        await _run(graph, "t1", _call("memory_fetch", FETCH, "c0"))
        size = await memory.ledger.size()
    async with _open(tmp_path / "d") as memory:
        graph = _graph(tool_node(memory, SCOPE))
        # Unkeyed, it would be step 0 of the resumed run and get step 0's memo.
        with pytest.raises(memseal.InvalidRequest, match="no id"):
            await _run(graph, "t1", _call("memory_fetch", FETCH, None))
        node = tool_node(memory, SCOPE)
        with pytest.raises(memseal.InvalidRequest, match="no id"):  # a plain dict, no ToolCall
            await node.tools_by_name["memory_fetch"].ainvoke(
                FETCH, {"configurable": {"thread_id": "t1"}}
            )
        assert await memory.ledger.size() == size


async def test_a_thread_id_naming_another_threads_subgraph_run_is_refused(tmp_path: Path) -> None:
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": "research|tools:x"}}
    assert run_id_for(config) == "t1|research"
    async with _open(tmp_path / "d") as memory:
        graph = _graph(tool_node(memory, SCOPE))
        size = await memory.ledger.size()
        with pytest.raises(memseal.InvalidRequest, match="`thread_id` must not contain"):
            await _run(graph, "t1|research", _call("memory_list", {}, "c0"))
        assert await memory.ledger.size() == size


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"configurable": {}},
        {"configurable": {"thread_id": 1.5}},
        {"configurable": {"thread_id": "x" * 201}},
        {"configurable": {"thread_id": "new\nline"}},
    ],
    ids=["none", "no-thread", "float", "long", "control"],
)
async def test_a_call_outside_a_usable_thread_is_refused_naming_thread_id(
    tmp_path: Path, config: Any
) -> None:
    async with _open(tmp_path / "d") as memory:
        node = tool_node(memory, SCOPE)
        size = await memory.ledger.size()
        with pytest.raises(memseal.InvalidRequest, match="`thread_id`"):
            await node.tools_by_name["memory_list"].ainvoke(_call("memory_list", {}, "c0"), config)
        assert await memory.ledger.size() == size


async def test_another_thread_reusing_a_tool_call_id_never_gets_the_first_threads_memo(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        graph = _graph(tool_node(memory, SCOPE))  # one compiled graph, every thread
        a = await _run(graph, "thread-a", _call("memory_fetch", FETCH, "call_0"))
        await _run(graph, "thread-a", _call("memory_store", STORE, "call_1"))
        # Thread b's model numbers its calls the same way (fake and some real ones do).
        b = await _run(graph, "thread-b", _call("memory_fetch", FETCH, "call_0"))
        assert _hits(a["call_0"]) == [] and _hits(b["call_0"]) == [STORE["learning"]["text"]]
        assert [(run, key) for run, _, key in await _signed(memory)] == [
            ("thread-a", "call_0"),
            ("thread-a", "call_1"),
            ("thread-b", "call_0"),
        ]


async def test_a_second_scope_for_a_threads_run_is_a_conflict_not_a_shared_run(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        await _run(_graph(tool_node(memory, SCOPE)), "t1", _call("memory_list", {}, "c0"))
        other = memseal.ToolScope.placed_at("team:acme/agent:reader")
        size = await memory.ledger.size()
        with pytest.raises(memseal.Conflict, match="another scope"):
            await _run(_graph(tool_node(memory, other)), "t1", _call("memory_list", {}, "c1"))
        assert await memory.ledger.size() == size
    async with _open(tmp_path / "d") as memory:  # and from a fresh memory: the signed scope
        with pytest.raises(memseal.Conflict, match="another scope"):
            await _run(_graph(tool_node(memory, other)), "t1", _call("memory_list", {}, "c1"))
        assert await memory.ledger.size() == size


async def test_a_thread_held_by_another_open_memory_is_not_resumed_beside_it(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as holder:
        await _run(_graph(tool_node(holder, SCOPE)), "t1", _call("memory_list", {}, "c0"))
        async with _open(tmp_path / "d") as second:
            with pytest.raises(memseal.Conflict, match="held by another open memory"):
                await _run(_graph(tool_node(second, SCOPE)), "t1", _call("memory_list", {}, "c1"))
        # Released while its memory stays open, the thread moves: the next memory takes
        # it and answers c0 from its memo.
        await tool_node(holder, SCOPE).arelease("t1")
        async with _open(tmp_path / "d") as memory:
            graph = _graph(tool_node(memory, SCOPE))
            again = await _run(graph, "t1", _call("memory_list", {}, "c0"))
            assert again["c0"].status == "success"
            assert [key for _, _, key in await _signed(memory)] == ["c0"]
