"""LangGraph resumes a thread on ``tool_node`` with each logical call recorded exactly once.

Real parts throughout: LangGraph's ``StateGraph`` and ``ToolNode``, an
``AsyncSqliteSaver`` (or ``SqliteSaver``) on a file in tmp_path, a memseal data
folder, and a scripted chat model (``GenericFakeChatModel`` that binds tools and
replies by turn), so no LLM and no network. A subprocess agent
(``examples/durable_langgraph.py``) SIGKILLs itself right after its third tool
call returns and a new process resumes the thread; ``interrupt()`` approvals
are resumed in the same process and in new ones; parallel calls, ``Send``
fan-out, a time-travel replay and subgraphs; ``memseal verify``, ``export`` and
``replay`` on the result.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from durable_support import audit_export_replay, hits, signed_calls
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, Send, interrupt

import memseal
from memseal.integrations.langgraph import MemsealToolNode, tool_node
from memseal.memory import STORE_ENV

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "durable_langgraph.py"
THREAD = "nightly-report"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
QUERY = {"query": "nightly report", "mode": "exact"}
REPORT = "the nightly report goes out at 6am"
KEYS = ["call_1", "call_2", "call_3", "call_4", "call_5"]


@pytest.fixture
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


SCRIPT = [
    [_call("memory_fetch", QUERY, "call_1")],
    [
        _call("memory_store", {"learning": {"text": REPORT}}, "call_2"),
        _call("memory_list", {}, "call_3"),
    ],
    [_call("memory_store", {"learning": {"text": "deploys happen on Tuesdays"}}, "call_4")],
    [_call("memory_fetch", QUERY, "call_5")],
]


class ScriptedModel(GenericFakeChatModel):
    """Binds tools, replies by turn (its replies so far): a re-executed turn answers alike."""

    script: list[list[dict[str, Any]]] = SCRIPT

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        calls = self.script[turn] if turn < len(self.script) else []
        reply = AIMessage(content="" if calls else "done", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _agent_graph(node: MemsealToolNode, checkpointer: Any, script: Any = SCRIPT) -> Any:
    model = ScriptedModel(messages=iter(()), script=script)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


async def _approve_stores(request: Any, execute: Any) -> Any:
    """ToolNode's awrap_tool_call: every memory_store waits for an interrupt() approval."""
    call = request.tool_call
    if call["name"] == "memory_store" and interrupt({"approve": call["id"]}) != "yes":
        return ToolMessage("error: not approved", tool_call_id=call["id"], status="error")
    return await execute(request)


async def _signed(memory: memseal.Memory) -> list[tuple[str, int, str | None, str]]:
    """Every signed call in log order: (run id, step, key, tool)."""
    return [(c.run_id, c.step, c.key, c.tool) for c in await signed_calls(memory)]


async def _per_key(memory: memseal.Memory, run_id: str) -> collections.Counter[str | None]:
    return collections.Counter(key for run, _, key, _ in await _signed(memory) if run == run_id)


def _results(state: dict[str, Any]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)}


# -- a killed agent process, resumed by a new one -----------------------------------------


