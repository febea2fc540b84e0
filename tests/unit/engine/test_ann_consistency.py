"""The in-memory vectors and HNSW index under races: forgets, rebuilds here and elsewhere.

Each race is forced, not hoped for: :class:`Interleave` wraps the vector cache's
reader (the real one, on a real SQLite file) and runs a step of the test right
after one read returns and before the ranking that made it goes on, which is
exactly the window the race needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import memseal
from memseal.engine import HashingEmbedder, Learning
from memseal.engine._resident import Resident, Tombstones
from memseal.engine._vectors import pack
from memseal.ledger.store import Execute, Snapshots

PLACE = "team:acme/agent:writer"
T = TypeVar("T")


class Interleave:
    """A reader that runs ``then`` once, after the next read (or the ``after``-th from now)
    returns to its caller."""

    def __init__(self, inner: Snapshots) -> None:
        self._inner = inner
        self.then: Callable[[], Awaitable[object]] | None = None
        self.after = 1
        self.ran = False

    async def run(self, fn: Callable[[Execute], T]) -> T:
        result = await self._inner.run(fn)
        self.after -= 1
        step = self.then if self.after == 0 else None
        if step is not None:
            self.then = None
            await step()
            self.ran = True
        return result

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await self.run(lambda execute: execute(sql, params))

    async def close(self) -> None:
        await self._inner.close()


def _open(folder: Path, ann: int | None = 0) -> Any:
    # The currency rule is off: these tests ask which item the index finds, and the rule
    # would lift a newer near-duplicate note above it.
    return memseal.open(folder, embedder=HashingEmbedder(dim=32), ann=ann, currency=False)


def _interleave(engine: Any) -> Interleave:
    vectors = engine._vectors
    wrapped = Interleave(vectors._reader)
    vectors._reader = wrapped
    return wrapped


def _damage(folder: Path, item_id: str) -> None:
    """Delete one item's projection row behind the engine's back (a damaged projection)."""
    with contextlib.closing(sqlite3.connect(folder / "ledger.db", isolation_level=None)) as conn:
        conn.execute("DELETE FROM engine_items WHERE id = ?", (item_id,))


async def _rebuild_elsewhere(folder: Path) -> str:
    """`memseal rebuild` in its own process, on the same SQLite file; its output."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "memseal.cli", "rebuild", "--data", str(folder)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), timeout=120)
    assert child.returncode == 0, err.decode()[-800:]
    return out.decode()


