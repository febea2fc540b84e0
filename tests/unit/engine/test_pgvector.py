"""Semantic ranking inside PostgreSQL (pgvector) agrees with the in-memory scan.

Runs on the pgvector test server only (``MEMSEAL_TEST_PGVECTOR``, from
``.ci/pgvector.sh``); the other stores rank in memory, and the engine tests
of tests/unit/engine run on all of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from stores import PGVECTOR, drop_schemas, fresh_url

import memseal
from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder, Learning, Reach
from memseal.ledger.store import Execute, Snapshots

pytestmark = pytest.mark.skipif(
    PGVECTOR is None, reason="no pgvector server (MEMSEAL_TEST_PGVECTOR; .ci/pgvector.sh)"
)

PLACE = "team:acme/agent:writer"
T = TypeVar("T")
TEXTS = [
    "The deploy pipeline runs on Tuesdays",
    "Deploying requires two approvals before the pipeline starts",
    "Lunch is at noon in the big room",
    "Rollbacks need a second reviewer",
    "The staging database listens on port 6543",
    "Dana prefers tea to coffee",
    "Tuesday deploys are frozen in December",
    "The pipeline runs on Tuesdays",  # near-duplicate: close scores
]
QUESTIONS = ["when does the pipeline run", "who reviews rollbacks", "tea or coffee", "port"]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    url, schema = fresh_url(adapter="pgvector")
    try:
        async with open_engine(
            tmp_path / "data", create=True, embedder=HashingEmbedder(), store=url
        ) as opened:
            yield opened
    finally:
        await drop_schemas([schema], "pgvector")


async def _rankings(engine: Engine) -> list[list[tuple[str, float]]]:
    out = []
    for question in QUESTIONS:
        fetched = await engine.fetch(question, mode="semantic", limit=8)
        out.append([(h.item.id, h.score) for h in fetched.hits])
    return out


async def test_the_database_ranks_as_the_in_memory_scan_does(engine: Engine) -> None:
    assert engine._vectors is not None and engine._vectors.pg is not None
    for text in TEXTS:
        await engine.store(Learning(text=text), namespace=PLACE)
    in_database = await _rankings(engine)
    engine._vectors.pg = None  # the path every store without pgvector takes
    in_memory = await _rankings(engine)
    assert in_database == in_memory
    assert all(len(r) == len(TEXTS) for r in in_database)


async def test_rows_without_the_column_are_filled_before_ranking(engine: Engine) -> None:
    assert engine._vectors is not None and engine._vectors.pg is not None
    for text in TEXTS:
        await engine.store(Learning(text=text), namespace=PLACE)
    expected = await _rankings(engine)
    # As a process that did not know the extension (or memseal migrate) leaves them.
    await engine._store.run(lambda txn: txn.execute("UPDATE engine_vectors SET emb = NULL"))
    assert await _rankings(engine) == expected
    unfilled = await engine._store.rows("SELECT count(*) FROM engine_vectors WHERE emb IS NULL")
    assert unfilled == [(0,)]


async def test_past_its_minimum_an_hnsw_index_proposes_and_the_answers_stay_exact(
    tmp_path: Path,
) -> None:
    url, schema = fresh_url(adapter="pgvector")
    try:
        async with memseal.open(
            tmp_path / "d", store=url, embedder=HashingEmbedder(), ann=0
        ) as memory:
            engine = memory.engine
            for text in TEXTS:
                await engine.store(Learning(text=text), namespace=PLACE)
            await engine.store(Learning(text="pipeline elsewhere"), namespace="team:other")
            through_index = await _rankings(engine)
            pg = engine._vectors.pg if engine._vectors is not None else None
            assert pg is not None and pg.hnsw
            made = await engine._store.rows(
                "SELECT count(*) FROM pg_indexes WHERE tablename = 'engine_vectors' "
                "AND indexname LIKE 'engine_vectors_hnsw_%'"
            )
            assert made == [(1,)]
            reach = Reach.subtree(PLACE)
            scoped = await engine.fetch("pipeline", mode="semantic", reach=reach, limit=8)
            assert all(h.item.namespace == PLACE for h in scoped.hits)
        async with memseal.open(
            tmp_path / "d", store=url, embedder=HashingEmbedder(), ann=None
        ) as memory:
            assert await _rankings(memory.engine) == through_index
    finally:
        await drop_schemas([schema], "pgvector")


class _AfterFirstRead:
    """The cache's reader, running ``then`` once, after the next read returns."""

    def __init__(self, inner: Snapshots, then: Callable[[], Awaitable[object]]) -> None:
        self._inner = inner
        self._then: Callable[[], Awaitable[object]] | None = then

    async def run(self, fn: Callable[[Execute], T]) -> T:
        result = await self._inner.run(fn)
        step, self._then = self._then, None
        if step is not None:
            await step()
        return result

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await self.run(lambda execute: execute(sql, params))

    async def close(self) -> None:
        await self._inner.close()


