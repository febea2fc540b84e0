"""The OpenAI Agents SDK's ways to resume, attacked: stale memos, reused ids, hostile ids.

Each test holds one way a resumed Agents SDK run could get a result that is not
its own call's: a new call id whose arguments equal a recorded call's handed
that call's memo (the stale result issue 23 found), a recorded id re-used for
another call and swallowed into the model's text instead of ending the run,
two equal calls of one reply collapsed into one memo, an approval resumed
from saved state running its call twice, a hostile id from the model. The model
is the SDK's scripted test model; every test runs on each store.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, UserError
from agents.run_state import RunState
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

import memseal
from memseal import ReplayDivergence
from memseal.memory import Memory
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
FETCH = {"query": "report", "mode": "exact"}
STORE = {"learning": {"text": "the nightly report goes out at 6am"}}
CONFIG = RunConfig(tracing_disabled=True)


async def _keys(memory: Memory, run_id: str) -> Counter[str | None]:
    """How many signed memory_tool_call entries each key of the run has."""
    found: Counter[str | None] = Counter()
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            call = decode_tool_call(bytes(entry.body))
            if call.run_id == run_id:
                found[call.key if isinstance(call.key, str) else None] += 1
    return found


def _outputs(result: Any) -> dict[str, str]:
    return {
        item["call_id"]: item["output"]
        for item in result.to_input_list()
        if item.get("type") == "function_call_output"
    }


def _agent(run: Any, script: list[Any], **options: Any) -> Agent[Any]:
    tools = run.toolset().to_openai_agents(**options)
    return Agent(name="writer", model=ScriptedModel(script), tools=tools)


async def test_a_new_call_id_with_step_0s_arguments_after_a_session_resume_is_never_its_memo(
    memory: Memory, tmp_path: Path
) -> None:
    session = SQLiteSession("t1", str(tmp_path / "session.db"))
    first = [
        [function_call("memory_fetch", FETCH, call_id="c0")],
        [function_call("memory_store", STORE, call_id="c1")],
        [assistant_message("noted")],
    ]
    async with memory.run("t1", SCOPE) as run:
        before = await Runner.run(_agent(run, first), "a", session=session, run_config=CONFIG)
    # The resumed process: the session keeps c0 and c1; the model asks for step 0's fetch again.
    again = [[function_call("memory_fetch", FETCH, call_id="c2")], [assistant_message("done")]]
    async with memory.run("t1", SCOPE) as run:
        after = await Runner.run(_agent(run, again), "b", session=session, run_config=CONFIG)
    assert json.loads(_outputs(before)["c0"])["hits"] == []
    hits = json.loads(_outputs(after)["c2"])["hits"]
    assert [hit["text"] for hit in hits] == [STORE["learning"]["text"]]  # live, not c0's memo
    assert await _keys(memory, "t1") == Counter({"c0": 1, "c1": 1, "c2": 1})
    session.close()


async def test_a_recorded_call_id_reused_for_another_call_ends_the_run_naming_the_key(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        script = [[function_call("memory_fetch", FETCH, call_id="c0")], [assistant_message("x")]]
        await Runner.run(_agent(run, script), "a", run_config=CONFIG)
    size = await memory.ledger.size()
    async with memory.run("t1", SCOPE) as run:
        other = [[function_call("memory_fetch", {"query": "vault"}, call_id="c0")]]
        # Raised out of Runner.run, never turned into text the model reads and works around:
        # the SDK wraps a tool's exception in its UserError, the divergence as its cause.
        with pytest.raises(UserError) as failed:
            await Runner.run(_agent(run, other), "a", run_config=CONFIG)
    cause = failed.value.__cause__
    assert isinstance(cause, ReplayDivergence) and "key 'c0'" in str(cause)
    assert await memory.ledger.size() == size


async def test_two_equal_calls_in_one_reply_are_two_calls_each_signed_once(
    memory: Memory,
) -> None:
    reply = [
        function_call("memory_store", STORE, call_id="p0"),
        function_call("memory_store", STORE, call_id="p1"),
    ]
    async with memory.run("t1", SCOPE) as run:
        first = await Runner.run(
            _agent(run, [reply, [assistant_message("x")]]), "a", run_config=CONFIG
        )
    results = [json.loads(text) for text in _outputs(first).values()]
    # Two live calls (the SDK runs them at once): the second store of the same text finds the
    # first one's item, which its own result says; neither got the other's memo.
    assert sorted(result["replayed"] for result in results) == [False, True]
    assert len({result["id"] for result in results}) == 1
    async with memory.run("t1", SCOPE) as run:  # re-run from the start: both memos
        again = await Runner.run(
            _agent(run, [reply, [assistant_message("x")]]), "a", run_config=CONFIG
        )
    assert _outputs(again) == _outputs(first)
    assert await _keys(memory, "t1") == Counter({"p0": 1, "p1": 1})


async def test_an_approval_resumed_from_saved_state_in_a_new_run_runs_its_call_once(
    memory: Memory,
) -> None:
    script = [[function_call("memory_store", STORE, call_id="s0")], [assistant_message("stored")]]
    async with memory.run("t1", SCOPE) as run:
        agent = _agent(run, script, needs_approval=True)
        paused = await Runner.run(agent, "store it", run_config=CONFIG)
        assert [getattr(item.raw_item, "call_id", None) for item in paused.interruptions] == ["s0"]
        saved = paused.to_state().to_json()
    assert await _keys(memory, "t1") == Counter()  # nothing ran before the approval
    # A new process: the state from its file, approved, resumed; then resumed once more.
    for _ in range(2):
        async with memory.run("t1", SCOPE) as run:
            agent = _agent(run, script[1:], needs_approval=True)
            state = await RunState.from_json(agent, saved)
            for item in state.get_interruptions():
                state.approve(item)
            done = await Runner.run(agent, state, run_config=CONFIG)
            assert done.final_output == "stored"
    assert await _keys(memory, "t1") == Counter({"s0": 1})


# (An empty id never reaches a tool: the SDK refuses it first, with ModelBehaviorError.)
@pytest.mark.parametrize("bad", ["k" * 201, "tab\tkey"])
async def test_a_hostile_call_id_from_the_model_is_an_error_text_naming_key_and_writes_nothing(
    memory: Memory, bad: str
) -> None:
    script = [[function_call("memory_store", STORE, call_id=bad)], [assistant_message("x")]]
    async with memory.run("t1", SCOPE) as run:
        size = await memory.ledger.size()
        result = await Runner.run(_agent(run, script), "a", run_config=CONFIG)
    assert result.final_output == "x"  # the model read the error; the run went on
    text = _outputs(result)[bad]
    assert text.startswith("error: `key`"), text
    assert await memory.ledger.size() == size


async def test_a_call_id_that_is_not_a_string_is_an_error_naming_key_and_writes_nothing(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        size = await memory.ledger.size()
        store = next(t for t in run.toolset().to_openai_agents() if t.name == "memory_store")
        arguments = json.dumps(STORE)
        for bad in (7, ["c0"], {"id": "c0"}):
            context = ToolContext(
                context=None, tool_name=store.name, tool_call_id=bad, tool_arguments=arguments
            )
            text = await store.on_invoke_tool(context, arguments)
            assert text.startswith("error: `key`"), text
    assert await memory.ledger.size() == size