async def test_a_forget_between_the_catch_up_read_and_its_add_leaves_no_copy(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        for i in range(5):
            await engine.store(Learning(text=f"release note {i}"), namespace=PLACE)
        await engine.fetch("release", mode="semantic")
        assert engine.ann_size == 5
        late = await engine.store(Learning(text="the late release note"), namespace=PLACE)
        reader = _interleave(engine)

        async def forget_it() -> None:
            await engine.forget(ids=[late.id])

        # The search finds the index behind; the catch-up reads the late item (live in its
        # snapshot); the forget commits and drops this process's copies; only then would
        # the catch-up hold and add it.
        reader.then, reader.after = forget_it, 2
        fetched = await engine.fetch("the late release note", mode="semantic")
        assert reader.ran
        assert late.id not in [h.item.id for h in fetched.hits]
        assert engine.ann_size == 5
        assert engine._vectors.resident.unknown([late.seq]) == [late.seq]
        # The next catch-up reads a snapshot holding the forget: still no copy.
        again = await engine.fetch("the late release note", mode="semantic")
        assert late.id not in [h.item.id for h in again.hits] and len(again.hits) == 5
        assert engine.ann_size == 5
        assert engine._vectors.resident.unknown([late.seq]) == [late.seq]


def test_a_load_from_a_snapshot_older_than_a_forget_is_refused_then_allowed() -> None:
    tombstones = Tombstones()
    resident = Resident(16, tombstones)
    blob = pack(HashingEmbedder(16).embed(["alpha"])[0])
    with tombstones.reading():
        tombstones.mark([3], stamp=10)  # forgotten by entry 10, not yet committed
        # A snapshot of 10 entries (seqs 0..9) still sees item 3 live: refused ...
        assert resident.put([(3, "c", blob)], seen=10) == [3]
        assert resident.unknown([3]) == [3]
        # ... yet it is scored for that one ranking, not held.
        assert resident.rank([3], blob, 5, loose=[(3, blob)]) == [(3, 1.0)]
        tombstones.saw(11)  # a snapshot holding entry 10 was read
        assert len(tombstones) == 1  # kept while a read that may predate it runs
    assert len(tombstones) == 0  # no read in flight: the mark has nothing left to stop
    # Entry 10 was rolled back and another took its seq: a later snapshot takes item 3 in.
    assert resident.put([(3, "c", blob)], seen=11) == []
    assert resident.unknown([3]) == []


async def test_a_read_overtaken_by_a_rebuild_starts_again_on_the_new_generation(
    tmp_path: Path,
) -> None:
    # The index (built over a damaged projection) lacks one item. A read finds the index
    # behind (one item stored since) and catches up on the old generation, the rebuild
    # restores the item and commits, and the read's next snapshot is of the new
    # projection: searching it with the old index would miss the item.
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        engine = memory.engine
        texts = [f"incident review {i} for the payments team" for i in range(6)]
        items = [await engine.store(Learning(text=t), namespace=PLACE) for t in texts]
        _damage(memory.folder, items[2].id)
        await engine.fetch("incident review", mode="semantic")
        assert engine.ann_size == 5
        await engine.store(Learning(text="an unrelated memo"), namespace=PLACE)
        before = engine._vectors.generation
        reader = _interleave(engine)

        async def rebuild() -> None:
            await engine.rebuild()

        reader.then, reader.after = rebuild, 2
        fetched = await engine.fetch(texts[2], mode="semantic", limit=3)
        assert reader.ran
        assert engine._vectors.generation == before + 1
        assert fetched.hits[0].item.id == items[2].id
        assert engine.ann_size == 7


async def test_a_rebuild_by_another_process_is_noticed_and_the_index_made_afresh(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        engine = memory.engine
        texts = [f"quarterly plan {i} for the platform group" for i in range(6)]
        items = [await engine.store(Learning(text=t), namespace=PLACE) for t in texts]
        _damage(memory.folder, items[4].id)
        await engine.fetch("quarterly plan", mode="semantic")
        assert engine.ann_size == 5
        before = engine._vectors.generation
        # `memseal rebuild` in its own process, on the same SQLite file, while this one runs.
        done = await _rebuild_elsewhere(folder)
        assert "rebuilt 6 items" in done  # the deleted row is back
        fetched = await engine.fetch(texts[4], mode="semantic", limit=3)
        assert fetched.hits[0].item.id == items[4].id
        assert engine._vectors.generation == before + 1
        assert engine.ann_size == 6


async def test_a_rebuild_by_another_process_refreshes_the_exact_scan_too(
    tmp_path: Path,
) -> None:
    # Without an index the resident vectors are still keyed by seq: a projection whose row
    # held another item's content (damage) is corrected by the rebuild, and the vector
    # this process held for that seq must not outlive it.
    folder = tmp_path / "d"
    async with _open(folder, ann=None) as memory:
        engine = memory.engine
        first = await engine.store(Learning(text="the office is in porto"), namespace=PLACE)
        other = await engine.store(Learning(text="dana prefers green tea"), namespace=PLACE)
        with contextlib.closing(
            sqlite3.connect(memory.folder / "ledger.db", isolation_level=None)
        ) as conn:
            content, text = conn.execute(
                "SELECT content, text FROM engine_items WHERE seq = ?", (other.seq,)
            ).fetchone()
            conn.execute(
                "UPDATE engine_items SET content = ?, text = ? WHERE seq = ?",
                (content, text, first.seq),
            )
        damaged = await engine.fetch("the office is in porto", mode="semantic")
        assert max(h.score for h in damaged.hits) < 0.99  # seq `first` holds the other vector
        await _rebuild_elsewhere(folder)
        fetched = await engine.fetch("the office is in porto", mode="semantic")
        assert fetched.hits[0].item.id == first.id and fetched.hits[0].score == 1.0


async def test_a_rebuild_reports_the_index_build_through_its_progress(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        stored = [await engine.store(Learning(text=f"note {i}"), namespace=PLACE) for i in range(7)]
        await engine.forget(ids=[stored[0].id])  # 8 entries, 6 items: two different totals
        calls: list[tuple[int, int]] = []
        report = await engine.rebuild(progress=lambda done, total: calls.append((done, total)))
        assert report.entries == 8
        assert (8, 8) in calls  # the replay, entries
        assert calls[-1] == (6, 6)  # then the index, items
        assert calls.index((8, 8)) < calls.index((6, 6))


async def test_a_forget_rolled_back_with_its_command_leaves_the_item_in_the_index(
    tmp_path: Path,
) -> None:
    # A caller owning the transaction (a recorded call writes its memo beside the forget)
    # fails after the forget's command ran: the savepoint rolls the forget back. The item
    # is live, and index-served rankings must still find it, as the exact scan does.
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        stored = [
            await engine.store(Learning(text=f"release note {i}"), namespace=PLACE)
            for i in range(6)
        ]
        await engine.fetch("release", mode="semantic")
        assert engine.ann_size == 6
        command, _release = engine.plan_forget(ids=[stored[2].id])

        def forget_then_fail(txn: Any) -> None:
            command(txn)
            raise RuntimeError("the memo write failed")

        with contextlib.suppress(RuntimeError):
            await engine._store.run(forget_then_fail)
        assert engine.ann_size == 6
        fetched = await engine.fetch("release note 2", mode="semantic")
        assert fetched.hits[0].item.id == stored[2].id
        assert len(fetched.hits) == 6
        # A forget that commits lets go of the copies once its caller finishes it.
        command, release = engine.plan_forget(ids=[stored[2].id])
        await engine._store.run(command)
        release()
        assert engine.ann_size == 5
        assert engine._vectors.resident.unknown([stored[2].seq]) == [stored[2].seq]


class _HeldWriter:
    """Holds the writer on a command of its own until released, so a test can cancel a
    caller whose command is queued behind it (submitted, not yet committed)."""

    def __init__(self, memory: memseal.Memory) -> None:
        self._store: Any = memory.engine._store
        self._go = threading.Event()
        self._held = asyncio.ensure_future(self._store.run(lambda txn: self._go.wait(10)))

    async def queued(self) -> None:
        # The group writer's queue (internal): a caller's command waits in it, submitted,
        # while the writer thread holds the first.
        for _ in range(1_000):
            if self._store._group._jobs.qsize():
                return
            await asyncio.sleep(0.005)
        raise AssertionError("the command never reached the writer")

    async def release(self) -> None:
        self._go.set()
        await self._held
        # The writer runs commands in order: once a later one committed, so did the
        # queued one, whose settle callback was scheduled before this one resolved.
        await self._store.run(lambda txn: None)
        await asyncio.sleep(0)


async def test_a_forget_whose_caller_is_cancelled_still_lets_go_of_its_vectors(
    tmp_path: Path,
) -> None:
    # The writer commits a forget whose caller stopped waiting (a dropped request, a
    # timeout). Its in-memory vectors must go with that commit, not with the caller.
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        stored = [
            await engine.store(Learning(text=f"cancel note {i}"), namespace=PLACE) for i in range(6)
        ]
        await engine.fetch("cancel", mode="semantic")
        assert engine.ann_size == 6
        writer = _HeldWriter(memory)
        await asyncio.sleep(0.05)  # the writer holds its own command
        caller = asyncio.ensure_future(engine.forget(ids=[stored[1].id]))
        await writer.queued()
        caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        await writer.release()
        assert (await engine.get([stored[1].id])).missing == (stored[1].id,)
        assert engine.ann_size == 5
        assert engine._vectors.resident.unknown([stored[1].seq]) == [stored[1].seq]


async def test_a_recorded_forget_whose_caller_is_cancelled_still_lets_go_of_its_vectors(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        for i in range(4):
            await engine.store(Learning(text=f"tool note {i}"), namespace=PLACE)
        await engine.fetch("tool", mode="semantic")
        assert engine.ann_size == 4
        async with memory.run("cancelled-forget", memseal.ToolScope.placed_at(PLACE)) as run:
            listed = await run.call("memory_list", {})
            first = listed["items"][0]["id"]
            writer = _HeldWriter(memory)
            await asyncio.sleep(0.05)
            caller = asyncio.ensure_future(run.call("memory_forget", {"ids": [first]}))
            await writer.queued()
            caller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await caller
            await writer.release()
        assert (await engine.get([first])).missing == (first,)
        assert engine.ann_size == 3
