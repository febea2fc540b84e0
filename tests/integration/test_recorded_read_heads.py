"""A recorded read takes its tree size from its snapshots, with no head read of its own.

A recorded ``memory_fetch`` used to read the log's head before its query, a round
trip through aiosqlite (two thread hops) on every call, although the size recorded
is the one each snapshot query reports (issue 17). Here the head reads are counted
on the real SQLite store, and the size recorded is proven and re-derived. A read
that reports no size (it ran no snapshot query) is still bracketed by head reads:
a commit landing inside it makes it run again, and the size it names is the one
it saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.store import observing_sizes
from memseal.replay.evidence.read_proof import verify_read
from memseal.tools import MemoryTools

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TEXTS = ("the deploy key lives in vault", "deploy on tuesdays", "the key to the office")
QUERY = {"query": "deploy key", "mode": "exact"}


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


async def _sizes(memory: Any, run_id: str) -> list[int]:
    sizes = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        if record.entry().kind == "memory_tool_call":
            body = msgspec.json.decode(record.entry().body)
            if body["run_id"] == run_id:
                sizes.append(body["observed_size"])
    return sizes


def _count_heads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the store's head reads (the real read still runs)."""
    original = SqliteLogStore.head
    heads: list[int] = []

    async def head(self: SqliteLogStore) -> Any:
        found = await original(self)
        heads.append(found.size)
        return found

    monkeypatch.setattr(SqliteLogStore, "head", head)
    return heads


async def test_a_recorded_fetch_reads_no_head_and_names_the_size_it_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _open(tmp_path / "d") as memory:
        for text in TEXTS:
            await memory.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
        async with memory.run("r", SCOPE, mode="record") as run:
            await run.call("memory_fetch", QUERY)  # the run has started: no more entries
            before = await memory.ledger.size()
            heads = _count_heads(monkeypatch)
            fetched = [await run.call("memory_fetch", QUERY) for _ in range(3)]
        monkeypatch.undo()
        assert heads == []  # no head read by the three recorded fetches
        # Each names the log as its snapshot saw it: the previous call's entry included.
        assert (await _sizes(memory, "r"))[1:] == [before, before + 1, before + 2]
        for step, result in enumerate(fetched, start=1):
            proven = await verify_read(
                await memory.prove_read("r", step, disclose="all"), memory.vkey
            )
            assert proven.how == "byte for byte" and proven.derived == result


async def test_a_read_reporting_no_size_is_bracketed_and_runs_again_past_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = MemoryTools.prepare
    reads: list[str] = []
    landed: list[int] = []
    async with _open(tmp_path / "d") as memory:
        await memory.call("memory_store", {"learning": {"text": TEXTS[0]}}, scope=SCOPE)

        async def prepare(self: MemoryTools, name: str, arguments: Any) -> Any:
            if name != "memory_fetch":
                return await original(self, name, arguments)
            reads.append(name)
            if len(reads) == 2:
                # Inside the first bracketed try: a store commits between its head reads.
                await memory.call("memory_store", {"learning": {"text": TEXTS[1]}}, scope=SCOPE)
                landed.append(await memory.ledger.size())
            # An inner observer keeps the snapshots' sizes from the run: a read that
            # reports none, as a tool reading outside the snapshot pool would.
            with observing_sizes():
                return await original(self, name, arguments)

        monkeypatch.setattr(MemoryTools, "prepare", prepare)
        async with memory.run("u", SCOPE, mode="record") as run:
            first = await run.call("memory_fetch", QUERY)
            heads = _count_heads(monkeypatch)
            second = await run.call("memory_fetch", QUERY)
        monkeypatch.undo()
        # The first call: unsized try, then a try a commit straddled, then a clean one.
        # The second: bracketed at once (the tool is known to report no size).
        assert len(reads) == 4
        assert len(heads) == 2
        sizes = await _sizes(memory, "u")
        assert sizes[0] == landed[0]  # the size after the store, which the answer shows
        assert {hit["text"] for hit in first["hits"]} == set(TEXTS[:2])
        assert sizes[1] == sizes[0] + 1 and second == first


async def test_a_refused_read_leaves_its_tool_reading_no_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _open(tmp_path / "d") as memory:
        await memory.call("memory_store", {"learning": {"text": TEXTS[0]}}, scope=SCOPE)
        async with memory.run("e", SCOPE, mode="record") as run:
            with pytest.raises(memseal.InvalidRequest, match="mode"):
                await run.call("memory_fetch", {"query": "deploy", "mode": "psychic"})
            heads = _count_heads(monkeypatch)
            fetched = await run.call("memory_fetch", QUERY)
        monkeypatch.undo()
        assert heads == []  # the refusal said nothing of the tool's reads
        assert [hit["text"] for hit in fetched["hits"]] == [TEXTS[0]]
        assert len(await _sizes(memory, "e")) == 2  # the refusal is recorded too
