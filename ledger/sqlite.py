"""The SQLite log store: one file, WAL, one writer thread with group commit.

Writes go through the shared group-commit writer (:mod:`._writer` explains
why a thread of our own rather than aiosqlite, which crosses to its database
thread once per statement): a group of commands runs in one ``BEGIN
IMMEDIATE`` transaction, in one crossing: as one unit with its rows held back
and inserted a table at a time, or, when that fails, again with each command in
``SAVEPOINT command`` (:mod:`._txn`). Reads go through aiosqlite, which is fine for them.

Durability: WAL with ``synchronous=FULL``, so a commit returns only after
the WAL is fsynced; :meth:`SqliteLogStore.run` resolves after the commit.

Several processes may open one file (``serve`` beside ``mcp``): the head is
read after ``BEGIN IMMEDIATE`` holds the write lock, never from a cache, so
two processes can never fork the chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import aiosqlite

from ._files import create_private, private_database
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
from ._txn import LogTxn, in_order
from ._writer import Job
from .errors import StorageError
from .note import NoteSigner
from .store import Head, Record

__all__ = ["AppendHook", "SqliteLogStore", "SqliteTxn"]

T = TypeVar("T")

#: What the driver raises over a damaged file. sqlite3 decodes TEXT values, and its own
#: error messages (which quote the bytes of a corrupt schema), as UTF-8: a flipped byte
#: there raises UnicodeDecodeError from the driver, not sqlite3.DatabaseError.
DRIVER_ERRORS: Final = (sqlite3.Error, UnicodeDecodeError)
_BUSY_TIMEOUT_MS = 30_000
# The read sessions' memory map: address space only, pages come from the OS cache.
_READ_MMAP_BYTES = 1 << 30

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entries (
    seq  INTEGER PRIMARY KEY,
    leaf BLOB NOT NULL,
    hash BLOB NOT NULL,
    sig  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS payloads (
    seq  INTEGER PRIMARY KEY,
    salt BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS mentions (
    ref TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (ref, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS mentions_by_seq ON mentions (seq);
CREATE TABLE IF NOT EXISTS tree (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS redactions (seq INTEGER PRIMARY KEY, by_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY,
    root BLOB NOT NULL,
    note TEXT NOT NULL,
    at   TEXT NOT NULL
);
"""

AppendHook = Callable[["SqliteTxn", int, bytes], None]
"""Called inside the transaction after each append with (txn, seq, leaf hash)."""


def _read_tree(conn: sqlite3.Connection, indexes: Sequence[int]) -> list[bytes]:
    if not indexes:
        return []
    marks = ",".join("?" * len(indexes))
    found = dict(conn.execute(f"SELECT idx, hash FROM tree WHERE idx IN ({marks})", list(indexes)))
    return in_order(indexes, found)


