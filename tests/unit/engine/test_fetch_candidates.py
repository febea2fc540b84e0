"""A fetch that follows the currency rule keeps what it read of its candidates.

What the rule weighs of an item (its id, time, opening text and vector) never changes
while the item lives, so a read keeps it in the read memo and the next read that meets
the item reads none of it again, with the vectors taken from the ones the semantic
ranking scored by. The results must be the ones a read afresh gives, byte for byte (a
read proof re-derives them): across modes and rule versions, when an item is forgotten
between a read's ranking and its page, and when two stores hold the same seqs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clock import Clock

from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder, Learning, _forget, _resident
from memseal.engine import _rule_memo as memo
from memseal.engine.currency import RULES, following
from memseal.engine.results import Fetched, Mode
from memseal.ledger.store import Execute

PLACE = "user:dana"
OLD = "My team lead at the office is Priya."
NEW = "Since March my team lead at the office is Daniel."
OTHER = "My brother Tomas leads the bakery team at the office."
MAYBE = "If I ever changed teams I would ask Priya to lead the office."
QUERY = "team lead at the office"
#: What reads a candidate's row, what only asks whether it still lives, and what reads
#: a stored vector.
ROWS = "substr(i.text"
LIVES = "SELECT i.seq FROM engine_items i WHERE i.seq IN"
VECTORS = "SELECT content, vec FROM engine_vectors"


async def _store(engine: Engine, *texts: str) -> list[str]:
    return [(await engine.store(Learning(text=t), namespace=PLACE)).id for t in texts]


def _statements(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements every snapshot of ``engine`` runs from now on, in order."""
    seen: list[str] = []
    reader = engine._reader
    run = reader.run

    async def traced(fn: Callable[[Execute], Any]) -> Any:
        def spied(execute: Execute) -> Any:
            def spy(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
                seen.append(sql)
                return execute(sql, params)

            return fn(spy)

        return await run(spied)

    monkeypatch.setattr(reader, "run", traced)
    return seen


async def _fetch(engine: Engine, mode: Mode, version: int | None = 3) -> bytes:
    with following(version):
        return msgspec.json.encode(await engine.fetch(QUERY, mode=mode, limit=10))


@pytest.mark.parametrize("mode", ["exact", "semantic", "hybrid"])
async def test_a_read_meeting_the_same_items_reads_none_of_them_again(
    engine: Engine, mode: Mode, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo.forget_all()
    await _store(engine, OLD, OTHER, MAYBE, NEW)
    for version in sorted(RULES):
        memo.forget_all()
        afresh = await _fetch(engine, mode, version)
        statements = _statements(engine, monkeypatch)
        assert await _fetch(engine, mode, version) == afresh
        assert not [sql for sql in statements if ROWS in sql or VECTORS in sql]
        vectors = engine._vectors
        if mode == "exact" or (vectors is not None and vectors.pg is None):
            # Ranked in this snapshot, or in one of the same log: nothing to ask.
            assert not [sql for sql in statements if LIVES in sql]
        monkeypatch.undo()
    hits = msgspec.json.decode(afresh, type=Fetched).hits
    assert hits[0].item.text == NEW
    assert [h.superseded_by for h in hits if h.item.text == OLD] == [hits[0].item.id]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
async def test_an_item_forgotten_after_the_ranking_is_no_candidate(
    engine: Engine, mode: Mode, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo.forget_all()
    old, new = await _store(engine, OLD, NEW)
    before = msgspec.json.decode(await _fetch(engine, mode), type=Fetched)
    assert [(h.item.id, h.superseded_by) for h in before.hits] == [(new, None), (old, new)]
    # Another process's forget leaves this process's memo as it is; it lands after
    # this read ranked (NEW among the rest) and before its page.
    monkeypatch.setattr(_forget, "forget_all", lambda: None)
    vectors = engine._vectors
    assert vectors is not None
    rank = vectors.rank

    async def rank_then_forget(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:
        ranked = await rank(*args, **kwargs)
        monkeypatch.setattr(vectors, "rank", rank)
        await engine.forget(ids=[new])
        return ranked

    monkeypatch.setattr(vectors, "rank", rank_then_forget)
    after = msgspec.json.decode(await _fetch(engine, mode), type=Fetched)
    assert [(h.item.id, h.superseded_by) for h in after.hits] == [(old, None)]


async def test_two_stores_with_the_same_seqs_keep_their_own_candidates(
    engine: Engine, tmp_path: Path, clock: Clock, store_url: str | None
) -> None:
    memo.forget_all()
    await _store(engine, OLD, NEW)
    async with open_engine(
        tmp_path / "other", create=True, clock=clock, embedder=HashingEmbedder(), store=None
    ) as other:
        await _store(other, OTHER, MAYBE)
        for mode in ("exact", "semantic", "hybrid"):
            mine = msgspec.json.decode(await _fetch(engine, mode), type=Fetched)
            assert [h.superseded_by is not None for h in mine.hits] == [False, True]
            theirs = await _fetch(other, mode)
            hits = msgspec.json.decode(theirs, type=Fetched).hits
            assert len(hits) == 2
            assert all(h.superseded_by is None for h in hits)
            memo.forget_all()
            assert await _fetch(other, mode) == theirs


def _odd_vectors(dim: int) -> list[bytes]:
    """Vectors whose bits a conversion would change: NaN payloads, -0.0, subnormals."""
    words = [0x7FA00001, 0xFFC12345, 0x80000000, 0x00000001, 0x7F800000, 0x3F800000]
    return [struct.pack(f"<{dim}I", *[(w + k) & 0xFFFFFFFF for w in words]) for k in range(3)]


@pytest.mark.parametrize("with_numpy", [True, False])
def test_the_held_vectors_are_the_stored_ones_bit_for_bit(
    with_numpy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not with_numpy:
        monkeypatch.setattr(_resident, "_np", None)
    blobs = _odd_vectors(6)
    resident = _resident.Resident(6)
    resident.put([(k, f"c{k}", blob) for k, blob in enumerate(blobs)])
    resident.put([(9, "short", b"\x00" * 8)])  # not of the embedder's size: never held
    got = resident.vectors(["c2", "missing", "c0", "short", "c1"])
    assert got == {"c2": blobs[2], "c0": blobs[0], "c1": blobs[1]}
    resident.drop([0], ["c0"])
    assert resident.vectors(["c0", "c1"]) == {"c1": blobs[1]}


async def test_the_ranking_tells_the_snapshot_it_was_made_in(engine: Engine) -> None:
    await _store(engine, OLD, NEW, OTHER)
    vectors = engine._vectors
    assert vectors is not None
    sizes: list[int] = []
    ranked = await vectors.rank("1 = 1", [], QUERY, 10, sizes=sizes)
    assert len(ranked) == 3
    if vectors.pg is None:
        log = await engine._reader.rows("SELECT coalesce(max(seq), -1) + 1 FROM entries")
        assert sizes[-1] == log[0][0]
    else:  # ranked in the database: no snapshot of this process's to tell
        assert sizes == []
