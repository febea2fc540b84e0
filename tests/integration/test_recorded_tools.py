"""``memory.tools(scope)`` records every call, on every path a host takes.

Each call (a read, a write, a refused or erroring call) appends one signed
``memory_tool_call`` entry whose memo row points at it; ``last_call`` names
its run and step, and a strict run of that id answers the call from its memo.
The same holds for the tools' ``toolset()``, its LangChain tools, the sync
facade, and a bound run (``run_id=``). Closing a memory closes the runs it
opened and releases their leases. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.memory import STORE_ENV
from memseal.tools import ToolScope

PLACE = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(PLACE)
STORE = {"learning": {"text": "recorded calls leave a trace"}}
FETCH = {"query": "trace", "mode": "exact"}


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


async def _signed_call(memory: memseal.Memory, ref: memseal.RecordedCall) -> dict[str, Any]:
    """The body of the signed entry the memo of (run, step) points at."""
    rows = await memory.ledger.store.rows(
        "SELECT seq FROM memos WHERE run_id = ? AND step = ?", (ref.run_id, ref.step)
    )
    assert len(rows) == 1, f"no memo for {ref}"
    entry = (await memory.ledger.read(int(rows[0][0]))).entry()
    assert entry.kind == "memory_tool_call"
    body: dict[str, Any] = msgspec.json.decode(bytes(entry.body))
    assert (body["run_id"], body["step"], body["tool"]) == (ref.run_id, ref.step, ref.tool)
    return body


async def _tool_calls(memory: memseal.Memory) -> int:
    rows = await memory.ledger.store.rows("SELECT count(*) FROM memos")
    return int(rows[0][0])


async def test_every_memory_tools_call_is_a_signed_memoised_entry_and_replays(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        tools = memory.tools(SCOPE)
        before = tools.last_call  # a local: mypy would keep `tools.last_call` narrowed to None
        assert before is None
        stored = await tools.call("memory_store", STORE)
        wrote = tools.last_call
        found = await tools.call("memory_fetch", FETCH)
        read = tools.last_call
        with pytest.raises(memseal.InvalidRequest, match="limit"):
            await tools.call("memory_list", {"limit": 500})
        bad = tools.last_call
        frozen = memory.tools(ToolScope.placed_at(PLACE, frozen=True))
        with pytest.raises(memseal.Unsupported):
            await frozen.call("memory_store", STORE)
        refused = frozen.last_call
        refs = [wrote, read, bad, refused]
        assert all(ref is not None for ref in refs)
        assert len({ref.run_id for ref in refs if ref}) == 4  # one fresh run per call
        assert all(ref.step == 0 for ref in refs if ref)
        assert await _tool_calls(memory) == 4
        bodies = [await _signed_call(memory, ref) for ref in refs if ref]
        assert [b["error"] for b in bodies] == [False, False, True, True]
        assert read is not None and read.result == found
        assert bad is not None and isinstance(bad.error, memseal.InvalidRequest)
        await memory.verify(memory.trust_root)

        # Any of them replays from its memo: a strict run makes no live call.
        size = await memory.ledger.size()
        assert wrote is not None and read is not None and refused is not None
        async with memory.run(wrote.run_id, SCOPE, mode="strict") as run:
            assert await run.call("memory_store", STORE) == stored
        async with memory.run(read.run_id, SCOPE, mode="strict") as run:
            assert await run.call("memory_fetch", FETCH) == found
        frozen_scope = ToolScope.placed_at(PLACE, frozen=True)
        async with memory.run(refused.run_id, frozen_scope, mode="strict") as run:
            with pytest.raises(memseal.Unsupported):
                await run.call("memory_store", STORE)
        assert await memory.ledger.size() == size


async def test_a_bound_run_records_each_call_as_its_next_step(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        async with memory.tools(SCOPE, run_id="bound") as tools:
            assert tools.run_id == "bound"
            await tools.call("memory_store", STORE)
            found = await tools.call("memory_fetch", FETCH)
            done = await tools.recorded_call("memory_get", {"ids": []})
            assert (done.run_id, done.step) == ("bound", 2)
            assert isinstance(done.error, memseal.InvalidRequest)
            assert tools.last_call == done
        for step, tool in enumerate(["memory_store", "memory_fetch", "memory_get"]):
            ref = memseal.RecordedCall(run_id="bound", step=step, tool=tool)
            await _signed_call(memory, ref)
        async with memory.tools(SCOPE, run_id="bound", mode="strict") as again:
            await again.call("memory_store", STORE)
            assert await again.call("memory_fetch", FETCH) == found
            with pytest.raises(memseal.InvalidRequest):
                await again.call("memory_get", {"ids": []})
        with pytest.raises(memseal.InvalidRequest, match="run_id"):
            await memory.tools(SCOPE).call("memory_fetch", FETCH, revalidate=True)


async def test_the_toolset_and_its_langchain_tools_record_every_call(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        toolset = memory.tools(SCOPE).toolset()
        text = await toolset.call("memory_store", json.dumps(STORE))
        first = toolset.last_call
        assert first is not None and json.loads(text) == first.result
        error = await toolset.call("memory_fetch", '{"query": "x", "limit": 500}')
        assert error.startswith("error: ")
        assert toolset.last_call is not None and toolset.last_call.error is not None
        langchain = {tool.name: tool for tool in toolset.to_langchain()}
        found = json.loads(await langchain["memory_fetch"].ainvoke(FETCH))
        ref = toolset.last_call
        assert ref is not None and ref.tool == "memory_fetch" and ref.result == found
        assert await _tool_calls(memory) == 3
        await _signed_call(memory, ref)
        async with memory.run(ref.run_id, SCOPE, mode="strict") as run:
            assert await run.call("memory_fetch", FETCH) == found
        await memory.verify(memory.trust_root)


def test_the_sync_facade_records_every_toolset_call(tmp_path: Path) -> None:
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.toolset(SCOPE)
        toolset.call("memory_store", STORE)
        stored = toolset.last_call
        found = json.loads(toolset.call("memory_fetch", FETCH))
        fetched = toolset.last_call
        assert toolset.call("memory_list", {"limit": 500}).startswith("error:")
        refused = toolset.last_call
        langchain = {tool.name: tool for tool in toolset.to_langchain()}
        langchain["memory_list"].invoke({})
        listed = toolset.last_call
        refs = [stored, fetched, refused, listed]
        assert all(ref is not None for ref in refs)
        assert len({ref.run_id for ref in refs if ref}) == 4
        bound = memory.toolset(SCOPE, run_id="sync-bound")
        bound.call("memory_fetch", FETCH)
        assert bound.last_call is not None
        assert (bound.last_call.run_id, bound.last_call.step) == ("sync-bound", 0)
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        assert fetched is not None
        replayed = memory.toolset(SCOPE, run_id=fetched.run_id, mode="strict")
        assert json.loads(replayed.call("memory_fetch", FETCH)) == found
        memory.ledger.verify(memory.trust_root)


async def test_closing_a_memory_releases_the_leases_of_its_open_runs(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    memory = await _open(folder)
    run = memory.run("left-open", SCOPE)  # no `async with`, never closed by the host
    first = await run.call("memory_store", STORE)
    await memory.close()
    async with _open(folder) as again:  # same folder, same process
        resumed = again.run("left-open", SCOPE, mode="resume")
        assert await resumed.call("memory_store", STORE) == first
        await resumed.call("memory_fetch", FETCH)  # live: the run goes on
        await resumed.close()


async def test_a_lease_held_by_another_open_memory_here_is_named_so(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as holder, _open(folder) as other:
        held = holder.run("held-here", SCOPE)
        await held.call("memory_store", STORE)
        with pytest.raises(memseal.Conflict) as caught:
            await other.run("held-here", SCOPE).call("memory_fetch", FETCH)
        message = str(caught.value)
        assert "another open memory in this process" in message, message
        assert "another process" not in message and "pid" not in message