def _connect_writer(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    # Erased payloads are overwritten with zeros, not left in free pages.
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class SqliteTxn(LogTxn[sqlite3.Connection]):
    """The open write transaction handed to each command (see :class:`WriteTxn`)."""

    _ROLLBACK_TO = "ROLLBACK TO {}"
    _RELEASE = "RELEASE {}"
    dialect = "sqlite"

    def _erase(self, earlier: Sequence[int], seq: int) -> None:
        for one in earlier:
            self.execute("DELETE FROM payloads WHERE seq = ?", (one,))
            self.execute("DELETE FROM mentions WHERE seq = ?", (one,))
            self.execute("INSERT OR IGNORE INTO redactions (seq, by_seq) VALUES (?, ?)", (one, seq))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one statement inside the transaction (held rows it names first)."""
        self._touch(sql)
        return self.conn.execute(sql, params).fetchall()

    def _raw(self, sql: str, params: Sequence[Any]) -> None:
        self.conn.execute(sql, params)

    def tree_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        """Stored Merkle hashes by index, as of this transaction; StorageError if one is missing."""
        self._touch("tree")
        return _read_tree(self.conn, indexes)


class _ReadSession:
    """A read-only connection of a snapshot pool thread (see :mod:`._snapshots`)."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        # Reads through a memory map: a ranked search touches one projection row per match
        # (its scope and trust), thousands at 10^5 items, and each page missed in SQLite's
        # small cache otherwise costs a read() call and a copy. Measured at 10^5 memories,
        # the exact search statement's p95 went from 2.0x to 1.4x a bare FTS5 query.
        self._conn.execute(f"PRAGMA mmap_size = {_READ_MMAP_BYTES}")

    def begin(self) -> None:
        self._conn.execute("BEGIN")

    def end(self) -> None:
        self._conn.execute("ROLLBACK")

    def execute(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        self._conn.close()

    @property
    def broken(self) -> bool:
        return False  # a file does not hang up


class SqliteLogStore(StoreSetup[SqliteTxn, sqlite3.Connection, aiosqlite.Connection], RecordReads):
    """The embedded default log store (see the module docstring)."""

    #: The SQL the store's ``execute`` and ``rows`` take (see :class:`~.store.SqlStore`).
    dialect: Final = "sqlite"

    def __init__(
        self,
        path: Path,
        signer: NoteSigner | None,
        *,
        clock: Callable[[], datetime] = utcnow,
        max_batch: int = 512,
    ) -> None:
        """A store over the file at ``path``; ``signer`` None opens it read-only (audits)."""
        self.path = path
        super().__init__(
            signer,
            _SCHEMA,
            clock=clock,
            max_batch=max_batch,
            translate=_translate,
            thread="memseal-writer",
        )
        self._turn: int | None = None  # the writers' turn lock (see _writers_turn)

    # -- set-up ---------------------------------------------------------------

    _DRIVER_ERRORS = DRIVER_ERRORS

    async def open(self) -> None:
        """Open the file (read-only without a signer: it must exist) and start writing."""
        if self._signer is None and not self.path.is_file():
            raise StorageError(f"no ledger database at {self.path}")
        await super().open()

    async def _open_reader(self, readonly: bool) -> aiosqlite.Connection:
        if readonly:
            reader = await _daemon_reader(f"file:{self.path}?mode=ro", uri=True)
        else:
            reader = await _daemon_reader(self.path)
        self._reader = reader  # closed with the store should a pragma fail
        await reader.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        await reader.execute("PRAGMA query_only = ON")
        return reader

    def _open_failed(self, exc: BaseException) -> StorageError:
        return StorageError(f"cannot open ledger database {self.path}: {_said(exc)}")

    async def _check_schema(self) -> None:
        try:
            async with self._db().execute("SELECT value FROM meta WHERE key = 'schema'") as cur:
                row = await cur.fetchone()
        except DRIVER_ERRORS as exc:
            raise StorageError(f"{self.path} is not a memseal ledger: {_said(exc)}") from exc
        check_version(str(self.path), None if row is None else row[0])

    def _open_writer(self) -> sqlite3.Connection:
        # 0600 before SQLite first opens the file: it gives -wal and -shm the same mode.
        private_database(self.path)
        turn = Path(f"{self.path}.writer")
        create_private(turn)
        try:
            self._turn = os.open(turn, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageError(f"cannot open {turn}: {exc.strerror}") from exc
        try:
            conn = _connect_writer(self.path)
        except BaseException:
            self._close_turn()
            raise
        conn.execute("BEGIN IMMEDIATE")
        try:
            for ddl in self._schema:
                for statement in ddl.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
                )
            else:
                check_version(str(self.path), row[0], "this memseal reads")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            self._close_turn()
            raise
        return conn

    def _close_writer(self, writer: sqlite3.Connection) -> None:
        writer.close()
        self._close_turn()

    # -- writing --------------------------------------------------------------

    def _run_raw(self, work: Callable[[sqlite3.Connection], T]) -> T:
        assert self._writer is not None
        with self._writers_turn():
            return work(self._writer)

    @contextlib.contextmanager
    def _writers_turn(self) -> Iterator[None]:
        """Wait for this process's turn to write (see :func:`_wait_for_turn`).

        SQLite's own lock wait is a busy handler that sleeps and retries, up to
        100 ms at a time: with several processes writing, a waiter can sleep
        through turn after turn (a p99 over a second with four servers). A
        ``flock`` on the file beside the database hands the turn on as soon as
        the holder lets go; SQLite's locks still guard the file itself, whoever
        skips this one.
        """
        fd = self._turn
        if fd is None:
            yield
            return
        _wait_for_turn(fd, f"{self.path}.writer")
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _finish(self) -> None:
        assert self._writer is not None
        self._close_writer(self._writer)

    def _close_turn(self) -> None:
        if self._turn is not None:
            os.close(self._turn)
            self._turn = None

    def _commit(self, batch: list[Job[sqlite3.Connection]]) -> None:
        with self._writers_turn():
            self._commit_turn(batch)

    def _commit_turn(self, batch: list[Job[sqlite3.Connection]]) -> None:
        conn = self._writer
        assert conn is not None
        try:
            conn.execute("BEGIN IMMEDIATE")
        except DRIVER_ERRORS as exc:
            raise StorageError(f"cannot begin a write transaction: {_said(exc)}") from exc
        try:
            txn = SqliteTxn(conn, self.signer, self._clock, self._hooks)
            if not self._run_grouped(txn, batch):
                # Something in the group failed: none of it stands, and the group runs
                # again call by call, so only the call that failed fails.
                conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
                txn = SqliteTxn(conn, self.signer, self._clock, self._hooks)
                self._run_group(txn, batch)
            conn.execute("COMMIT")
            self._signer = txn.signer
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- reading --------------------------------------------------------------

    async def head(self) -> Head:
        """The log's size and last leaf hash, as of the last commit."""
        try:
            async with self._db().execute(
                "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
            ) as cur:
                row = await cur.fetchone()
        except DRIVER_ERRORS as exc:
            raise StorageError(f"cannot read the ledger head: {_said(exc)}") from exc
        return head_of(row)

    async def _fetch(self, start: int, stop: int, limit: int) -> list[Record]:
        try:
            async with self._db().execute(
                "SELECT e.seq, e.leaf, e.hash, e.sig, p.salt, p.data FROM entries e "
                "LEFT JOIN payloads p ON p.seq = e.seq "
                "WHERE e.seq >= ? AND e.seq < ? ORDER BY e.seq LIMIT ?",
                (start, stop, limit),
            ) as cur:
                rows = await cur.fetchall()
        except DRIVER_ERRORS as exc:
            raise StorageError(f"cannot read the ledger: {_said(exc)}") from exc
        return records_of(rows)

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """A read-only query of the adapter's own dialect (for adapters of the layers above)."""
        try:
            async with self._db().execute(sql, params) as cur:
                return [tuple(row) for row in await cur.fetchall()]
        except DRIVER_ERRORS as exc:
            raise StorageError(f"query failed: {_said(exc)}") from exc

    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await self.rows(sql, params)

    def snapshots(self, workers: int = 2) -> SnapshotPool:
        """A pool of read-only connections running whole queries on one snapshot each."""
        return SnapshotPool(lambda: _ReadSession(self.path), sqlite3.Error, workers)

    async def payloads_present(self, seqs: Sequence[int]) -> list[int]:
        """Which of ``seqs`` still have a stored payload (verify: redactions took effect)."""
        found: list[int] = []
        for i in range(0, len(seqs), 500):
            part = list(seqs[i : i + 500])
            marks = ",".join("?" * len(part))
            rows = await self.rows(f"SELECT seq FROM payloads WHERE seq IN ({marks})", part)
            found.extend(r[0] for r in rows)
        return sorted(found)

    async def tree_read(self, work: Callable[[Callable[[Sequence[int]], list[bytes]]], T]) -> T:
        """Run ``work(read)`` on a thread with a reader of stored tree hashes (proofs, roots).

        The Merkle functions read synchronously, a batch at a time; one thread hop for a
        whole proof beats one per batch through aiosqlite.
        """

        def run() -> T:
            with self._tree_lock:
                if self._tree_conn is None:
                    self._tree_conn = sqlite3.connect(
                        f"file:{self.path}?mode=ro", uri=True, check_same_thread=False
                    )
                    self._tree_conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                conn = self._tree_conn
                # One read transaction: every batch sees the same snapshot.
                conn.execute("BEGIN")
                try:
                    return work(lambda indexes: _read_tree(conn, indexes))
                finally:
                    conn.execute("COMMIT")

        if self._closed:
            raise StorageError("the ledger store is closed")
        try:
            return await asyncio.to_thread(run)
        except DRIVER_ERRORS as exc:
            raise StorageError(f"cannot read the Merkle tree: {_said(exc)}") from exc


def _wait_for_turn(fd: int, name: str) -> None:
    """``flock`` the turn file, waiting at most the writer's busy timeout.

    A blocking ``flock`` is woken the moment the holder lets go, but it cannot
    time out; so when the turn is taken, a helper thread blocks in it while
    this one waits on an event with the timeout. (The lock belongs to the open
    file, not to the thread that took it.) A holder that never lets go (a
    process stopped mid-commit) fails the waiting writes after the timeout, as
    SQLite's own lock would; the helper then lets go at once if it ever gets
    the turn. SQLite's locks still guard the file whatever happens here.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    got = threading.Event()
    guard = threading.Lock()
    abandoned = False

    def take() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with guard:
            if abandoned:
                fcntl.flock(fd, fcntl.LOCK_UN)
            else:
                got.set()

    threading.Thread(target=take, name="memseal-writer-turn", daemon=True).start()
    if got.wait(_BUSY_TIMEOUT_MS / 1000):
        return
    with guard:
        if got.is_set():
            return
        abandoned = True
    raise StorageError(
        f"another process has held the ledger's writer turn ({name}) for "
        f"{_BUSY_TIMEOUT_MS // 1000} s; is it stopped mid-write?"
    )


def _said(exc: BaseException) -> str:
    """What the driver said, or what its UnicodeDecodeError means for the file."""
    if isinstance(exc, UnicodeDecodeError):
        return "the database file is damaged (it holds text that is not UTF-8)"
    return str(exc)


_translate = translator(DRIVER_ERRORS, _said)


def _daemon_reader(database: str | Path, *, uri: bool = False) -> aiosqlite.Connection:
    """An aiosqlite connection whose worker thread never holds the interpreter at exit."""
    conn = aiosqlite.connect(database, uri=uri)
    # aiosqlite's worker is a plain thread: a memory a failing script never closed kept the
    # interpreter waiting on it for ever after its traceback, so a supervisor never saw the
    # crash. The reader is query-only: nothing is lost when exit stops it mid-read.
    conn._thread.daemon = True
    return conn
