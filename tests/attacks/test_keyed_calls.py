"""Keyed calls under attack: forks, a key or a step in flight twice, cancellation, lost commits.

Each test holds one hole an adversarial review found in keyed calls: a stale
memo returned as current after a fork, a key or a step run live twice (two
current calls, a bricked run), a cancelled call leaving a gap or a third live
step. Every test runs on each store and ends with the run verifying.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal import ReplayDivergence, ToolScope
from memseal.ledger.errors import Conflict, StorageError
from memseal.ledger.keys import key_history
from memseal.memory import Memory
from memseal.replay.evidence.bundle import export_bundle, verify_bundle
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
STORE = {"learning": {"text": "the report is due at 6"}}
FETCH = {"query": "report"}

Opener = Callable[[], AbstractAsyncContextManager[Memory]]


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


async def _steps(memory: Memory, run_id: str = "t1") -> Counter[int]:
    """How many signed calls each step of the run has (superseded ones included)."""
    found: Counter[int] = Counter()
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            call = decode_tool_call(bytes(entry.body))
            if call.run_id == run_id:
                found[call.step] += 1
    return found


async def _verifies(memory: Memory, run_id: str = "t1") -> None:
    """The store and the run's exported bundle both verify."""
    await memory.verify(deep=True)
    bundle = await export_bundle(memory.ledger, key_history(memory.folder), run_id)
    verify_bundle(bundle, memory.trust_root)


async def test_fork_never_replays_a_key_recorded_past_the_fork_point(opener: Opener) -> None:
    async with opener() as memory:
        async with memory.run("t1", SCOPE) as run:
            await run.call("memory_fetch", {"query": "x"})
            await run.call("memory_fetch", FETCH)
            assert (await run.call("memory_fetch", FETCH, key="k"))["hits"] == []
        async with memory.run("t1", SCOPE, fork=True) as run:
            await run.call("memory_fetch", {"query": "x"})
            await run.call("memory_store", STORE)  # diverges at step 1: the fork
            # Key k was recorded at step 2 of the abandoned branch: run live, never its memo.
            after = await run.call("memory_fetch", FETCH, key="k")
            assert len(after["hits"]) == 1
            fresh = await run.call("memory_fetch", FETCH, key="fresh")
            assert len(fresh["hits"]) == 1
            # Re-issued in this run, the key is the post-fork call's memo.
            assert await run.call("memory_fetch", FETCH, key="k") == after
        await _verifies(memory)
        async with memory.run("t1", SCOPE) as run:
            assert await run.call("memory_fetch", FETCH, key="k") == after
            assert await run.call("memory_fetch", FETCH, key="fresh") == fresh
        await _verifies(memory)


async def test_one_key_through_call_and_call_at_at_once_runs_live_once(memory: Memory) -> None:
    async with memory.run("t1", SCOPE) as run:
        out = await asyncio.gather(
            run.call("memory_fetch", FETCH, key="k"),
            run.call_at(1, "memory_fetch", FETCH, key="k"),
            return_exceptions=True,
        )
    assert isinstance(out[0], dict)
    assert isinstance(out[1], ReplayDivergence | Conflict)
    assert await _steps(memory) == {0: 1}
    await _verifies(memory)
    async with memory.run("t1", SCOPE) as run:
        assert await run.call("memory_fetch", FETCH, key="k") == out[0]


async def test_call_at_a_step_in_flight_waits_and_gets_its_memo_not_a_second_entry(
    memory: Memory,
) -> None:
    async with memory.run("t1", SCOPE) as run:
        first, again = await asyncio.gather(
            run.call("memory_fetch", FETCH), run.call_at(0, "memory_fetch", FETCH)
        )
        assert again == first
        # Another key at a step in flight: refused naming the key, never a second call.
        out = await asyncio.gather(
            run.call("memory_fetch", FETCH, key="k1"),
            run.call_at(1, "memory_fetch", FETCH, key="k2"),
            return_exceptions=True,
        )
        assert isinstance(out[0], dict)
        assert isinstance(out[1], ReplayDivergence)
        assert "key 'k2'" in str(out[1])
    assert await _steps(memory) == {0: 1, 1: 1}
    await _verifies(memory)


