"""Keyed calls, reviewed hostile: unkeyed neighbours of keyed calls, and keys with no run.

A run may mix keyed and unkeyed calls. Re-run with its keyed calls in
another order (a host resuming from its own state), an unkeyed call must get
its own step's memo, never the memo of the unkeyed call after it (a stale
result returned as current), and a new unkeyed call is a live step, not a
divergence at a keyed step. A key on unbound tools (a fresh one-shot run per
call, which nothing can resume) is refused as HTTP and MCP refuse it, while
the adapters that pass the SDK's ids themselves keep working. Every test
runs on each store.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from memseal import ReplayDivergence, ToolScope
from memseal.ledger.errors import InvalidRequest
from memseal.memory import Memory
from memseal.replay.calls import TOOL_CALL, decode_tool_call

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
STORE = {"learning": {"text": "the report is due at 6"}}
FETCH = {"query": "report"}


async def _steps(memory: Memory, run_id: str) -> Counter[int]:
    """How many signed calls each step of the run has (superseded ones included)."""
    found: Counter[int] = Counter()
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            call = decode_tool_call(bytes(entry.body))
            if call.run_id == run_id:
                found[call.step] += 1
    return found


async def test_unkeyed_fetch_rerun_after_its_keyed_store_gets_its_own_memo_not_the_next_ones(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        before = await run.call("memory_fetch", FETCH)  # step 0: nothing stored yet
        await run.call("memory_store", STORE, key="call_store")
        after = await run.call("memory_fetch", FETCH)  # step 2: the stored fact
    assert before["hits"] == [] and len(after["hits"]) == 1
    # The host resumes from its own state and re-issues the keyed store first.
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_store", STORE, key="call_store")
        assert await run.call("memory_fetch", FETCH) == before
        assert await run.call("memory_fetch", FETCH) == after
    assert await _steps(memory, "t1") == {0: 1, 1: 1, 2: 1}
    await memory.verify(deep=True)


async def test_new_unkeyed_call_in_a_resumed_keyed_run_is_live_not_a_divergence_at_step_0(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", FETCH, key="call_a")
        await run.call("memory_fetch", {"query": "b"}, key="call_b")
    async with memory.run("t1", SCOPE) as run:
        assert run.next_step == 2  # no keyed step is an unkeyed call's
        fresh = await run.call("memory_fetch", {"query": "zz"})
        assert fresh["hits"] == []
        await run.call("memory_fetch", {"query": "b"}, key="call_b")
        await run.call("memory_fetch", FETCH, key="call_a")
    assert await _steps(memory, "t1") == {0: 1, 1: 1, 2: 1}
    await memory.verify(deep=True)


async def test_strict_rerun_of_a_keyed_run_with_an_extra_unkeyed_call_fails_and_writes_nothing(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", FETCH, key="call_a")
    size = await memory.ledger.size()
    run = memory.run("t1", SCOPE, mode="strict")
    await run.call("memory_fetch", FETCH, key="call_a")
    with pytest.raises(ReplayDivergence, match="past the recorded end"):
        await run.call("memory_fetch", FETCH)
    await run.close(check=False)
    assert await memory.ledger.size() == size
    assert await _steps(memory, "t1") == {0: 1}


async def test_a_key_on_unbound_tools_is_refused_naming_key_and_writes_nothing(
    memory: Memory,
) -> None:
    tools = memory.tools(SCOPE)
    size = await memory.ledger.size()
    with pytest.raises(InvalidRequest, match="`key` needs a bound run"):
        await tools.call("memory_store", STORE, key="call_1")
    assert await memory.ledger.size() == size
    # Bound to a run, the same key is the run's.
    async with memory.tools(SCOPE, run_id="t1") as bound:
        await bound.call("memory_store", STORE, key="call_1")
        assert bound.last_call is not None and bound.last_call.step == 0


async def test_unbound_toolset_given_an_sdk_tool_call_runs_it_unkeyed(memory: Memory) -> None:
    toolset = memory.tools(SCOPE).toolset()
    call: dict[str, Any] = {
        "id": "call_abc",
        "type": "function",
        "function": {"name": "memory_fetch", "arguments": '{"query": "report"}'},
    }
    text = await toolset.call(call)
    assert not text.startswith("error:")
    assert toolset.last_call is not None and toolset.last_call.step == 0
    found = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            found.append(decode_tool_call(bytes(entry.body)))
    assert [c.run_id for c in found] == [toolset.last_call.run_id]
    assert all(not isinstance(c.key, str) for c in found)  # unkeyed: no key signed


async def test_revalidate_that_drops_or_swaps_a_steps_key_diverges_and_the_key_stays_once(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        first = await run.call("memory_fetch", FETCH, key="call_k")
        size = await memory.ledger.size()
        with pytest.raises(ReplayDivergence, match="recorded with key 'call_k'"):
            await run.call_at(0, "memory_fetch", FETCH, revalidate=True)
        with pytest.raises(ReplayDivergence, match="recorded with key 'call_k'"):
            await run.call_at(0, "memory_fetch", FETCH, revalidate=True, key="call_other")
        assert await memory.ledger.size() == size
        # The key still names its step: re-issued, its memo, never a second live step.
        assert await run.call("memory_fetch", FETCH, key="call_k") == first
        assert run.step_of("call_k") == 0
    async with memory.run("t1", SCOPE, mode="revalidate") as run:
        with pytest.raises(ReplayDivergence, match="recorded with key 'call_k'"):
            await run.call_at(0, "memory_fetch", FETCH)
    assert await _steps(memory, "t1") == {0: 1}
    await memory.verify(deep=True)


async def test_revalidate_of_a_key_with_other_arguments_diverges_naming_the_key(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", FETCH, key="call_k")
        with pytest.raises(ReplayDivergence, match="key 'call_k' was recorded with another"):
            await run.call("memory_fetch", {"query": "other"}, key="call_k", revalidate=True)
    async with memory.run("t1", SCOPE, mode="revalidate") as run:
        with pytest.raises(ReplayDivergence, match="key 'call_k' was recorded with another"):
            await run.call("memory_fetch", {"query": "other"}, key="call_k")
        # The same call revalidated is replaced once, at its own step.
        await run.call("memory_store", STORE)
        fresh = await run.call("memory_fetch", FETCH, key="call_k")
        assert len(fresh["hits"]) == 1 and run.step_of("call_k") == 0
    assert await _steps(memory, "t1") == {0: 2, 1: 1}
    await memory.verify(deep=True)