def _example(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != STORE_ENV}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--data", str(tmp_path / "data"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _lines(out: str, word: str) -> dict[str, str]:
    """The ``<word> <call id> <tool>: <text>`` lines the example prints, by call id."""
    return {m[1]: m[2] for m in re.finditer(rf"^{word} (\S+) \S+: (.*)$", out, re.M)}


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_killed_agent_process_is_resumed_by_a_new_one_each_call_recorded_once(
    tmp_path: Path, durability: str
) -> None:
    killed = _example(tmp_path, "--durability", durability)
    assert killed.returncode == -9, killed.stderr  # SIGKILLed itself, lease and all
    before = _lines(killed.stdout, "tool")
    assert sorted(before) == ["call_1", "call_2", "call_3"]
    assert "killed right after tool call 3 returned" in killed.stdout

    resumed = _example(tmp_path, "--durability", durability)
    assert resumed.returncode == 0, resumed.stderr
    after = _lines(resumed.stdout, "result")
    assert sorted(after) == KEYS
    # The results the killed process saw are the ones the resumed thread holds.
    assert {key: after[key] for key in before} == before
    # Step 0's arguments again, under a new id: its own live result, never step 0's memo.
    assert hits(after["call_1"]) == []
    assert hits(after["call_5"]) == [REPORT]
    assert "answer: From memory: the nightly report goes out at 6am." in resumed.stdout

    async def recorded() -> tuple[collections.Counter[str | None], int]:
        async with _open(tmp_path / "data") as memory:
            stored = 0
            async for record in memory.ledger.scan(0, await memory.ledger.size()):
                stored += record.entry().kind == "memory_stored"
            return await _per_key(memory, THREAD), stored

    per_key, stored = asyncio.run(recorded())
    assert per_key == dict.fromkeys(KEYS, 1)  # 0 entries written twice
    assert stored == 2  # two stores, each written once

    replayed = audit_export_replay(
        resumed.stdout, tmp_path / "data", THREAD, tmp_path / "thread.bundle"
    )
    assert "matched by key" in replayed
    if durability == "sync":
        finished = _example(tmp_path)  # a finished thread: nothing runs, nothing is written
        assert finished.returncode == 0, finished.stderr
        grew = re.search(r"the log grew from (\d+) to (\d+) entries", finished.stdout)
        assert grew is not None and grew[1] == grew[2], finished.stdout


@pytest.mark.slow
def test_interrupt_approvals_resumed_by_new_processes_record_each_call_once(
    tmp_path: Path,
) -> None:
    first = _example(tmp_path, "--approve", "--kill-after", "0")
    assert first.returncode == 0, first.stderr
    assert '"id": "call_2"' in first.stdout and "waiting for approval" in first.stdout
    listed = _lines(first.stdout, "tool")["call_3"]  # ran beside the gated store
    second = _example(tmp_path, "--approve", "--kill-after", "0")
    assert second.returncode == 0, second.stderr
    # LangGraph re-executed the node: call_3 again, from its memo; call_2 approved, live.
    assert _lines(second.stdout, "tool")["call_3"] == listed
    assert "signed calls in run 'nightly-report': call_1 x1, call_2 x1, call_3 x1\n" in (
        second.stdout
    )
    third = _example(tmp_path, "--approve", "--kill-after", "0")
    assert third.returncode == 0, third.stderr
    assert "call_1 x1, call_2 x1, call_3 x1, call_4 x1, call_5 x1" in third.stdout
    assert "answer: From memory: the nightly report goes out at 6am." in third.stdout


# -- in this process, on SQLite and PostgreSQL ---------------------------------------------


@pytest.mark.usefixtures("_store")
async def test_interrupt_approval_resumed_in_the_same_process_records_each_call_once(
    tmp_path: Path,
) -> None:
    config: Any = {"configurable": {"thread_id": "t-approve"}}
    async with (
        _open(tmp_path / "data") as memory,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver,
    ):
        graph = _agent_graph(tool_node(memory, SCOPE, awrap_tool_call=_approve_stores), saver)
        state = await graph.ainvoke({"messages": [HumanMessage("go")]}, config)
        pauses = 0
        while pending := (await graph.aget_state(config)).interrupts:
            pauses += 1
            # LangGraph re-executes the whole node on resume: call_3, which ran beside the
            # gated call_2, comes back from its memo (no second entry).
            state = await graph.ainvoke(Command(resume={i.id: "yes" for i in pending}), config)
        assert pauses == 2  # call_2, then call_4
        results = _results(state)
        assert sorted(results) == KEYS
        assert hits(results["call_5"]) == [REPORT]
        assert await _per_key(memory, "t-approve") == dict.fromkeys(KEYS, 1)
        await memory.verify()


