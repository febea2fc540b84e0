"""A PostgreSQL server that drops memseal's connections (a restart, a failover, an admin's
``pg_terminate_backend``): the next reads and writes go through on new connections.

Reads are tried once more on a new connection when theirs turns out broken;
a write transaction is begun once more when its BEGIN finds the connection
broken (nothing was sent yet). A write that was in flight when the
connection went is not retried: its outcome is reported as unknown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from _scale import SCALE
from stores import POSTGRES, drop_schemas, fresh_url

import memseal
from memseal import ToolScope
from memseal.engine import HashingEmbedder, Learning

pytestmark = pytest.mark.skipif(
    POSTGRES is None, reason="no PostgreSQL test server (MEMSEAL_TEST_POSTGRES; .ci/postgres.sh)"
)

PLACE = "team:acme/agent:writer"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    made, schema = fresh_url("reconnect")
    # The store passes other URL parameters to libpq: naming the connections after the
    # schema lets the test drop its own and leave the other tests' (run in parallel) alone.
    try:
        yield f"{made}&application_name={schema}"
    finally:
        await drop_schemas([schema])


async def _drop_every_connection_but_mine(url: str) -> int:
    assert POSTGRES
    (name,) = parse_qs(urlsplit(url).query)["application_name"]
    async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_reads_and_writes_go_on_after_the_server_drops_the_connections(
    tmp_path: Path, url: str
) -> None:
    async with memseal.open(
        tmp_path / "data", store=url, embedder=HashingEmbedder(), checkpoint_interval=None
    ) as memory:
        scope = ToolScope.placed_at(PLACE)
        first = await memory.engine.store(
            Learning(text="the deploy runs on Tuesdays"), namespace=PLACE
        )
        assert (await memory.engine.fetch("deploy", mode="hybrid")).hits
        async with memory.run("r1", scope) as run:
            await run.call("memory_fetch", {"query": "deploy"})
        size = await memory.ledger.size()

        assert await _drop_every_connection_but_mine(url) >= 3  # writer, reader, snapshots
        # Snapshot reads (the engine), the reader connection (the ledger), the writer.
        hits = (await memory.engine.fetch("deploy", mode="hybrid")).hits
        assert [h.item.id for h in hits] == [first.id]
        assert await memory.ledger.size() == size
        second = await memory.engine.store(Learning(text="rollbacks need two"), namespace=PLACE)
        assert second.seq == size

        await _drop_every_connection_but_mine(url)
        async with memory.run("r1", scope) as run:  # resumes: the memo read, then live
            await run.call("memory_fetch", {"query": "deploy"})
            await run.call("memory_store", {"learning": {"text": "written after the drop"}})
        for round in range(SCALE):  # MEMSEAL_ATTACK_SCALE: more drops, each mid-session
            await _drop_every_connection_but_mine(url)
            await memory.engine.store(Learning(text=f"round {round} after a drop"), namespace=PLACE)
        await _drop_every_connection_but_mine(url)
        assert await memory.ledger.inclusion_proof(0, size)  # the Merkle reads' connection
        await _drop_every_connection_but_mine(url)
        summary = await memory.ledger.verify(memory.trust_root)
        assert summary.size == await memory.ledger.size() > size
