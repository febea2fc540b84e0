"""The PostgreSQL log store: the same tables and the same unit of work as SQLite.

Driver: psycopg 3. A command (:data:`~.store.Command`) is a plain synchronous
function that calls :meth:`WriteTxn.execute` and uses the rows at once, and
the Merkle functions read tree hashes synchronously; psycopg offers a sync
and an async connection with the same adapters, so the writer (and
:meth:`PostgresLogStore.tree_read`) run on a thread with a sync connection,
one thread hop per group commit through the writer both adapters share
(:mod:`._writer`), while the other reads use an
:class:`psycopg.AsyncConnection`. asyncpg is async only: every statement of
a command would have to hop from the writer thread back to the event loop.

One writer at a time, across processes: each group commit runs in one
``BEGIN ISOLATION LEVEL READ COMMITTED`` transaction that first takes
``pg_advisory_xact_lock(key)`` (the key is derived from the schema, so two
ledgers in one database do not contend), and only then reads the head of
the chain (a fresh statement snapshot, so it sees the previous writer's
commit). The lock is released by COMMIT or ROLLBACK, also when a process
dies. Several processes on one database therefore append in turn: seqs stay
gapless, the chain and the tree never fork.

Group commit as in SQLite (:mod:`._writer`, :mod:`._txn`): commands submitted
together run in one transaction as one unit, their rows held and written as one
multi-row INSERT a table; if anything fails, the group runs again with each
command inside ``SAVEPOINT command``, so the one that raises is rolled back
alone. The group's dedupe lookups (:meth:`~._txn.LogTxn.lookup`) are taken as
absent and read in one statement at its end; one found runs the group again as
one unit with each lookup read at once. Every attempt runs in one psycopg
pipeline: a statement returning no rows is sent without waiting for its answer,
and each unit waits for all of them at its end (:meth:`PostgresTxn.execute`, in
:mod:`._pg_txn` with the rest of the transaction's statements), so a failing
INSERT still fails its own unit.
Durability: the writer sets ``synchronous_commit = on`` for its session
(PostgreSQL's default, enforced here against a weaker database or role
default), so COMMIT returns after the WAL is flushed, and
:meth:`PostgresLogStore.run` resolves after the COMMIT.

Dialect of :meth:`PostgresTxn.execute` and :meth:`PostgresLogStore.rows`:
PostgreSQL SQL with ``?`` placeholders, as the SQLite adapter takes, so
the callers' statements stay portable where the SQL is. A ``?`` outside
quotes, identifiers, dollar-quoted strings and comments becomes ``%s``
and every ``%`` becomes ``%%`` (psycopg's parameter syntax); the jsonb
operators ``?``, ``?|`` and ``?&`` are therefore not available (write
``jsonb_exists``, ``jsonb_exists_any``, ``jsonb_exists_all``), and quotes
inside a string are doubled (``'it''s'``), not backslash-escaped (``E'\\''``).

Known difference from SQLite: an erased payload's bytes stay in a dead
tuple until VACUUM reclaims it (SQLite's ``secure_delete`` zeroes them at
once); run ``VACUUM payloads, mentions`` through :meth:`PostgresLogStore.exclusive`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from ._pg_sql import translate_placeholders
from ._pg_txn import Conn, PostgresAppendHook, PostgresTxn, read_tree
from ._reads import RecordReads
from ._setup import (
    SCHEMA_VERSION,
    StoreSetup,
    check_version,
    head_of,
    records_of,
    translator,
    utcnow,
)
from ._snapshots import SnapshotPool
from ._writer import Job
from .errors import StorageError
from .location import hide_password
from .note import NoteSigner
from .store import Head, Record

__all__ = ["PostgresAppendHook", "PostgresLogStore", "PostgresTxn", "translate_placeholders"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq  BIGINT PRIMARY KEY,
    leaf BYTEA NOT NULL,
    hash BYTEA NOT NULL,
    sig  BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS payloads (
    seq  BIGINT PRIMARY KEY,
    salt BYTEA NOT NULL,
    data BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS mentions (
    ref TEXT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (ref, seq)
);
CREATE INDEX IF NOT EXISTS mentions_by_seq ON mentions (seq);
CREATE TABLE IF NOT EXISTS tree (idx BIGINT PRIMARY KEY, hash BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS redactions (seq BIGINT PRIMARY KEY, by_seq BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    size BIGINT PRIMARY KEY,
    root BYTEA NOT NULL,
    note TEXT NOT NULL,
    at   TEXT NOT NULL
)
"""


