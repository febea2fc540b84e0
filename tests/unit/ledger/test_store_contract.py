"""The log-store contract: every adapter passes these unchanged.

An adapter is reached through the ``store`` fixture, parametrised by
adapter name; the PostgreSQL adapter joins the list when it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from memseal.ledger.entry import GENESIS_PREV, Draft, decode_entry, leaf_hash, make_draft
from memseal.ledger.errors import InvalidRequest, NotFound, StorageError
from memseal.ledger.note import NoteSigner
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.store import Appended, LogStore, WriteTxn

SIGNER = NoteSigner.from_seed("contract-test", bytes(range(32)))
ADAPTERS = ["sqlite"]
# A DSN (e.g. from .ci/postgres.sh) adds the PostgreSQL adapter: one fresh schema per test.
POSTGRES = os.environ.get("MEMSEAL_TEST_POSTGRES")
if POSTGRES:
    ADAPTERS.append("postgres")
_schemas: set[str] = set()  # made by this test; dropped after it


async def _open(adapter: str, where: Path) -> SqliteLogStore:
    if adapter == "postgres":
        from memseal.ledger.postgres import PostgresLogStore

        assert POSTGRES
        # The same folder reopens the same schema (the reopen tests); a new test gets a new one.
        schema = "contract_" + hashlib.blake2b(str(where).encode(), digest_size=8).hexdigest()
        if schema not in _schemas:
            await _drop_schemas([schema])
            _schemas.add(schema)
        # Typed as the SQLite store, as the tests are: both offer rows() and exclusive().
        store: Any = PostgresLogStore(POSTGRES, SIGNER, schema=schema)
    else:
        assert adapter == "sqlite"
        store = SqliteLogStore(where / "ledger.db", SIGNER)
    store.add_schema("CREATE TABLE IF NOT EXISTS side (seq INTEGER PRIMARY KEY, note TEXT)")
    await store.open()
    return cast(SqliteLogStore, store)


async def _drop_schemas(schemas: list[str]) -> None:
    import psycopg
    from psycopg import sql

    assert POSTGRES
    async with await psycopg.AsyncConnection.connect(POSTGRES, autocommit=True) as conn:
        await conn.execute("SET client_min_messages TO warning")
        for schema in schemas:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


@pytest.fixture(autouse=True)
async def _postgres_cleanup() -> AsyncIterator[None]:
    yield
    if _schemas:
        made = sorted(_schemas)
        _schemas.clear()
        await _drop_schemas(made)


@pytest.fixture(params=ADAPTERS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqliteLogStore]:
    opened = await _open(request.param, tmp_path)
    yield opened
    await opened.close()


def _append(draft: Draft) -> object:
    def command(txn: WriteTxn) -> Appended:
        return txn.append(draft)

    return command


async def append(store: LogStore, n: int = 1, payload: bool = True) -> list[Appended]:
    out = []
    for i in range(n):
        draft = make_draft("note", {"i": i}, {"text": f"t{i}"} if payload else None)
        out.append(await store.run(lambda txn, d=draft: txn.append(d)))  # type: ignore[misc]
    return out


async def test_an_empty_store_has_no_head(store: LogStore) -> None:
    head = await store.head()
    assert (head.size, head.leaf_hash) == (0, None)
    assert [r async for r in store.scan()] == []
    with pytest.raises(NotFound):
        await store.read(0)


async def test_appends_chain_and_read_back(store: LogStore) -> None:
    appended = await append(store, 5)
    assert [a.seq for a in appended] == [0, 1, 2, 3, 4]
    records = [r async for r in store.scan()]
    assert [r.seq for r in records] == [0, 1, 2, 3, 4]
    prev = GENESIS_PREV
    for a, r in zip(appended, records, strict=True):
        entry = decode_entry(r.leaf)
        assert entry.prev == prev
        assert leaf_hash(r.leaf) == r.leaf_hash == a.leaf_hash
        assert SIGNER.verifier.verify(b"memseal/entry/v1\x00" + r.leaf_hash, r.signature)
        prev = r.leaf_hash.hex()
    head = await store.head()
    assert head.size == 5
    assert head.leaf_hash == appended[-1].leaf_hash
    assert (await store.read(3)).leaf == records[3].leaf


async def test_scan_respects_its_range(store: LogStore) -> None:
    await append(store, 7)
    assert [r.seq async for r in store.scan(2, 5)] == [2, 3, 4]
    assert [r.seq async for r in store.scan(5)] == [5, 6]
    assert [r.seq async for r in store.scan(9)] == []


async def test_a_failing_command_rolls_back_alone(store: SqliteLogStore) -> None:
    good = make_draft("note", {"ok": True}, {"text": "kept"})

    def fails(txn: WriteTxn) -> None:
        txn.append(make_draft("note", {"ok": False}, {"text": "rolled back"}))
        txn.execute("INSERT INTO side (seq, note) VALUES (?, ?)", (txn.size - 1, "gone"))
        raise ValueError("boom")

    def keeps(txn: WriteTxn) -> Appended:
        done = txn.append(good)
        txn.execute("INSERT INTO side (seq, note) VALUES (?, ?)", (done.seq, "kept"))
        return done

    # Submitted in one turn of the loop: they share one group commit.
    results = await asyncio.gather(
        store.run(keeps), store.run(fails), store.run(keeps), return_exceptions=True
    )
    assert isinstance(results[1], ValueError)
    first, third = results[0], results[2]
    assert isinstance(first, Appended) and isinstance(third, Appended)
    assert (first.seq, third.seq) == (0, 1)  # no gap where the failed command appended
    records = [r async for r in store.scan()]
    assert [r.payload for r in records] == [b'{"text":"kept"}'] * 2
    assert decode_entry(records[1].leaf).prev == records[0].leaf_hash.hex()
    assert await store.rows("SELECT seq, note FROM side ORDER BY seq") == [(0, "kept"), (1, "kept")]


async def test_redaction_erases_payload_and_mentions(store: LogStore) -> None:
    draft = make_draft("note", {"i": 0}, {"text": "secret"}, mentions=["item:a", "item:b"])
    await store.run(lambda txn: txn.append(draft))
    await append(store, 1)
    assert await store.mentioning("item:a") == [0]
    forget = make_draft("forget", {"ids": ["item:a"]}, redacts=[0])
    await store.run(lambda txn: txn.append(forget))
    record = await store.read(0)
    assert record.payload is None and record.salt is None
    assert await store.mentioning("item:a") == []
    assert await store.mentioning("item:b") == []
    assert await store.payloads_present([0, 1]) == [1]
    assert await store.redacted_by(0) == 2
    assert await store.redacted_by(1) is None


async def test_a_redaction_must_name_earlier_seqs(store: LogStore) -> None:
    await append(store, 1)
    future = make_draft("forget", {}, redacts=[5])
    with pytest.raises(InvalidRequest, match="earlier"):
        await store.run(lambda txn: txn.append(future))
    assert (await store.head()).size == 1


async def test_appends_survive_a_reopen(tmp_path: Path) -> None:
    for adapter in ADAPTERS:
        where = tmp_path / adapter
        where.mkdir()
        first = await _open(adapter, where)
        written = await append(first, 3)
        await first.close()
        second = await _open(adapter, where)
        try:
            assert (await second.head()).leaf_hash == written[-1].leaf_hash
            more = await append(second, 1)
            assert more[0].seq == 3
        finally:
            await second.close()


async def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    for adapter in ADAPTERS:
        opened = await _open(adapter, tmp_path)
        await opened.close()
        with pytest.raises(StorageError, match="closed"):
            await append(opened, 1)


async def test_close_drains_commands_already_submitted(tmp_path: Path) -> None:
    for adapter in ADAPTERS:
        opened = await _open(adapter, tmp_path)
        drafts = [make_draft("note", {"i": i}) for i in range(20)]
        tasks = [
            asyncio.ensure_future(opened.run(lambda t, d=d: t.append(d)))  # type: ignore[misc]
            for d in drafts
        ]
        await asyncio.sleep(0)
        await opened.close()
        done = await asyncio.gather(*tasks)
        assert sorted(a.seq for a in done) == list(range(20))
        reopened = await _open(adapter, tmp_path)
        try:
            assert (await reopened.head()).size == 20
        finally:
            await reopened.close()


async def test_exclusive_work_runs_between_groups_outside_a_transaction(
    store: SqliteLogStore,
) -> None:
    await append(store, 2)

    def maintain(conn: object) -> bool:
        # Each adapter hands over its own driver's connection, idle: run that engine's
        # own maintenance, which refuses to run inside a transaction.
        import sqlite3

        if isinstance(conn, sqlite3.Connection):
            assert not conn.in_transaction
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            import psycopg

            assert isinstance(conn, psycopg.Connection)
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            conn.execute("VACUUM payloads")
        return True

    first = asyncio.ensure_future(append(store, 1))
    assert await store.exclusive(maintain) is True
    await first
    assert (await store.head()).size == 3


async def test_a_savepoint_rolls_back_its_part_of_a_command(store: SqliteLogStore) -> None:
    def command(txn: WriteTxn) -> int:
        txn.append(make_draft("note", {"kept": 1}))
        try:
            with txn.savepoint():
                txn.append(make_draft("note", {"kept": 0}))
                txn.execute("INSERT INTO side (seq, note) VALUES (?, ?)", (99, "gone"))
                raise KeyError("inner failure")
        except KeyError:
            pass
        return txn.append(make_draft("note", {"kept": 2})).seq

    assert await store.run(command) == 1
    bodies = [bytes(r.entry().body) async for r in store.scan()]
    assert bodies == [b'{"kept":1}', b'{"kept":2}']
    assert await store.rows("SELECT * FROM side") == []


async def test_a_failing_insert_fails_its_own_command(store: SqliteLogStore) -> None:
    # The failing INSERT is the command's last statement: on PostgreSQL it is sent
    # without waiting, and its error must still fail this command, not the next one.
    await store.run(lambda txn: txn.execute("INSERT INTO side (seq, note) VALUES (7, 'first')"))

    def duplicate(txn: WriteTxn) -> Appended:
        done = txn.append(make_draft("note", {"ok": False}))
        txn.execute("INSERT INTO side (seq, note) VALUES (7, 'again')")
        return done

    def keeps(txn: WriteTxn) -> Appended:
        done = txn.append(make_draft("note", {"ok": True}))
        txn.execute("INSERT INTO side (seq, note) VALUES (?, ?)", (done.seq, "kept"))
        return done

    results = await asyncio.gather(
        store.run(keeps), store.run(duplicate), store.run(keeps), return_exceptions=True
    )
    assert isinstance(results[1], StorageError), results[1]
    first, third = results[0], results[2]
    assert isinstance(first, Appended) and isinstance(third, Appended)
    assert (first.seq, third.seq) == (0, 1)
    bodies = [bytes(r.entry().body) async for r in store.scan()]
    assert bodies == [b'{"ok":true}'] * 2
    assert await store.rows("SELECT seq, note FROM side ORDER BY seq") == [
        (0, "kept"),
        (1, "kept"),
        (7, "first"),
    ]


async def test_a_failing_insert_rolls_back_its_own_savepoint(store: SqliteLogStore) -> None:
    await store.run(lambda txn: txn.execute("INSERT INTO side (seq, note) VALUES (7, 'first')"))

    def command(txn: WriteTxn) -> int:
        txn.append(make_draft("note", {"kept": 1}))
        failed = False
        try:
            with txn.savepoint():
                txn.append(make_draft("note", {"kept": 0}))
                txn.execute("INSERT INTO side (seq, note) VALUES (7, 'again')")
        except Exception:
            failed = True  # the unit's own error, raised inside it
        assert failed
        txn.execute("INSERT INTO side (seq, note) VALUES (8, 'after')")
        return txn.append(make_draft("note", {"kept": 2})).seq

    assert await store.run(command) == 1
    bodies = [bytes(r.entry().body) async for r in store.scan()]
    assert bodies == [b'{"kept":1}', b'{"kept":2}']
    assert await store.rows("SELECT seq, note FROM side ORDER BY seq") == [
        (7, "first"),
        (8, "after"),
    ]


async def test_a_command_that_swallows_a_database_error_harms_no_later_command(
    store: SqliteLogStore,
) -> None:
    # On PostgreSQL the failed insert is sent ahead and its error surfaces later, where this
    # command catches it and goes on writing into the aborted transaction. Its statements,
    # run more often than the driver's prepare threshold, once left a prepared statement
    # the server never made, and every later append failed until a restart.
    await store.run(lambda txn: txn.execute("INSERT INTO side (seq, note) VALUES (7, 'first')"))

    def swallowing(txn: WriteTxn) -> None:
        txn.execute("INSERT INTO side (seq, note) VALUES (7, 'again')")
        with contextlib.suppress(Exception), txn.savepoint():
            txn.append(make_draft("note", {"nested": 1}))
        txn.append(make_draft("note", {"after": 1}))

    def plain(n: int, payload: dict[str, str] | None = None) -> Any:
        return lambda txn: txn.append(make_draft("note", {"r": n}, payload)).seq

    for round_ in range(8):
        outcomes = await asyncio.gather(
            store.run(plain(round_)),
            store.run(swallowing),
            store.run(plain(round_, {"t": "p"})),
            return_exceptions=True,
        )
        assert isinstance(outcomes[1], StorageError), outcomes
        assert all(isinstance(o, int) for o in (outcomes[0], outcomes[2])), outcomes
    assert [bytes(r.entry().body) async for r in store.scan()] == [
        body for n in range(8) for body in (f'{{"r":{n}}}'.encode(),) * 2
    ]
    assert await store.rows("SELECT seq, note FROM side ORDER BY seq") == [(7, "first")]


@pytest.mark.skipif(not POSTGRES, reason="needs MEMSEAL_TEST_POSTGRES")
async def test_postgres_sends_a_groups_row_writes_ahead(tmp_path: Path) -> None:
    # A round trip (~0.4 ms) per statement was most of a recorded call's time on
    # PostgreSQL: statements returning no rows wait for nothing but their unit's end.
    # The writer's connection is psycopg's, not sqlite3's as _open types it.
    store: Any = await _open("postgres", tmp_path)
    commands, inserts = 10, 3
    try:
        await append(store, 1)  # the Merkle edge and the key, read once before tracing
        with tempfile.TemporaryFile() as trace:
            await store.exclusive(lambda conn: conn.pgconn.trace(trace.fileno()))

            def command(txn: WriteTxn) -> Appended:
                done = txn.append(make_draft("note", {"i": 1}, {"text": "t"}))
                for k in range(inserts):
                    txn.execute(
                        "INSERT INTO side (seq, note) VALUES (?, ?)", (done.seq * 10 + k, "x")
                    )
                return done

            done = await asyncio.gather(*(store.run(command) for _ in range(commands)))
            await store.exclusive(lambda conn: conn.pgconn.untrace())
            trace.seek(0)
            lines = trace.read().decode(errors="replace").splitlines()
        assert [d.seq for d in done] == list(range(1, commands + 1))
        # Each answer the client waits for: ReadyForQuery (a Sync or a simple query)
        # or a Flush (a read inside the pipeline).
        waits = sum(1 for line in lines if "\tReadyForQuery" in line or "\tF\t4\tFlush" in line)
        statements = commands * (inserts + 3)  # SAVEPOINT, the entry, the inserts, RELEASE
        assert waits <= commands + 10 < statements, (waits, statements)
        assert len(await store.rows("SELECT seq FROM side")) == commands * inserts
    finally:
        await store.close()
