"""Attacks on the derived tables the state hash leaves out: the full-text index and the
ledger's mentions index. Each is compared with what it is derived from.

The attacker writes the store's tables (no keys). A row deleted from the
full-text index makes exact search silently miss an item; ``verify --deep``
names the item and the table, and ``rebuild`` puts it back. A row deleted
from ``mentions`` would let a later forget leave the forgotten text in a
tool call's payload; ``verify`` compares the table with the mentions the
signed entries imply and reports missing and extra rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from attack_db import rows, run

import memseal
from memseal.engine import Learning
from memseal.ledger.errors import VerificationError
from memseal.ledger.store import Record
from memseal.memory import Memory
from memseal.replay.runs.provenance import verify_derived

PLACE = "team:acme/agent:writer"
SECRET = "the vault path is ops/deploy/zebra"


def _fts_delete(memory: Memory, seq: int) -> None:
    if memory.ledger.store.dialect == "sqlite":
        # What a reviewer did: the index row goes, the item stays.
        run(memory, "DELETE FROM engine_fts WHERE rowid = ?", (seq,))
    else:
        run(memory, "DELETE FROM engine_fts WHERE seq = ?", (seq,))


async def _hits(memory: Memory, query: str) -> list[str]:
    found = await memory.engine.fetch(query, mode="exact")
    return [hit.item.id for hit in found.hits]


async def test_deleted_full_text_row_fails_verify_deep_naming_the_table(memory: Memory) -> None:
    item = (await memory.engine.store(Learning(text=SECRET), namespace=PLACE)).id
    await memory.engine.store(Learning(text="staging needs two reviewers"), namespace=PLACE)
    assert item in await _hits(memory, "zebra")
    await memory.verify(deep=True)
    seq = int(rows(memory, "SELECT seq FROM engine_items WHERE id = ?", (item,))[0][0])
    _fts_delete(memory, seq)
    assert item not in await _hits(memory, "zebra")  # the silent miss the check exists for
    check = await memory.engine.check_projections()
    assert not check.matches and check.table == "engine_fts" and check.item == item, check
    assert "engine_fts" in check.line() and "rebuild" in check.line()
    with pytest.raises(VerificationError, match="engine_fts") as caught:
        await memory.verify(deep=True)
    assert caught.value.step == "projection"
    await memory.engine.rebuild()
    assert item in await _hits(memory, "zebra")
    await memory.verify(deep=True)


async def test_altered_full_text_row_fails_verify_deep(memory: Memory) -> None:
    item = (await memory.engine.store(Learning(text=SECRET), namespace=PLACE)).id
    other = (await memory.engine.store(Learning(text="lunch is at noon"), namespace=PLACE)).id
    seq = int(rows(memory, "SELECT seq FROM engine_items WHERE id = ?", (other,))[0][0])
    _fts_delete(memory, seq)
    # The other item's row now indexes the secret's words: a search for them finds it.
    if memory.ledger.store.dialect == "sqlite":
        run(
            memory,
            "INSERT INTO engine_fts (rowid, text, title, tags) VALUES (?, ?, NULL, '')",
            (seq, SECRET),
        )
    else:
        run(
            memory,
            "INSERT INTO engine_fts (seq, doc) VALUES (?, to_tsvector('simple', ?))",
            (seq, "vault zebra"),
        )
    check = await memory.engine.check_projections()
    assert not check.matches and check.table == "engine_fts", check
    assert check.item in (item, other)
    await memory.engine.rebuild()
    await memory.verify(deep=True)


async def test_full_text_row_without_an_item_fails_verify_deep(memory: Memory) -> None:
    await memory.engine.store(Learning(text=SECRET), namespace=PLACE)
    if memory.ledger.store.dialect == "sqlite":
        run(
            memory,
            "INSERT INTO engine_fts (rowid, text, title, tags) VALUES (999, 'planted', NULL, '')",
        )
    else:
        run(memory, "INSERT INTO engine_fts (seq, doc) VALUES (999, to_tsvector('planted'))")
    check = await memory.engine.check_projections()
    assert not check.matches and check.table == "engine_fts" and check.seq == 999, check
    await memory.engine.rebuild()
    await memory.verify(deep=True)


async def test_deleted_mentions_row_fails_verify_before_a_forget_leaves_text(
    memory: Memory,
) -> None:
    scope = memseal.ToolScope.placed_at(PLACE)
    _, stored = await memory.call("memory_store", {"learning": {"text": SECRET}}, scope=scope)
    item = stored["id"]
    await memory.call("memory_fetch", {"query": "zebra", "mode": "exact"}, scope=scope)
    await memory.verify()
    cited = rows(memory, "SELECT seq FROM mentions WHERE ref = ? ORDER BY seq", (item,))
    assert len(cited) >= 2
    run(memory, "DELETE FROM mentions WHERE ref = ? AND seq = ?", (item, cited[-1][0]))
    with pytest.raises(VerificationError, match="mentions table") as caught:
        await memory.verify()
    assert caught.value.step == "mentions" and caught.value.seq == cited[-1][0]


async def test_derived_check_reads_the_log_once_and_still_finds_a_deleted_mention(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = memseal.ToolScope.placed_at(PLACE)
    _, stored = await memory.call("memory_store", {"learning": {"text": SECRET}}, scope=scope)
    await memory.call("memory_fetch", {"query": "zebra", "mode": "exact"}, scope=scope)
    store = memory.ledger.store
    size = (await store.head()).size
    scans: list[tuple[int, int | None]] = []
    real_scan = store.scan

    def counted(start: int = 0, stop: int | None = None) -> AsyncIterator[Record]:
        scans.append((start, stop))
        return real_scan(start, stop)

    monkeypatch.setattr(store, "scan", counted)
    await verify_derived(store, size)
    # The memo, runs, redactions and mentions checks share one pass over the log.
    assert scans == [(0, size)]
    cited = rows(memory, "SELECT seq FROM mentions WHERE ref = ? ORDER BY seq", (stored["id"],))
    run(memory, "DELETE FROM mentions WHERE ref = ? AND seq = ?", (stored["id"], cited[-1][0]))
    with pytest.raises(VerificationError, match="mentions table") as caught:
        await verify_derived(store, size)
    assert caught.value.step == "mentions" and caught.value.seq == cited[-1][0]


async def test_planted_mentions_row_fails_verify(memory: Memory) -> None:
    await memory.engine.store(Learning(text=SECRET), namespace=PLACE)
    seq = int(rows(memory, "SELECT seq FROM mentions ORDER BY seq")[0][0])
    run(memory, "INSERT INTO mentions (ref, seq) VALUES (?, ?)", ("f" * 32, seq))
    with pytest.raises(VerificationError, match="extra"):
        await memory.verify()


async def test_deleted_facet_mention_fails_verify_deep_before_a_forget_leaves_a_tag(
    memory: Memory,
) -> None:
    scope = memseal.ToolScope.placed_at(PLACE)
    await memory.call(
        "memory_store", {"learning": {"text": SECRET}, "tags": ["zebra-tag"]}, scope=scope
    )
    _, explored = await memory.call("memory_explore", {"facet": "tag"}, scope=scope)
    assert any(b["value"] == "zebra-tag" for b in explored["buckets"])
    await memory.verify(deep=True)
    facets = rows(
        memory, "SELECT ref, seq FROM mentions WHERE ref LIKE ? ORDER BY seq", ("facet:%",)
    )
    assert facets
    ref, seq = facets[0]
    run(memory, "DELETE FROM mentions WHERE ref = ? AND seq = ?", (ref, seq))
    await memory.verify()  # the keyed refs need the secret: only the deep check sees them
    with pytest.raises(VerificationError, match="facet ref") as caught:
        await memory.verify(deep=True)
    assert caught.value.step == "mentions" and caught.value.seq == seq


async def test_planted_facet_mention_fails_verify_deep(memory: Memory) -> None:
    scope = memseal.ToolScope.placed_at(PLACE)
    await memory.call("memory_store", {"learning": {"text": SECRET}, "tags": ["t1"]}, scope=scope)
    await memory.call("memory_explore", {"facet": "tag"}, scope=scope)
    seq = rows(memory, "SELECT max(seq) FROM mentions")[0][0]
    run(memory, "INSERT INTO mentions (ref, seq) VALUES (?, ?)", ("facet:" + "0" * 32, seq))
    with pytest.raises(VerificationError, match="1 extra") as caught:
        await memory.verify(deep=True)
    assert caught.value.step == "mentions"
