"""A view's projection, read off the live one, equals a rebuild of the log prefix, row by row.

The view at size N is built from the live projection cut back to ``seq < N``
(memseal/apps/_as_of_build.py). The reference here is the slow way it replaced: the
prefix's engine entries copied, with their payloads as they are now, into a
temporary log and its projection rebuilt from them. Every projection table and
full-text ranking is compared at every size of a history with stores in two
namespaces, a conversation naming a day, trust changes up and down, rejections,
forgets, a re-store of a forgotten text and a trust change on a forgotten item.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import memseal
from memseal.engine import Conversation, Learning, Turn
from memseal.engine._schema import HASHED
from memseal.engine.events import ENGINE_KINDS
from memseal.ledger.store import SqlStore
from memseal.replay.evidence._temp_log import Source, TempLog

WORDS = ["tea", "coffee", "deploy", "friday", "march", "berlin"]


async def _history(memory: memseal.Memory) -> None:
    engine = memory.engine
    a = await engine.store(Learning(text="tea in the morning, coffee at noon"), namespace="team:a")
    b = await engine.store(Learning(text="deploys run on friday"), namespace="team:b")
    talk = Conversation(turns=(Turn(role="user", text="I flew to Berlin on 2 March"),))
    c = await engine.store(talk, namespace="team:a/agent:x")
    await engine.promote(a.id, actor="lead", reason="checked")
    d = await engine.store(Learning(text="coffee beans from berlin"), namespace="team:a")
    await engine.mark_stale(b.id, actor="lead", reason="old")
    await engine.forget(ids=[c.id])
    await engine.reject(d.id, actor="lead", reason="wrong")
    await engine.promote(b.id, actor="lead", reason="fresh again")
    await engine.forget(ids=[a.id])
    await engine.store(Learning(text="tea in the morning, coffee at noon"), namespace="team:a")
    await engine.mark_stale(d.id, actor="lead", reason="maybe")
    await engine.store_many([])


async def _rows(store: SqlStore) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for table, columns in HASHED.items():
        out[table] = await store.rows(
            f"SELECT {', '.join(columns)} FROM {table} ORDER BY {', '.join(columns)}"
        )
    for word in WORDS:
        out[f"fts:{word}"] = await store.rows(
            "SELECT rowid, rank FROM engine_fts WHERE engine_fts MATCH ? ORDER BY rank, rowid",
            (word,),
        )
    return out


async def _rebuilt(memory: memseal.Memory, size: int, folder: Path) -> dict[str, Any]:
    """The prefix ``seq < size`` copied entry by entry and its projection rebuilt."""
    log = TempLog(folder, memory._keys.secret, None)
    await log.open()
    try:
        batch: list[Source | int] = []
        async for record in memory.ledger.store.scan(0, size):
            entry = record.entry()
            if entry.kind not in ENGINE_KINDS:
                batch.append(record.seq)
                continue
            batch.append(
                Source(
                    seq=record.seq,
                    kind=entry.kind,
                    at=entry.at,
                    body=bytes(entry.body),
                    payload=record.payload,
                    redacts=(),
                    committed=entry.payload_hash is not None,
                )
            )
        await log.append(batch)
        assert log.store is not None
        return await _rows(log.store)
    finally:
        await log.close()


async def test_every_view_holds_the_rows_a_rebuild_of_its_prefix_holds(
    tmp_path: Path, store_url: str | None
) -> None:
    async with memseal.open(tmp_path / "data", store=store_url, embedder=None) as memory:
        await _history(memory)
        head = (await memory.ledger.store.head()).size
        compared = 0
        for size in range(head + 1):
            with tempfile.TemporaryDirectory() as tmp:
                expected = await _rebuilt(memory, size, Path(tmp))
            async with memory._views.use(size) as built:
                assert built.log.store is not None
                got = await _rows(built.log.store)
            assert got == expected, size
            compared += sum(len(v) for v in got.values())
        assert compared > 100  # the tables were not all empty
