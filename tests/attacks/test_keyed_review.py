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

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from _runs_support import ServerThread

from memseal import ReplayDivergence, ToolScope
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.keys import key_history
from memseal.memory import Memory
from memseal.replay.evidence.bundle import export_bundle, verify_bundle
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call

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


async def test_new_unkeyed_call_after_a_resumed_runs_keyed_calls_is_live_not_a_divergence(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", FETCH, key="call_a")
        await run.call("memory_fetch", {"query": "b"}, key="call_b")
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", {"query": "b"}, key="call_b")
        await run.call("memory_fetch", FETCH, key="call_a")
        assert run.next_step == 2  # the keyed steps re-issued are no unkeyed call's
        fresh = await run.call("memory_fetch", {"query": "zz"})
        assert fresh["hits"] == []
    assert await _steps(memory, "t1") == {0: 1, 1: 1, 2: 1}
    # Before its keyed calls are re-issued, an unkeyed call at a keyed step still diverges:
    # a host that dropped its keys fails loudly, never records each call a second time.
    size = await memory.ledger.size()
    async with memory.run("t1", SCOPE) as run:
        with pytest.raises(ReplayDivergence, match="step 0"):
            await run.call("memory_fetch", FETCH)
    assert await memory.ledger.size() == size
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


@pytest.fixture
def server(tmp_path: Path, store_url: str | None) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "svc", store=store_url) as running:
        yield running


async def test_one_key_at_once_over_http_and_mcp_stores_once_and_answers_one_result(
    server: ServerThread,
) -> None:
    from test_mcp_service import _http, _text

    token = server.token("agent", "team:k/agent:x")
    headers = {"X-Memseal-Run": "both", "X-Memseal-Key": "call_1"}
    body = {"learning": {"text": "stored once over two transports"}}

    def over_http() -> Any:
        with server.client(token) as c:
            r = c.post("/v1/tools/memory_store", json=body, headers=headers)
            assert r.status_code == 200, r.text
            assert r.json()["step"] == 0
            return r.json()["result"]

    async with _http(server, token, run="both") as client:

        async def over_mcp() -> Any:
            done = await client.call_tool("memory_store", body, meta={"memseal/key": "call_1"})
            assert not done.is_error, _text(done)
            return json.loads(_text(done))

        results = await asyncio.gather(
            *(asyncio.to_thread(over_http) for _ in range(4)), *(over_mcp() for _ in range(4))
        )
    assert len({json.dumps(r, sort_keys=True) for r in results}) == 1
    with server.client(token) as c:
        listed = c.post("/v1/tools/memory_list", json={}).json()["result"]
        run = c.get("/v1/runs/both").json()
    assert run["recorded_steps"] == 1
    assert sum(1 for i in listed["items"] if "two transports" in json.dumps(i)) == 1


def test_a_key_and_an_explicit_step_that_disagree_over_http_is_a_409_and_writes_nothing(
    server: ServerThread,
) -> None:
    token = server.token("agent", "team:k/agent:y")
    run = {"X-Memseal-Run": "steps"}
    with server.client(token) as c:
        assert c.post("/v1/tools/memory_fetch", json=FETCH, headers=run).json()["step"] == 0
        keyed = {**run, "X-Memseal-Key": "call_1"}
        assert c.post("/v1/tools/memory_fetch", json=FETCH, headers=keyed).json()["step"] == 1
        for step in ("0", "2"):
            r = c.post(
                "/v1/tools/memory_fetch",
                json=FETCH,
                headers={**keyed, "X-Memseal-Step": step},
            )
            assert r.status_code == 409, r.text
            assert "call_1" in r.text or "gap" in r.text
        # A key that reads as a step number is a key, not step 0.
        r = c.post("/v1/tools/memory_fetch", json=FETCH, headers={**run, "X-Memseal-Key": "0"})
        assert r.json()["step"] == 2
        assert c.get("/v1/runs/steps").json()["recorded_steps"] == 3