def _lock_key(schema: str) -> int:
    """The advisory-lock key of one ledger: a signed 64-bit hash of its schema's name."""
    digest = hashlib.blake2b(f"memseal/ledger-writer/{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _ReadSession:
    """A read-only connection of a snapshot pool thread (see :mod:`._snapshots`).

    Each query runs in one REPEATABLE READ transaction: every statement of it
    sees the same snapshot, as a SQLite read transaction does.
    """

    def __init__(self, connect: Callable[[], Conn]) -> None:
        self._conn = connect()
        self._conn.execute("SET default_transaction_read_only TO on")

    def begin(self) -> None:
        self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def end(self) -> None:
        if not self._conn.broken:
            self._conn.execute("ROLLBACK")

    def execute(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cur = self._conn.execute(translate_placeholders(sql), list(params))
        return cur.fetchall() if cur.description is not None else []

    def close(self) -> None:
        self._conn.close()

    @property
    def broken(self) -> bool:
        return self._conn.broken


class PostgresLogStore(
    StoreSetup[PostgresTxn, Conn, psycopg.AsyncConnection[TupleRow]], RecordReads
):
    """The log store on PostgreSQL (see the module docstring).

    ``dsn`` is a libpq connection string or URI. ``schema``, when given, holds
    the ledger's tables (made if missing); otherwise they go to the first
    schema of the role's ``search_path``.
    """

    #: The SQL the store's ``execute`` and ``rows`` take (see :class:`~.store.SqlStore`).
    dialect: Final = "postgresql"

    def __init__(
        self,
        dsn: str,
        signer: NoteSigner | None,
        *,
        schema: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        max_batch: int = 512,
    ) -> None:
        """A store on the database ``dsn`` names; ``signer`` None opens it read-only."""
        self.dsn = dsn
        self.schema = schema
        super().__init__(
            signer,
            _SCHEMA,
            clock=clock,
            max_batch=max_batch,
            translate=_translate,
            thread="memseal-pg-writer",
        )
        self._lock_key = 0

    # -- set-up ---------------------------------------------------------------

    def _where(self) -> str:
        return "PostgreSQL" if self.schema is None else f"PostgreSQL schema {self.schema}"

    def _session(self) -> list[sql.SQL | sql.Composed]:
        """Settings every connection of this store makes first."""
        out: list[sql.SQL | sql.Composed] = [sql.SQL("SET client_min_messages TO warning")]
        if self.schema is not None:
            out.append(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        return out

    def _connect(self) -> Conn:
        try:
            conn = psycopg.connect(self.dsn, autocommit=True)
        except psycopg.Error as exc:
            # The driver may quote the URL back, password and all.
            raise psycopg.OperationalError(hide_password(str(exc), self.dsn)) from None
        # No server-side prepared statements: psycopg prepares a statement on its fifth
        # run, and a prepare sent ahead into a transaction an earlier statement aborted is
        # recorded as done although the server refused it, so every later run of that
        # statement failed ("prepared statement does not exist") until a restart.
        conn.prepare_threshold = None
        try:
            for statement in self._session():
                conn.execute(statement)
        except BaseException:
            conn.close()
            raise
        return conn

    _DRIVER_ERRORS = (psycopg.Error,)

    async def _open_reader(self, readonly: bool) -> psycopg.AsyncConnection[TupleRow]:
        return await self._connect_reader()

    def _open_failed(self, exc: BaseException) -> StorageError:
        return StorageError(f"cannot open the ledger on {self._where()}: {exc}")

    async def _check_schema(self) -> None:
        try:
            cur = await self._db().execute("SELECT value FROM meta WHERE key = 'schema'")
            row = await cur.fetchone()
        except psycopg.Error as exc:
            raise StorageError(f"{self._where()} holds no memseal ledger: {exc}") from exc
        check_version(self._where(), None if row is None else row[0])

    def _open_writer(self) -> Conn:
        conn = self._connect()
        try:
            # Durable commits whatever the database's or role's default says.
            conn.execute("SET synchronous_commit TO on")
            if self.schema is not None:
                exists = conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
                ).fetchone()
                if exists is None:
                    conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self.schema)
                        )
                    )
            row = conn.execute("SELECT current_schema()").fetchone()
            if row is None or row[0] is None:
                raise StorageError("the role's search_path names no schema to hold the ledger")
            self._lock_key = _lock_key(row[0])
            conn.execute("BEGIN")
            try:
                # Two processes opening one fresh database must not race on CREATE TABLE.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                for ddl in self._schema:
                    conn.execute(ddl)
                found = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if found is None:
                    conn.execute(
                        "INSERT INTO meta (key, value) VALUES ('schema', %s)", (SCHEMA_VERSION,)
                    )
                else:
                    check_version(self._where(), found[0], "this memseal reads")
                conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status != TransactionStatus.IDLE and not conn.broken:
                    conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _close_writer(self, writer: Conn) -> None:
        writer.close()

    # -- writing --------------------------------------------------------------

    def _finish(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def _conn(self) -> Conn:
        """The writer's connection, made anew if the last one broke (server restart)."""
        conn = self._writer
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._writer = None
            try:
                conn = self._connect()
                conn.execute("SET synchronous_commit TO on")
            except psycopg.Error as exc:
                raise StorageError(f"cannot reconnect to {self._where()}: {exc}") from exc
            self._writer = conn
        return conn

    def _run_raw(self, work: Callable[[Conn], T]) -> T:
        conn = self._conn()
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (self._lock_key,))
        except psycopg.OperationalError:
            if not conn.broken:
                raise
            conn = self._conn()  # dropped by the server since the last use: a new one
            conn.execute("SELECT pg_advisory_lock(%s)", (self._lock_key,))
        try:
            return work(conn)
        finally:
            with contextlib.suppress(psycopg.Error):
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")  # work left a transaction open
                conn.execute("SELECT pg_advisory_unlock(%s)", (self._lock_key,))

    def _begin(self) -> Conn:
        """The writer's connection inside a new transaction holding the writer lock.

        A connection the server dropped since the last group (a restart) shows
        only when used: the transaction is then begun once more on a new
        connection. Nothing was written yet, so that is safe.
        """
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                # One writer at a time across processes; the head is read after the lock.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                return conn
            except psycopg.Error as exc:
                self._abandon(conn)
                if attempt == 0 and conn.broken:
                    continue
                raise StorageError(f"cannot begin a write transaction: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _commit(self, batch: list[Job[Conn]]) -> None:
        conn = self._begin()
        try:
            txn = self._pipelined(conn, batch, assumes=True)
            if txn.missed:
                # A lookup taken as absent was found (a store replayed): once more as one
                # unit, every lookup read at once.
                conn = self._again(conn)
                txn = self._pipelined(conn, batch, assumes=False)
            if not txn.ran:
                # Something in the group failed: none of it stands, and the group runs
                # again call by call, so only the call that failed fails.
                conn = self._again(conn)
                txn = self._pipelined(conn, batch, assumes=None)
        except BaseException:
            self._abandon(conn)
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            # The server may or may not have committed: say so rather than guess.
            broken = conn.broken
            self._abandon(conn)
            if broken:
                raise StorageError(
                    f"the connection was lost during COMMIT; the outcome is unknown: {exc}"
                ) from exc
            raise
        self._signer = txn.signer

    def _again(self, conn: Conn) -> Conn:
        """A new transaction for the group's next attempt, the last one rolled back."""
        self._abandon(conn)
        return self._begin()

    def _pipelined(self, conn: Conn, batch: list[Job[Conn]], assumes: bool | None) -> PostgresTxn:
        """The group run in one pipeline: as one unit (``assumes``: whether its lookups
        may be taken as absent until its end, :meth:`LogTxn.lookup`), or with ``None``
        call by call. Statements returning no rows are sent ahead, and one round trip
        answers all of them (:meth:`PostgresTxn.execute`). :attr:`PostgresTxn.ran` says
        whether the group stands; if not, the transaction is to be rolled back.
        """
        txn = PostgresTxn(conn, self.signer, self._clock, self._hooks)
        with conn.pipeline() as pipeline:
            txn.pipeline = pipeline
            try:
                if assumes is None:
                    self._run_group(txn, batch)
                else:
                    txn.assumes = assumes
                    txn.ran = self._run_grouped(txn, batch)
                if not txn.ran:
                    # The answers of what was sent ahead, errors and all, read here: the
                    # rollback that follows undoes every one.
                    with contextlib.suppress(psycopg.Error):
                        pipeline.sync()
            finally:
                txn.pipeline = None
        return txn

    def _abandon(self, conn: Conn) -> None:
        with contextlib.suppress(psycopg.Error):
            if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                conn.execute("ROLLBACK")

    # -- reading --------------------------------------------------------------

    async def _connect_reader(self) -> psycopg.AsyncConnection[TupleRow]:
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        except psycopg.Error as exc:
            raise psycopg.OperationalError(hide_password(str(exc), self.dsn)) from None
        try:
            for statement in self._session():
                await conn.execute(statement)
            await conn.execute("SET default_transaction_read_only TO on")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _read(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """One read; on a connection the server dropped (a restart), once more on a new one.

        A read changes nothing, so trying it again is safe; the reconnect happens
        only when the connection says it is broken, never for a failing query.
        """
        conn = self._db()
        try:
            cur = await conn.execute(query, list(params))
            return list(await cur.fetchall()) if cur.description is not None else []
        except psycopg.OperationalError:
            if not conn.broken or self._closed:
                raise
        with contextlib.suppress(psycopg.Error):
            await conn.close()
        self._reader = await self._connect_reader()
        cur = await self._reader.execute(query, list(params))
        return list(await cur.fetchall()) if cur.description is not None else []

    async def _query(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return await self._read(query, params)
        except psycopg.Error as exc:
            raise StorageError(f"cannot read the ledger: {exc}") from exc

    async def head(self) -> Head:
        """The log's size and last leaf hash, as of the last commit."""
        rows = await self._query("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
        return head_of(rows[0] if rows else None)

    async def _fetch(self, start: int, stop: int, limit: int) -> list[Record]:
        rows = await self._query(
            "SELECT e.seq, e.leaf, e.hash, e.sig, p.salt, p.data FROM entries e "
            "LEFT JOIN payloads p ON p.seq = e.seq "
            "WHERE e.seq >= %s AND e.seq < %s ORDER BY e.seq LIMIT %s",
            (start, stop, limit),
        )
        return records_of(rows)

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """A read-only query of the adapter's own dialect (``?`` placeholders, see above)."""
        try:
            return await self._read(translate_placeholders(sql), params)
        except psycopg.Error as exc:
            raise StorageError(f"query failed: {exc}") from exc

    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # The same statements as SQLite's, as psycopg takes them; errors as the ledger's reads.
        return await self._query(translate_placeholders(sql), params)

    def snapshots(self, workers: int = 2) -> SnapshotPool:
        """A pool of read-only connections running whole queries on one snapshot each."""
        return SnapshotPool(lambda: _ReadSession(self._connect), psycopg.Error, workers)

    async def payloads_present(self, seqs: Sequence[int]) -> list[int]:
        """Which of ``seqs`` still have a stored payload (verify: redactions took effect)."""
        if not seqs:
            return []
        rows = await self._query(
            "SELECT seq FROM payloads WHERE seq = ANY(%s::bigint[]) ORDER BY seq", (list(seqs),)
        )
        return [r[0] for r in rows]

    async def tree_read(self, work: Callable[[Callable[[Sequence[int]], list[bytes]]], T]) -> T:
        """Run ``work(read)`` on a thread with a synchronous reader of stored tree hashes.

        The Merkle functions read synchronously, a batch at a time; every batch runs in one
        REPEATABLE READ transaction, so all of them see the same snapshot.
        """

        def once() -> T:
            if self._closed:
                raise StorageError("the ledger store is closed")
            if self._tree_conn is None or self._tree_conn.broken:
                if self._tree_conn is not None:
                    self._tree_conn.close()
                self._tree_conn = self._connect()
            conn = self._tree_conn
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                return work(lambda indexes: read_tree(conn, indexes))
            finally:
                if not conn.broken:
                    conn.execute("COMMIT")

        def run() -> T:
            with self._tree_lock:
                try:
                    return once()
                except psycopg.OperationalError:
                    # A read: on a connection the server dropped, once more on a new one.
                    if self._tree_conn is None or not self._tree_conn.broken:
                        raise
                return once()

        if self._closed:
            raise StorageError("the ledger store is closed")
        try:
            return await asyncio.to_thread(run)
        except psycopg.Error as exc:
            raise StorageError(f"cannot read the Merkle tree: {exc}") from exc


_translate = translator((psycopg.Error,))