@pytest.mark.parametrize("keyed", [True, False])
async def test_cancelled_call_leaves_no_gap_and_a_reissue_runs_once(
    memory: Memory, keyed: bool
) -> None:
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", {"query": "warm"})
        # Cancelled at every point from before its first step to after its commit.
        for ticks in range(0, 24, 3):
            key = f"k{ticks}" if keyed else None
            task = asyncio.ensure_future(run.call("memory_store", STORE, key=key))
            for _ in range(ticks):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # (or it finished first)
            await asyncio.sleep(0.05)
            await run.call("memory_fetch", {"query": f"after {ticks}"})
            if key is not None:
                stored = await run.call("memory_store", STORE, key=key)
                assert await run.call("memory_store", STORE, key=key) == stored
    steps = await _steps(memory)
    assert set(steps.values()) == {1}  # no step recorded twice
    assert sorted(steps) == list(range(len(steps)))  # and no gap
    await _verifies(memory)


async def test_keyed_call_cancelled_after_its_commit_maps_its_key_for_the_reissue(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = memory.ledger.store
    real = store.run
    armed = {"on": False}

    async def cancelled_after_commit(command: Any, *args: Any, **kwargs: Any) -> Any:
        out = await real(command, *args, **kwargs)
        if armed["on"]:
            armed["on"] = False
            raise asyncio.CancelledError  # the host's timeout, landing as the commit returns
        return out

    monkeypatch.setattr(store, "run", cancelled_after_commit)
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", {"query": "warm"})
        armed["on"] = True
        with pytest.raises(asyncio.CancelledError):
            await run.call("memory_store", STORE, key="k")
        again = await run.call("memory_store", STORE, key="k")
        assert await run.call("memory_store", STORE, key="k") == again
        await run.call("memory_fetch", {"query": "after"})
    assert await _steps(memory) == {0: 1, 1: 1, 2: 1}
    await _verifies(memory)


async def test_unknown_outcome_commit_retried_with_its_key_gets_the_memo(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = memory.ledger.store
    real = store.run
    armed = {"on": False}

    async def lost_after_commit(command: Any, *args: Any, **kwargs: Any) -> Any:
        out = await real(command, *args, **kwargs)
        if armed["on"]:
            armed["on"] = False
            raise StorageError("connection lost after commit")
        return out

    monkeypatch.setattr(store, "run", lost_after_commit)
    async with memory.run("t1", SCOPE) as run:
        await run.call("memory_fetch", {"query": "warm"})
        armed["on"] = True
        with pytest.raises(StorageError):
            await run.call("memory_store", STORE, key="k")
        retried = await run.call("memory_store", STORE, key="k")
        assert await run.call("memory_store", STORE, key="k") == retried
    assert await _steps(memory) == {0: 1, 1: 1}
    await _verifies(memory)
    async with memory.run("t1", SCOPE) as run:
        assert await run.call("memory_store", STORE, key="k") == retried


async def test_mixed_keyed_and_unkeyed_run_rerun_in_order_replays_every_step(
    opener: Opener,
) -> None:
    async def agent(memory: Memory) -> list[Any]:
        async with memory.run("t1", SCOPE) as run:
            return [
                await run.call("memory_fetch", {"query": "a"}, key="ka"),
                await run.call("memory_fetch", {"query": "b"}),
                await run.call("memory_store", STORE, key="kc"),
                await run.call("memory_fetch", {"query": "d"}),
            ]

    async with opener() as memory:
        first = await agent(memory)
        assert await agent(memory) == first
        assert await _steps(memory) == {0: 1, 1: 1, 2: 1, 3: 1}
        await _verifies(memory)
