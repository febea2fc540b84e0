"""Keyed calls: a call carrying the id its model gave the tool call resumes by that id.

A host that resumes from its own saved state (LangGraph's checkpointer, the
agent SDKs' sessions) re-issues only some calls, in its own order, and may
re-execute a node in the same process. Keyed by the tool-call id, each logical
call is recorded once: a recorded key returns its memo in any order, an
unknown key is a new live step, the same key with another call diverges
naming the key, and no call ever gets another call's memo. Every test runs on
each store; the first resumes, in this process, a run a child process recorded.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal import InvalidRequest, ReplayDivergence, ToolScope
from memseal.ledger.keys import key_history
from memseal.memory import Memory
from memseal.replay.evidence.bundle import encode_bundle, export_bundle, verify_bundle
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
STORE = {"learning": {"text": "the deploy key lives in vault path ops/deploy"}}
FETCH = {"query": "deploy key"}
ROOT = Path(__file__).resolve().parents[2]

Opener = Callable[[], AbstractAsyncContextManager[Memory]]

CHILD = """
import asyncio, json, sys
import memseal
from memseal import ToolScope

async def main() -> None:
    folder, store = sys.argv[1], sys.argv[2] or None
    scope = ToolScope.placed_at("team:acme/agent:writer")
    async with memseal.open(folder, store=store, embedder=None, checkpoint_interval=None) as m:
        async with m.run("thread-1", scope) as run:
            out = [
                await run.call("memory_fetch", {"query": "deploy key"}, key="call_fetch_0"),
                await run.call("memory_store", json.loads(sys.argv[3]), key="call_store"),
                await run.call("memory_fetch", {"query": "deploy key"}, key="call_fetch_1"),
            ]
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.fixture
def opener(tmp_path: Path, store_url: str | None) -> Opener:
    def open_() -> AbstractAsyncContextManager[Memory]:
        return memseal.open(
            tmp_path / "d", store=store_url, embedder=None, checkpoint_interval=None
        )

    return open_


@pytest.fixture
async def memory(opener: Opener) -> AsyncIterator[Memory]:
    async with opener() as opened:
        yield opened


async def _python(*args: str, cwd: Path = ROOT) -> tuple[int, str, str]:
    """Run this Python in a child process: (exit code, stdout, stderr)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), timeout=120)
    assert child.returncode is not None
    return child.returncode, out.decode(), err.decode()


async def _calls(memory: Memory, run_id: str) -> list[Any]:
    """The run's signed tool-call bodies, in log order."""
    found = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            call = decode_tool_call(bytes(entry.body))
            if call.run_id == run_id:
                found.append(call)
    return found


async def _record_fetch_then_store(opener: Opener) -> list[Any]:
    async with opener() as memory, memory.run("thread-1", SCOPE) as run:
        return [
            await run.call("memory_fetch", FETCH, key="call_fetch_0"),
            await run.call("memory_store", STORE, key="call_store"),
        ]


async def test_resume_in_a_new_process_with_keys_in_another_order_returns_each_memo_once(
    tmp_path: Path, store_url: str | None, opener: Opener
) -> None:
    code, out, err = await _python(
        "-c", CHILD, str(tmp_path / "d"), store_url or "", json.dumps(STORE), cwd=ROOT
    )
    assert code == 0, err
    before = json.loads(out)
    assert before[0]["hits"] == [] and len(before[2]["hits"]) == 1
    async with opener() as memory:
        size = await memory.ledger.size()
        async with memory.run("thread-1", SCOPE) as run:
            # The resuming host re-issues the calls in its own order: each gets its own memo.
            last = await run.call("memory_fetch", FETCH, key="call_fetch_1")
            stored = await run.call("memory_store", STORE, key="call_store")
            first = await run.call("memory_fetch", FETCH, key="call_fetch_0")
            assert [first, stored, last] == before
            assert await memory.ledger.size() == size  # nothing written twice
            # A key never seen is a new live step, after the recorded ones.
            fresh = await run.call("memory_fetch", FETCH, key="call_fetch_2")
        assert len(fresh["hits"]) == 1
        calls = await _calls(memory, "thread-1")
        assert [(c.step, c.key) for c in calls] == [
            (0, "call_fetch_0"),
            (1, "call_store"),
            (2, "call_fetch_1"),
            (3, "call_fetch_2"),
        ]
        await memory.verify()


async def test_reissued_keyed_call_with_step_0s_arguments_gets_its_own_result(
    opener: Opener,
) -> None:
    before = await _record_fetch_then_store(opener)
    assert before[0]["hits"] == []  # step 0 ran before the store
    async with opener() as memory, memory.run("thread-1", SCOPE) as run:
        # The host resumes after its checkpoint: its next call has step 0's arguments
        # but another id. It is that call, live: the stored memory is found.
        fetched = await run.call("memory_fetch", FETCH, key="call_fetch_after")
        assert [h["text"] for h in fetched["hits"]] == [STORE["learning"]["text"]]
        # Step 0's own id still gets step 0's result.
        assert await run.call("memory_fetch", FETCH, key="call_fetch_0") == before[0]


