"""A group of writer commands runs as one unit; when one fails, call by call.

Every test submits its commands in one turn of the event loop (``gather``), so
the writer takes them as one group. A command that raises, or a nested unit
that raises inside a command, makes the group run again with a savepoint per
command: the bad call fails alone, the others land, and the log and the
projection still verify. Rows held back for the group's multi-row INSERTs are
visible to every later statement of the group that names their table.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.ledger.entry import make_draft
from memseal.ledger.errors import Conflict, NotFound
from memseal.ledger.store import Appended, WriteTxn
from memseal.tools import ToolScope

PLACE = "team:t/agent:a"
STORE_ENV = "MEMSEAL_STORE"


@pytest.fixture
async def memory(
    tmp_path: Path, store_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[memseal.Memory]:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)
    async with memseal.open(tmp_path / "data", embedder=None, checkpoint_interval=None) as opened:
        yield opened


def _append(note: str, **extra: Any) -> Any:
    def command(txn: WriteTxn) -> Appended:
        return txn.append(make_draft("test_note", {"note": note}, {"text": note}, **extra))

    return command


def _bad(txn: WriteTxn) -> None:
    # It writes before it fails: none of that may stand.
    txn.append(make_draft("test_note", {"note": "bad"}, {"text": "bad"}, mentions=["bad"]))
    raise Conflict("this call is refused")


async def _notes(memory: memseal.Memory) -> list[str]:
    notes = []
    async for record in memory.ledger.scan():
        entry = record.entry()
        if entry.kind == "test_note":
            notes.append(msgspec.json.decode(entry.body)["note"])
    return notes


async def test_one_bad_command_fails_alone(memory: memseal.Memory) -> None:
    scope = ToolScope.placed_at(PLACE)
    async with memory.run("r1", scope, mode="record") as run:
        stores = [
            run.call("memory_store", {"learning": {"text": f"fact number {i}"}}) for i in range(6)
        ]
        store = memory.ledger.store
        results = await asyncio.gather(
            *stores[:3],
            store.run(_append("good-1", mentions=["m1"])),
            store.run(_bad),
            store.run(_append("good-2")),
            *stores[3:],
            return_exceptions=True,
        )
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(failed) == 1
    assert isinstance(failed[0], Conflict)
    assert str(failed[0]) == "this call is refused"
    assert await _notes(memory) == ["good-1", "good-2"]
    assert await memory.ledger.mentioning("bad") == []
    assert len(await memory.ledger.mentioning("m1")) == 1
    assert await memory.ledger.store.rows("SELECT count(*) FROM engine_items") == [(6,)]
    await memory.verify()


async def test_a_failed_nested_unit_rolls_back_alone(memory: memseal.Memory) -> None:
    def nested(txn: WriteTxn) -> str:
        try:
            with txn.savepoint():
                txn.append(make_draft("test_note", {"note": "undone"}, {"text": "undone"}))
                raise NotFound("nothing here")
        except NotFound:
            pass
        txn.append(make_draft("test_note", {"note": "after"}, {"text": "after"}))
        return "ok"

    store = memory.ledger.store
    results = await asyncio.gather(
        store.run(_append("first")), store.run(nested), store.run(_append("last"))
    )
    assert results[1] == "ok"
    assert await _notes(memory) == ["first", "after", "last"]
    await memory.verify()


async def test_later_commands_read_the_rows_held_for_the_group(memory: memseal.Memory) -> None:
    seen: dict[str, Any] = {}

    def reader(txn: WriteTxn) -> None:
        seen["entries"] = txn.execute("SELECT count(*) FROM entries")[0][0]
        seen["mentions"] = txn.execute("SELECT count(*) FROM mentions WHERE ref = 'held'")[0][0]
        seen["size"] = txn.size

    def forget_first(txn: WriteTxn) -> Appended:
        first = txn.execute("SELECT seq FROM mentions WHERE ref = 'held'")[0][0]
        return txn.append(make_draft("test_forget", {"of": first}, redacts=[first]))

    store = memory.ledger.store
    before = (await memory.ledger.head()).size
    first, _, forget = await asyncio.gather(
        store.run(_append("held", mentions=["held"])), store.run(reader), store.run(forget_first)
    )
    assert seen == {"entries": before + 1, "mentions": 1, "size": before + 1}
    # The payload written in the group and erased later in it is gone, not re-inserted.
    assert await store.payloads_present([first.seq]) == []
    assert await memory.ledger.mentioning("held") == []
    assert forget.seq == first.seq + 1
    await memory.verify()


async def test_a_held_row_the_database_refuses_fails_its_call_alone(
    memory: memseal.Memory,
) -> None:
    def clash(txn: WriteTxn) -> None:
        # Refused only when the group's rows are inserted, after every command ran.
        txn.append(make_draft("test_note", {"note": "clash"}, {"text": "clash"}))
        txn.defer("meta (key, value)", ("schema", "not this"))

    store = memory.ledger.store
    results = await asyncio.gather(
        store.run(_append("before")),
        store.run(clash),
        store.run(_append("after")),
        return_exceptions=True,
    )
    assert not isinstance(results[0], BaseException)
    assert isinstance(results[1], BaseException)
    assert not isinstance(results[2], BaseException)
    assert await _notes(memory) == ["before", "after"]
    await memory.verify()


async def test_an_upsert_held_twice_for_one_key_ends_as_the_last(
    memory: memseal.Memory,
) -> None:
    upsert = " ON CONFLICT (run_id, step) DO UPDATE SET memo_key = excluded.memo_key"

    def memo(step: int, key: str) -> Any:
        def command(txn: WriteTxn) -> None:
            txn.defer("memos (run_id, step, memo_key, seq)", ("held", step, key, 0), upsert)

        return command

    store = memory.ledger.store
    await asyncio.gather(
        store.run(memo(1, "first")),
        store.run(memo(2, "other")),
        store.run(memo(1, "second")),
        store.run(memo(1, "third")),
    )
    rows = await store.rows("SELECT step, memo_key FROM memos WHERE run_id = 'held' ORDER BY step")
    assert rows == [(1, "third"), (2, "other")]


async def test_a_store_replayed_in_a_group_appends_nothing(memory: memseal.Memory) -> None:
    # On PostgreSQL the group's dedupe lookups are taken as absent and read once at its
    # end: the one found sends the group round again, every lookup read at once.
    scope = ToolScope.placed_at(PLACE)
    async with memory.run("r1", scope, mode="record") as run:
        first = await run.call("memory_store", {"learning": {"text": "fact number 0"}})
        before = (await memory.ledger.head()).size
        results = await asyncio.gather(
            *[
                run.call("memory_store", {"learning": {"text": f"fact number {i}"}})
                for i in (1, 0, 2)
            ]
        )
    assert results[1]["id"] == first["id"]
    assert await memory.ledger.store.rows("SELECT count(*) FROM engine_items") == [(3,)]
    # Two new memories (an entry each and its call's) and the replayed store's call.
    assert (await memory.ledger.head()).size == before + 5
    await memory.verify()