@pytest.mark.usefixtures("_store")
async def test_a_re_executed_node_in_a_new_memory_answers_from_memos_and_new_ids_run_live(
    tmp_path: Path,
) -> None:
    """A new process in all but pid: a fresh memory, saver and graph on the same files."""
    config: Any = {"configurable": {"thread_id": "t-reopen"}}
    gated = {"memory_store": 0}

    async def crash_on_second_store(request: Any, execute: Any) -> Any:
        result = await execute(request)
        if request.tool_call["name"] == "memory_store":
            gated["memory_store"] += 1
            if gated["memory_store"] == 2:
                raise RuntimeError("the worker crashed")  # after call_4 was recorded
        return result

    async with (
        _open(tmp_path / "data") as memory,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver,
    ):
        node = tool_node(memory, SCOPE, awrap_tool_call=crash_on_second_store)
        graph = _agent_graph(node, saver)
        with pytest.raises(RuntimeError, match="crashed"):
            await graph.ainvoke({"messages": [HumanMessage("go")]}, config)
        before = _results((await graph.aget_state(config)).values)
        size = await memory.ledger.size()
    assert sorted(before) == ["call_1", "call_2", "call_3"]
    async with (
        _open(tmp_path / "data") as memory,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver,
    ):
        graph = _agent_graph(tool_node(memory, SCOPE), saver)
        state = await graph.ainvoke(None, config)
        results = _results(state)
        assert {k: results[k] for k in before} == before
        # call_4 came back from its memo; only call_5 ran live (one entry, no store).
        assert await memory.ledger.size() == size + 1
        assert hits(results["call_5"]) == [REPORT] and hits(results["call_1"]) == []
        assert await _per_key(memory, "t-reopen") == dict.fromkeys(KEYS, 1)
        await memory.verify()


FAN_OUT = [
    _call("memory_store", {"learning": {"text": "alpha ships first"}}, "f1"),
    _call("memory_store", {"learning": {"text": "beta ships second"}}, "f2"),
    _call("memory_list", {}, "f3"),
]


@pytest.mark.usefixtures("_store")
async def test_send_fan_out_and_a_time_travel_replay_record_each_call_once(tmp_path: Path) -> None:
    config: Any = {"configurable": {"thread_id": "t-fan"}}

    def fan_out(state: MessagesState) -> Any:
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return END
        return [
            Send("tools", {"messages": [AIMessage(content="", tool_calls=[c])]})
            for c in last.tool_calls
        ]

    async with (
        _open(tmp_path / "data") as memory,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver,
    ):
        model = ScriptedModel(messages=iter(()), script=[FAN_OUT])

        async def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_node("tools", tool_node(memory, SCOPE))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", fan_out, ["tools", END])
        builder.add_edge("tools", "agent")
        graph = builder.compile(checkpointer=saver)
        first = _results(await graph.ainvoke({"messages": [HumanMessage("go")]}, config))
        assert sorted(first) == ["f1", "f2", "f3"]
        signed = [s for s in await _signed(memory) if s[0] == "t-fan"]
        assert sorted(step for _, step, _, _ in signed) == [0, 1, 2]  # three steps, no clash
        size = await memory.ledger.size()
        # Time travel: replay from the checkpoint before the fan-out ran. LangGraph forks
        # and re-executes the three Send tasks; each gets its memo.
        history = [s async for s in graph.aget_state_history(config)]
        fork = next(s for s in history if s.next and all(t.name == "tools" for t in s.tasks))
        again = _results(await graph.ainvoke(None, fork.config))
        assert again == first
        assert await memory.ledger.size() == size
        assert await _per_key(memory, "t-fan") == {"f1": 1, "f2": 1, "f3": 1}
        await memory.verify()