async def test_an_item_stored_between_the_gap_fill_and_the_ranking_is_still_found(
    tmp_path: Path,
) -> None:
    # A process with no embedder stores while a ranking fills the gaps it saw: the second
    # look finds a new gap, and that item must still take its place (scored from the same
    # snapshot), not be left out of the ranking for want of a vector.
    url, schema = fresh_url(adapter="pgvector")
    folder = tmp_path / "d"
    try:
        async with open_engine(
            folder, create=True, embedder=HashingEmbedder(), store=url
        ) as engine:
            assert engine._vectors is not None and engine._vectors.pg is not None
            for text in TEXTS:
                await engine.store(Learning(text=text), namespace=PLACE)
            async with open_engine(folder, store=url) as plain:  # another process, no embedder
                first = await plain.store(Learning(text="the canary deploy"), namespace=PLACE)
                late: list[str] = []

                async def store_late() -> None:
                    stored = await plain.store(Learning(text="a canary at dawn"), namespace=PLACE)
                    late.append(stored.id)

                vectors = engine._vectors
                vectors._reader = _AfterFirstRead(vectors._reader, store_late)
                fetched = await engine.fetch("a canary at dawn", mode="semantic", limit=20)
            assert late, "the interleaving did not happen"
            ids = [h.item.id for h in fetched.hits]
            assert ids[0] == late[0] and fetched.hits[0].score == 1.0
            assert first.id in ids and len(ids) == len(TEXTS) + 2
            # Its vector was made and kept: the next ranking finds no gap.
            gaps = await engine._store.rows(
                "SELECT count(*) FROM engine_items i LEFT JOIN engine_vectors v "
                "ON v.content = i.content WHERE v.emb IS NULL"
            )
            assert gaps == [(0,)]
    finally:
        await drop_schemas([schema], "pgvector")


async def test_the_index_mark_is_set_aside_when_the_projections_are_rebuilt(
    tmp_path: Path,
) -> None:
    # The mark "every item up to seq N is in the HNSW index" was made for one generation
    # of the items. After a rebuild an item below the mark may lack its ``emb`` (here as
    # a process unaware of the extension would leave it): the ranking must not trust the
    # old mark and leave that item out; it fills the gap and finds it.
    url, schema = fresh_url(adapter="pgvector")
    try:
        async with memseal.open(
            tmp_path / "d", store=url, embedder=HashingEmbedder(), ann=0
        ) as memory:
            engine = memory.engine
            for text in TEXTS:
                await engine.store(Learning(text=text), namespace=PLACE)
            before = await _rankings(engine)
            pg = engine._vectors.pg if engine._vectors is not None else None
            assert pg is not None and pg.hnsw and pg.high >= 0
            await engine.rebuild()
            await engine._store.run(
                lambda txn: txn.execute(
                    "UPDATE engine_vectors SET emb = NULL WHERE content IN "
                    "(SELECT content FROM engine_items WHERE text = ?)",
                    (TEXTS[0],),
                )
            )
            assert await _rankings(engine) == before
            unfilled = await engine._store.rows(
                "SELECT count(*) FROM engine_vectors WHERE emb IS NULL"
            )
            assert unfilled == [(0,)]
    finally:
        await drop_schemas([schema], "pgvector")