async def test_unkeyed_call_at_a_keyed_step_diverges_instead_of_taking_its_memo(
    opener: Opener,
) -> None:
    await _record_fetch_then_store(opener)
    async with opener() as memory:
        size = await memory.ledger.size()
        async with memory.run("thread-1", SCOPE) as run:
            with pytest.raises(ReplayDivergence, match="step 0") as raised:
                await run.call("memory_fetch", FETCH)
        assert any(line.startswith("key:") for line in raised.value.diff)
        assert await memory.ledger.size() == size


async def test_same_key_with_other_arguments_or_tool_diverges_naming_the_key(
    opener: Opener,
) -> None:
    await _record_fetch_then_store(opener)
    async with opener() as memory:
        size = await memory.ledger.size()
        async with memory.run("thread-1", SCOPE) as run:
            with pytest.raises(ReplayDivergence) as raised:
                await run.call("memory_fetch", {"query": "vault"}, key="call_fetch_0")
            message = str(raised.value)
            assert "key 'call_fetch_0'" in message
            assert "'deploy key'" in message and "'vault'" in message  # both calls
            with pytest.raises(ReplayDivergence, match=r"key 'call_store'.*memory_list"):
                await run.call("memory_list", {}, key="call_store")
            # In this live run too: the same key with other arguments is refused.
            await run.call("memory_list", {}, key="call_list")
            with pytest.raises(ReplayDivergence, match="key 'call_list'"):
                await run.call("memory_list", {"limit": 1}, key="call_list")
        assert await memory.ledger.size() == size + 1  # only call_list's one entry


async def test_same_run_reissue_of_a_key_or_a_step_returns_the_memo_not_a_second_entry(
    memory: Memory,
) -> None:
    async with memory.run("thread-1", SCOPE) as run:
        first = await run.call("memory_store", STORE, key="call_store")
        size = await memory.ledger.size()
        # A host re-executing a node (LangGraph after an interrupt) calls it again.
        assert await run.call("memory_store", STORE, key="call_store") == first
        # Issued twice at once, a key still runs once.
        both = await asyncio.gather(
            run.call("memory_fetch", FETCH, key="call_twice"),
            run.call("memory_fetch", FETCH, key="call_twice"),
        )
        assert both[0] == both[1]
        # A host numbering its own steps re-issues a recorded step: its memo.
        listed = await run.call_at(2, "memory_list", {})
        assert await run.call_at(2, "memory_list", {}) == listed
        assert await memory.ledger.size() == size + 2
        # The same step with another call in the same run is refused, not superseded.
        with pytest.raises(ReplayDivergence, match="step 2"):
            await run.call_at(2, "memory_list", {"limit": 1})
    steps = Counter(c.step for c in await _calls(memory, "thread-1"))
    assert steps == {0: 1, 1: 1, 2: 1}
    await memory.verify()


@pytest.mark.parametrize(
    ("key", "says"),
    [
        (5, "must be a string"),
        (b"call_1", "must be a string"),
        ("", "1 to 200 characters"),
        ("x" * 201, "1 to 200 characters"),
        ("call\n1", "printable"),
    ],
)
async def test_bad_key_is_an_invalid_request_naming_key_and_writes_nothing(
    memory: Memory, key: Any, says: str
) -> None:
    async with memory.run("thread-1", SCOPE) as run:
        await run.call("memory_list", {})
        size = await memory.ledger.size()
        with pytest.raises(InvalidRequest, match=f"`key`.*{says}"):
            await run.call("memory_store", STORE, key=key)
        with pytest.raises(InvalidRequest, match="`key`"):
            await run.call_at(1, "memory_store", STORE, key=key)
        assert await memory.ledger.size() == size
        assert run.next_step == 1  # no step consumed
    assert await memory.ledger.size() == size


async def test_a_200_character_key_is_accepted(memory: Memory) -> None:
    async with memory.run("thread-1", SCOPE) as run:
        first = await run.call("memory_list", {}, key="k" * 200)
        assert await run.call("memory_list", {}, key="k" * 200) == first


async def test_strict_replays_keys_in_any_order_and_refuses_an_unknown_key(
    opener: Opener,
) -> None:
    before = await _record_fetch_then_store(opener)
    async with opener() as memory:
        async with memory.run("thread-1", SCOPE, mode="strict") as run:
            assert await run.call("memory_store", STORE, key="call_store") == before[1]
            assert await run.call("memory_fetch", FETCH, key="call_fetch_0") == before[0]
            with pytest.raises(ReplayDivergence, match="key 'call_new' not recorded"):
                await run.call("memory_fetch", FETCH, key="call_new")
        # Closing a strict run with a keyed step never replayed fails, as for steps.
        with pytest.raises(ReplayDivergence, match="never replayed"):
            async with memory.run("thread-1", SCOPE, mode="strict") as run:
                await run.call("memory_store", STORE, key="call_store")