async def test_keys_that_look_alike_are_other_keys_never_another_calls_memo(
    memory: Memory,
) -> None:
    composed, decomposed = "call_\u00e9", "call_e\u0301"  # NFC and NFD of one text
    async with memory.run("t1", SCOPE) as run:
        before = await run.call("memory_fetch", FETCH, key=composed)
        await run.call("memory_store", STORE, key="store")
        # Compared code point for code point: each look-alike is its own live call.
        for other in (decomposed, "CALL_\u00e9", f" {composed}", f"{composed} "):
            fresh = await run.call("memory_fetch", FETCH, key=other)
            assert fresh != before and len(fresh["hits"]) == 1
        assert await run.call("memory_fetch", FETCH, key=composed) == before
        size = await memory.ledger.size()
        for invisible in ("call\u200b_\u00e9", "call\u00a0e", "call\u2028e", "call\ufeffe"):
            with pytest.raises(InvalidRequest, match="`key`"):
                await run.call("memory_fetch", FETCH, key=invisible)
        assert await memory.ledger.size() == size
    assert await _steps(memory, "t1") == dict.fromkeys(range(6), 1)


async def test_langgraph_toolnode_parallel_calls_with_one_id_and_two_calls_store_once(
    memory: Memory,
) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    def store(text: str, call_id: str) -> dict[str, Any]:
        args = {"learning": {"text": text}}
        return {"name": "memory_store", "args": args, "id": call_id, "type": "tool_call"}

    async with memory.run("t1", SCOPE) as run:
        graph = StateGraph(MessagesState)
        graph.add_node("tools", ToolNode(run.toolset().to_langchain()))
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        app = graph.compile()
        same = AIMessage(content="", tool_calls=[store("once", "dup"), store("once", "dup")])
        out = await app.ainvoke({"messages": [same]})
        first, second = out["messages"][1:]
        assert first.content == second.content  # one store, its memo for the duplicate
        other = AIMessage(content="", tool_calls=[store("one", "dup2"), store("two", "dup2")])
        with pytest.raises(ReplayDivergence, match="key 'dup2' was recorded with another"):
            await app.ainvoke({"messages": [other]})
    assert await _steps(memory, "t1") == {0: 1, 1: 1}
    listed = await memory.call("memory_list", {}, scope=SCOPE)
    texts = sorted(i["text"] for i in listed[1]["items"])
    assert texts in (["once", "one"], ["once", "two"])
    await memory.verify(deep=True)


async def test_a_bundle_whose_call_keys_are_rewritten_or_swapped_fails_verification(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_store", STORE, key="call_a")
        await run.call("memory_fetch", FETCH, key="call_b")
    bundle = await export_bundle(memory.ledger, key_history(memory.folder), "t1")
    verify_bundle(bundle, memory.trust_root)

    def rewrite(swap: dict[bytes, bytes]) -> Any:
        entries = []
        for entry in bundle.entries:
            leaf = entry.leaf
            for old, new in swap.items():
                if old in leaf:
                    leaf = leaf.replace(old, new)
                    break
            entries.append(msgspec.structs.replace(entry, leaf=leaf))
        assert entries != list(bundle.entries)
        return msgspec.structs.replace(bundle, entries=tuple(entries))

    renamed = {b'"key":"call_b"': b'"key":"call_z"'}
    swapped = {b'"key":"call_a"': b'"key":"call_b"', b'"key":"call_b"': b'"key":"call_a"'}
    for swap in (renamed, swapped):
        with pytest.raises(VerificationError):
            verify_bundle(rewrite(swap), memory.trust_root)


async def test_one_key_in_two_runs_is_two_calls_each_with_its_own_memo(memory: Memory) -> None:
    async with memory.run("t1", SCOPE) as first:
        before = await first.call("memory_fetch", FETCH, key="call_1")
    async with memory.run("t2", SCOPE) as second:
        await second.call("memory_store", STORE)
        after = await second.call("memory_fetch", FETCH, key="call_1")
    assert before["hits"] == [] and len(after["hits"]) == 1
    other = ToolScope.placed_at("team:other/agent:x")
    async with memory.run("t3", other) as third:
        assert (await third.call("memory_fetch", FETCH, key="call_1"))["hits"] == []
    async with memory.run("t1", SCOPE) as first, memory.run("t2", SCOPE) as second:
        assert await first.call("memory_fetch", FETCH, key="call_1") == before
        assert await second.call("memory_fetch", FETCH, key="call_1") == after
