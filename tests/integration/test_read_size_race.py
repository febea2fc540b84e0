"""A recorded read names the tree size its snapshot saw, even when a write lands mid-call.

The race LangGraph's parallel tool calls hit: a run's ``memory_store`` and
``memory_list`` run at once, and the store commits after the list took the
log's size but before its query ran. The list then saw the stored item while
its signed entry named the size before it, so a bundle replay, which rebuilds
the memory at that size, found the item missing and reported the step changed.

Here the store is made to land in exactly that gap (the list's ``prepare`` is
wrapped to commit it first), on the real SQLite file. The recorded size must
be the one the read saw, and ``memseal replay`` of the exported bundle must
call every step the same.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
from durable_support import memseal_cli, open_folder

import memseal
from memseal.tools import MemoryTools

RUN = "racing-run"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TEXT = "the nightly report goes out at 6am"


def _run_with_a_store_in_the_gap(folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    original = MemoryTools.prepare
    landed: list[int] = []

    async def main() -> dict[str, Any]:
        async with open_folder(folder) as memory:

            async def prepare(self: MemoryTools, name: str, arguments: Any) -> Any:
                if name == "memory_list" and not landed:
                    # Another task's store commits after the run read the head, before the query.
                    await memory.call("memory_store", {"learning": {"text": TEXT}}, scope=SCOPE)
                    landed.append(await memory.ledger.size())
                return await original(self, name, arguments)

            monkeypatch.setattr(MemoryTools, "prepare", prepare)
            async with memory.run(RUN, SCOPE, mode="record") as run:
                listed = await run.call("memory_list", {})
            monkeypatch.setattr(MemoryTools, "prepare", original)
            calls = [
                msgspec_body(record)
                async for record in memory.ledger.scan(0, await memory.ledger.size())
                if record.entry().kind == "memory_tool_call"
            ]
            return {"listed": listed, "landed": landed, "calls": calls}

    return asyncio.run(main())


def msgspec_body(record: Any) -> dict[str, Any]:
    body: dict[str, Any] = msgspec.json.decode(record.entry().body)
    return body


def test_a_read_records_the_size_its_snapshot_saw_and_replays_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "data"
    seen = _run_with_a_store_in_the_gap(folder, monkeypatch)
    assert [item["text"] for item in seen["listed"]["items"]] == [TEXT]  # the read saw it
    (listed,) = [call for call in seen["calls"] if call["run_id"] == RUN]
    # The size names the store's entries: re-deriving at it finds the item again.
    assert listed["observed_size"] == seen["landed"][0]

    bundle = tmp_path / "run.bundle"
    exported = memseal_cli("export", "--data", str(folder), "--run", RUN, "-o", str(bundle))
    assert exported.returncode == 0, exported.stderr
    replayed = memseal_cli("replay", str(bundle))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "step 0 memory_list: same" in replayed.stdout, replayed.stdout


def test_a_read_the_memory_changes_under_every_time_fails_loudly_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = MemoryTools.prepare

    async def main() -> tuple[str, list[str]]:
        async with open_folder(tmp_path / "data") as memory:

            async def prepare(self: MemoryTools, name: str, arguments: Any) -> Any:
                if name != "memory_list":
                    return await original(self, name, arguments)
                # A read of two queries, and a write lands between them on every try.
                await original(self, name, arguments)
                await memory.call("memory_store", {"learning": {"text": TEXT}}, scope=SCOPE)
                return await original(self, name, arguments)

            monkeypatch.setattr(MemoryTools, "prepare", prepare)
            async with memory.run(RUN, SCOPE, mode="record") as run:
                with pytest.raises(memseal.Conflict) as refused:
                    await run.call("memory_list", {})
            monkeypatch.setattr(MemoryTools, "prepare", original)
            runs = [
                msgspec_body(record)["run_id"]
                async for record in memory.ledger.scan(0, await memory.ledger.size())
                if record.entry().kind == "memory_tool_call"
            ]
            return str(refused.value), runs

    said, runs = asyncio.run(main())
    assert "memory_list: the memory changed during each of" in said
    assert "nothing was recorded" in said
    assert RUN not in runs  # the stores' own one-shot runs only
    assert len(runs) >= 2