async def test_call_at_with_a_key_recorded_at_another_step_diverges(opener: Opener) -> None:
    await _record_fetch_then_store(opener)
    async with opener() as memory, memory.run("thread-1", SCOPE) as run:
        with pytest.raises(ReplayDivergence, match="key 'call_store' is recorded at step 1"):
            await run.call_at(0, "memory_store", STORE, key="call_store")
        assert (await run.call_at(1, "memory_store", STORE, key="call_store"))["id"]


async def test_keyed_run_verifies_and_its_bundle_keeps_the_keys(
    tmp_path: Path, store_url: str | None, opener: Opener
) -> None:
    await _record_fetch_then_store(opener)
    async with opener() as memory:
        async with memory.run("thread-1", SCOPE) as run:
            await run.call("memory_fetch", FETCH, key="call_fetch_1")
        await memory.verify()
        bundle = await export_bundle(memory.ledger, key_history(memory.folder), "thread-1")
        verified = verify_bundle(bundle, memory.trust_root)
        trust = memory.trust_root
    assert [(c.call.step, c.call.key) for c in verified.calls] == [
        (0, "call_fetch_0"),
        (1, "call_store"),
        (2, "call_fetch_1"),
    ]
    path = tmp_path / "thread-1.bundle.json"
    path.write_bytes(encode_bundle(bundle))
    for target in (str(path), store_url or str(tmp_path / "d")):
        code, out, err = await _python("-m", "memseal.cli", "verify", target, "--trust", trust)
        assert code == 0, err
        assert out.startswith("ok")


async def test_unkeyed_calls_keep_their_bytes_and_numbering(memory: Memory) -> None:
    async with memory.run("thread-1", SCOPE) as run:
        await run.call("memory_list", {})
        await run.call("memory_list", {}, key="call_1")
        await run.call("memory_list", {})
    calls = await _calls(memory, "thread-1")
    assert [(c.step, c.key) for c in calls] == [
        (0, msgspec.UNSET),
        (1, "call_1"),
        (2, msgspec.UNSET),
    ]
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL and decode_tool_call(bytes(entry.body)).step != 1:
            assert b'"key"' not in bytes(entry.body)


def _openai_call(call_id: str, name: str, arguments: dict[str, Any]) -> Any:
    from openai.types.chat import ChatCompletionMessageToolCall

    return ChatCompletionMessageToolCall.model_validate(
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
    )


def _anthropic_call(call_id: str, name: str, arguments: dict[str, Any]) -> Any:
    from anthropic.types import ToolUseBlock

    return ToolUseBlock(id=call_id, type="tool_use", name=name, input=arguments)


async def test_toolset_given_the_sdks_tool_calls_keys_them_by_their_ids(opener: Opener) -> None:
    async with opener() as memory, memory.run("thread-1", SCOPE) as run:
        tools = run.toolset()
        fetched = await tools.call(_openai_call("call_f0", "memory_fetch", FETCH))
        await tools.call(_anthropic_call("toolu_s", "memory_store", STORE))
        await tools.call({"name": "memory_list", "args": {}, "id": "lc_1", "type": "tool_call"})
        await tools.call(
            {
                "type": "function_call",
                "id": "fc_item",
                "call_id": "call_r",
                "name": "memory_list",
                "arguments": "{}",
            }
        )
    async with opener() as memory:
        size = await memory.ledger.size()
        async with memory.run("thread-1", SCOPE) as run:
            tools = run.toolset()
            # Resumed in another order, as dicts this time: each id gets its own memo.
            again = await tools.call(
                {
                    "id": "call_f0",
                    "type": "function",
                    "function": {"name": "memory_fetch", "arguments": json.dumps(FETCH)},
                }
            )
            assert again == fetched
            stored = {"type": "tool_use", "id": "toolu_s", "name": "memory_store", "input": STORE}
            assert not (await tools.call(stored)).startswith("error")
            assert await memory.ledger.size() == size
            # The same id with other arguments: the divergence is raised, not given as text.
            with pytest.raises(ReplayDivergence, match="key 'call_f0'"):
                await tools.call(_openai_call("call_f0", "memory_fetch", {"query": "x"}))
            # A model's bad id is text the model reads, and nothing is written.
            text = await tools.call(_openai_call("x" * 201, "memory_list", {}))
            assert text.startswith("error:") and "`key`" in text
            with pytest.raises(InvalidRequest, match="`tool_call`"):
                await tools.call(object())
        assert await memory.ledger.size() == size
        calls = await _calls(memory, "thread-1")
        assert [c.key for c in calls] == ["call_f0", "toolu_s", "lc_1", "call_r"]