@pytest.mark.usefixtures("_store")
@pytest.mark.parametrize("persistent", [False, True])
async def test_a_subgraph_records_in_a_run_named_by_thread_and_namespace(
    tmp_path: Path, persistent: bool
) -> None:
    async with (
        _open(tmp_path / "data") as memory,
        AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver,
    ):
        node = tool_node(memory, SCOPE)  # one node object in both graphs
        inner = StateGraph(MessagesState)
        inner.add_node("tools", node)
        inner.add_edge(START, "tools")
        inner.add_edge("tools", END)
        outer = StateGraph(MessagesState)
        outer.add_node("tools", node)
        outer.add_node("research", inner.compile(checkpointer=True if persistent else None))
        outer.add_edge(START, "tools")
        outer.add_edge("tools", "research")
        outer.add_edge("research", END)
        graph = outer.compile(checkpointer=saver)
        ask = AIMessage(content="", tool_calls=[_call("memory_list", {}, "c1")])
        config: Any = {"configurable": {"thread_id": "t1"}}
        await graph.ainvoke({"messages": [ask]}, config)
        runs = [run for run, _, _, _ in await _signed(memory)]
        assert runs[0] == "t1"
        if persistent:
            assert runs[1] == "t1|research"
        else:
            assert re.fullmatch(r"t1\|research:[0-9a-f-]{36}", runs[1]), runs
        # The same id in the two graphs is two calls, one per run: neither got the other's.
        assert len(runs) == 2
        await memory.verify()


def test_a_sync_graph_on_the_sync_facade_resumes_from_memos(tmp_path: Path) -> None:
    config: Any = {"configurable": {"thread_id": "t-sync"}}
    ask = AIMessage(
        content="",
        tool_calls=[
            _call("memory_store", {"learning": {"text": REPORT}}, "s1"),
            _call("memory_fetch", QUERY, "s2"),
        ],
    )

    def graph_on(memory: memseal.SyncMemory, saver: Any) -> Any:
        builder = StateGraph(MessagesState)
        builder.add_node("tools", tool_node(memory, SCOPE))
        builder.add_edge(START, "tools")
        builder.add_edge("tools", END)
        return builder.compile(checkpointer=saver)

    facade = {"embedder": None, "checkpoint_interval": None}
    with (
        memseal.open_sync(tmp_path / "data", **facade) as memory,
        SqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver,
    ):
        first = _results(graph_on(memory, saver).invoke({"messages": [ask]}, config))
        size = memory.ledger.size()
    with (
        memseal.open_sync(tmp_path / "data", **facade) as memory,
        SqliteSaver.from_conn_string(str(tmp_path / "cp.sqlite")) as saver,
    ):
        # The node run again on the same calls (a re-executed node): memos, nothing new.
        again = _results(graph_on(memory, saver).invoke({"messages": [ask]}, config))
        assert again == first and memory.ledger.size() == size
        memory.ledger.verify(memory.trust_root)


@pytest.mark.usefixtures("_store")
async def test_toolnodes_own_arguments_pass_through(tmp_path: Path) -> None:
    from langchain_core.tools import tool

    @tool
    def weather(city: str) -> str:
        """The host's own tool, served beside the memory tools (not recorded)."""
        return f"sunny in {city}"

    async with _open(tmp_path / "data") as memory:
        node = tool_node(memory, SCOPE, name="memory", tools=[weather], handle_tool_errors=True)
        assert node.name == "memory"
        assert set(node.tools_by_name) == {
            *(s.name for s in memory.tools(SCOPE).specs()),
            "weather",
        }
        builder = StateGraph(MessagesState)
        builder.add_node("memory", node)
        builder.add_edge(START, "memory")
        builder.add_edge("memory", END)
        graph = builder.compile()
        ask = AIMessage(
            content="",
            tool_calls=[
                _call("weather", {"city": "Oslo"}, "w1"),
                _call("memory_list", {}, "m1"),
                _call("memory_list", {}, "k" * 201),
            ],
        )
        state = await graph.ainvoke({"messages": [ask]}, {"configurable": {"thread_id": "t"}})
        got = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
        assert got["w1"].content == "sunny in Oslo"
        assert got["m1"].status == "success"
        # handle_tool_errors=True is ToolNode's: the refused key comes back as an error message.
        assert got["k" * 201].status == "error" and "`key`" in str(got["k" * 201].content)
        assert await _per_key(memory, "t") == {"m1": 1}
