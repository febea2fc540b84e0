"""Pydantic AI resuming a memseal run: stale memos, calls run twice, keys bent.

A Pydantic AI host resumes from a saved ``message_history``: the calls it holds
answers for are never re-issued, a call it was left waiting on is, and the model
goes on with new calls. Numbered by position, the first new call took step 0's
memo (a fetch from before a store returned 0 hits, silently). Keyed by the
``tool_call_id``, each test here holds one of those holes shut, on SQLite and
PostgreSQL, with a scripted ``FunctionModel`` (no network, no LLM).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import memseal
from memseal.memory import Memory
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call
from memseal.tools import ToolScope

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
RUN = "thread-7"
FETCH = {"query": "deploy key", "mode": "exact"}
STORE = {"learning": {"text": "the deploy key lives in vault path ops/deploy"}}


def turns(*responses: list[ToolCallPart]) -> FunctionModel:
    """A model giving ``responses`` in order, one per turn counted in the history, then text."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(isinstance(message, ModelResponse) for message in messages)
        if made < len(responses):
            return ModelResponse(parts=list(responses[made]))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


def call(name: str, args: Any, call_id: Any) -> ToolCallPart:
    return ToolCallPart(name, args, tool_call_id=call_id)


async def run_agent(
    memory: Memory, model: FunctionModel, history: list[ModelMessage] | None = None
) -> list[ModelMessage]:
    async with memory.run(RUN, SCOPE) as run:
        tools = FunctionToolset(run.toolset().to_pydantic_ai())
        prompt = "go" if history is None else None
        result = await Agent(model).run(prompt, message_history=history, toolsets=[tools])
        return result.all_messages()


def returns(messages: list[ModelMessage]) -> dict[Any, ToolReturnPart]:
    return {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def hits(part: ToolReturnPart) -> list[str]:
    return [hit["text"] for hit in json.loads(str(part.content))["hits"]]


async def keys(memory: Memory) -> list[str | None]:
    """The key of each signed call of the run, in log order."""
    found: list[str | None] = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            signed = decode_tool_call(bytes(entry.body))
            if signed.run_id == RUN:
                found.append(signed.key if isinstance(signed.key, str) else None)
    return found


def until_pending(messages: list[ModelMessage], call_id: str) -> list[ModelMessage]:
    """The history as saved right before the answer to ``call_id`` (the process died then)."""
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse) and any(
            isinstance(part, ToolCallPart) and part.tool_call_id == call_id
            for part in message.parts
        ):
            return messages[: i + 1]
    raise AssertionError(f"no call {call_id}")


async def test_a_resumed_historys_next_fetch_equal_to_step_0s_gets_a_live_result_not_its_memo(
    memory: Memory,
) -> None:
    first = await run_agent(
        memory, turns([call("memory_fetch", FETCH, "c0")], [call("memory_store", STORE, "c1")])
    )
    assert hits(returns(first)["c0"]) == []
    # The resumed host re-issues nothing it holds answers for; the model's next call has
    # step 0's arguments under a new id: it runs live and sees the store.
    model = turns(*([[]] * 3), [call("memory_fetch", FETCH, "c2")])
    resumed = await run_agent(memory, model, history=[*first, _user("and now?")])
    assert hits(returns(resumed)["c2"]) == [STORE["learning"]["text"]]
    assert await keys(memory) == ["c0", "c1", "c2"]


def _user(text: str) -> ModelRequest:
    return ModelRequest.user_text_prompt(text)


async def test_the_call_a_saved_history_was_left_waiting_on_answers_from_its_memo_not_twice(
    memory: Memory,
) -> None:
    first = await run_agent(
        memory, turns([call("memory_fetch", FETCH, "c0")], [call("memory_store", STORE, "c1")])
    )
    size = await memory.ledger.size()
    # Killed after c1 returned, before its answer was saved: the resume re-issues c1.
    resumed = await run_agent(memory, turns(), history=until_pending(first, "c1"))
    assert returns(resumed)["c1"].content == returns(first)["c1"].content
    assert json.loads(str(returns(resumed)["c1"].content))["replayed"] is False
    assert await memory.ledger.size() == size  # nothing written twice
    assert await keys(memory) == ["c0", "c1"]


async def test_parallel_calls_left_waiting_in_a_saved_history_each_answer_from_their_own_memo(
    memory: Memory,
) -> None:
    parallel = [
        call("memory_fetch", FETCH, "p0"),
        call("memory_store", STORE, "p1"),
        call("memory_list", {}, "p2"),
        call("memory_fetch", {"query": "vault", "mode": "exact"}, "p3"),
    ]
    first = await run_agent(memory, turns(parallel))
    size = await memory.ledger.size()
    resumed = await run_agent(memory, turns(), history=until_pending(first, "p0"))
    # Pydantic AI runs them at once and in any order: each id finds its own memo.
    before, after = returns(first), returns(resumed)
    assert {k: after[k].content for k in before} == {k: before[k].content for k in before}
    assert await memory.ledger.size() == size
    assert sorted(map(str, await keys(memory))) == ["p0", "p1", "p2", "p3"]


async def test_a_tool_call_id_reused_with_other_arguments_is_a_divergence_naming_the_key(
    memory: Memory,
) -> None:
    first = await run_agent(memory, turns([call("memory_fetch", FETCH, "c0")]))
    size = await memory.ledger.size()
    bent = {"query": "vault", "mode": "exact"}
    model = turns(*([[]] * 2), [call("memory_fetch", bent, "c0")])
    with pytest.raises(memseal.ReplayDivergence, match="key 'c0'"):
        await run_agent(memory, model, history=[*first, _user("again")])
    assert await memory.ledger.size() == size  # refused loudly, nothing written


@pytest.mark.parametrize(
    "bad_id",
    [7, "k" * 201, ""],
    ids=["not-a-string", "over-200-characters", "empty"],
)
async def test_a_tool_call_id_that_cannot_be_a_key_is_refused_naming_key_and_writes_nothing(
    memory: Memory, bad_id: Any
) -> None:
    size = await memory.ledger.size()
    messages = await run_agent(
        memory,
        turns([call("memory_store", STORE, bad_id)], [call("memory_list", {}, "ok")]),
    )
    refused = returns(messages)[bad_id]
    assert refused.outcome == "failed"
    assert str(refused.content).startswith("error: `key` must"), refused.content
    # The store never ran; the next call did, under its own key.
    assert await keys(memory) == ["ok"]
    assert await memory.ledger.size() > size
    assert json.loads(str(returns(messages)["ok"].content)) == {"items": []}
