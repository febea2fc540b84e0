"""The SQLite log store: one file, WAL, one writer thread with group commit.

Why a writer thread of our own rather than aiosqlite for writes: aiosqlite
crosses to its database thread once per statement (44 to 200 microseconds
each, measured here, more than a signature). A unit of work must read the
head after ``BEGIN IMMEDIATE``, sign, insert its entries and its callers'
rows, and commit; the writer runs a whole group of commands in one crossing
instead. Reads go through aiosqlite, which is fine for them.

Durability: WAL with ``synchronous=FULL``, so a commit returns only after
the WAL is fsynced; :meth:`SqliteLogStore.run` resolves after the commit.

Several processes may open one file (``serve`` beside ``mcp``): the head is
read after ``BEGIN IMMEDIATE`` holds the write lock, never from a cache, so
two processes can never fork the chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from .entry import GENESIS_PREV, Draft, encode_entry, format_time, leaf_hash, signing_message
from .errors import InvalidRequest, MemsealError, NotFound, StorageError
from .merkle import node_hash, stored_hash_count, stored_hash_index
from .note import NoteSigner
from .store import Appended, Command, Head, Record, StoredCheckpoint, WriteTxn

__all__ = ["AppendHook", "SqliteLogStore", "SqliteTxn"]

T = TypeVar("T")

SCHEMA_VERSION = "1"
_BUSY_TIMEOUT_MS = 30_000
_SCAN_CHUNK = 1024

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

_Mark = tuple[int, bytes | None, NoteSigner, list[tuple[int, bytes]] | None]

AppendHook = Callable[["SqliteTxn", int, bytes], None]
"""Called inside the transaction after each append with (txn, seq, leaf hash)."""


def _read_tree(conn: sqlite3.Connection, indexes: Sequence[int]) -> list[bytes]:
    if not indexes:
        return []
    marks = ",".join("?" * len(indexes))
    found = dict(conn.execute(f"SELECT idx, hash FROM tree WHERE idx IN ({marks})", list(indexes)))
    missing = [i for i in indexes if i not in found]
    if missing:
        raise StorageError(f"the Merkle tree lacks stored hash {missing[0]}")
    return [found[i] for i in indexes]


_MAX_SEQ = 2**63 - 1


def _check_seq(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MAX_SEQ:
        raise InvalidRequest(f"`{field}` must be an integer from 0 to 2**63-2, not {value!r:.40}")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _connect_writer(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    # Erased payloads are overwritten with zeros, not left in free pages.
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class SqliteTxn:
    """The open write transaction handed to each command (see :class:`WriteTxn`)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        signer: NoteSigner,
        clock: Callable[[], datetime],
        hooks: Sequence[AppendHook],
    ) -> None:
        self.conn = conn
        self._signer = signer
        self._key = signer.key_id.hex()
        self._clock = clock
        self._hooks = hooks
        row = conn.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        self._size: int = 0 if row is None else row[0] + 1
        self._prev: bytes | None = None if row is None else row[1]
        self._edge: list[tuple[int, bytes]] | None = None
        self._depth = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def signer(self) -> NoteSigner:
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        return self._signer

    def use_signer(self, signer: NoteSigner) -> None:
        """Sign the entries that follow with ``signer`` (key rotation)."""
        self._signer = signer
        self._key = signer.key_id.hex()

    def mark(self) -> _Mark:
        edge = None if self._edge is None else list(self._edge)
        return (self._size, self._prev, self._signer, edge)

    def reset(self, mark: _Mark) -> None:
        self._size, self._prev, signer, self._edge = mark
        self.use_signer(signer)

    def append(self, draft: Draft) -> Appended:
        seq = self._size
        for earlier in draft.redacts:
            if earlier >= seq:
                raise InvalidRequest(f"`redacts` names seq {earlier}; only earlier seqs (< {seq})")
        at = format_time(self._clock())
        prev = GENESIS_PREV if self._prev is None else self._prev.hex()
        leaf = encode_entry(draft, seq=seq, at=at, prev=prev, key=self._key)
        digest = leaf_hash(leaf)
        signature = self._signer.sign(signing_message(digest))
        conn = self.conn
        conn.execute(
            "INSERT INTO entries (seq, leaf, hash, sig) VALUES (?, ?, ?, ?)",
            (seq, leaf, digest, signature),
        )
        self._grow_tree(seq, digest)
        if draft.payload is not None:
            conn.execute(
                "INSERT INTO payloads (seq, salt, data) VALUES (?, ?, ?)",
                (seq, draft.salt, draft.payload),
            )
            if draft.mentions:
                conn.executemany(
                    "INSERT INTO mentions (ref, seq) VALUES (?, ?)",
                    [(ref, seq) for ref in draft.mentions],
                )
        for earlier in draft.redacts:
            conn.execute("DELETE FROM payloads WHERE seq = ?", (earlier,))
            conn.execute("DELETE FROM mentions WHERE seq = ?", (earlier,))
            # Which signed entry erased it: replay marks forgotten texts with that seq.
            conn.execute(
                "INSERT OR IGNORE INTO redactions (seq, by_seq) VALUES (?, ?)", (earlier, seq)
            )
        self._size = seq + 1
        self._prev = digest
        for hook in self._hooks:
            hook(self, seq, digest)
        return Appended(seq=seq, leaf_hash=digest, at=at)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested unit inside a command: rolled back alone (rows and log state) if it raises."""
        name = f"nested{self._depth}"
        self._depth += 1
        mark = self.mark()
        self.conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            self.reset(mark)
            raise
        else:
            self.conn.execute(f"RELEASE {name}")
        finally:
            self._depth -= 1

    def _grow_tree(self, seq: int, digest: bytes) -> None:
        # The Merkle tree grows in the same transaction: never a stored entry without its hashes.
        # The right edge (one complete subtree per set bit of the size) is read once per group;
        # each append then merges its leaf into it, giving the stored hashes it writes in order.
        if self._edge is None:
            levels = [b for b in reversed(range(seq.bit_length())) if seq >> b & 1]
            hashes = self.tree_hashes([stored_hash_index(b, (seq >> b) - 1) for b in levels])
            self._edge = list(zip(levels, hashes, strict=True))
        edge = self._edge
        new = [digest]
        level, h = 0, digest
        while edge and edge[-1][0] == level:
            h = node_hash(edge.pop()[1], h)
            level += 1
            new.append(h)
        edge.append((level, h))
        base = stored_hash_count(seq)
        self.conn.executemany(
            "INSERT INTO tree (idx, hash) VALUES (?, ?)", [(base + i, x) for i, x in enumerate(new)]
        )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def tree_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        return _read_tree(self.conn, indexes)

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        row = self.conn.execute(
            "SELECT size, root, note, at FROM checkpoints ORDER BY size DESC LIMIT 1"
        ).fetchone()
        return (
            None
            if row is None
            else StoredCheckpoint(size=row[0], root=row[1], note=row[2], at=row[3])
        )

    def store_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        self.conn.execute(
            "INSERT INTO checkpoints (size, root, note, at) VALUES (?, ?, ?, ?)",
            (checkpoint.size, checkpoint.root, checkpoint.note, checkpoint.at),
        )

    def now(self) -> str:
        return format_time(self._clock())


@dataclass(eq=False)
class _Job:
    command: Command[Any]
    future: asyncio.Future[Any]
    outcome: tuple[bool, Any] = field(default=(False, None))
    # Maintenance (scrub, checkpoint of the WAL) runs on the writer outside any transaction.
    raw: Callable[[sqlite3.Connection], Any] | None = None


def _resolve(batch: list[_Job]) -> None:
    for job in batch:
        if job.future.done():  # the caller was cancelled; the work stands
            continue
        ok, value = job.outcome
        if ok:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)


class SqliteLogStore:
    """The embedded default log store (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        signer: NoteSigner | None,
        *,
        clock: Callable[[], datetime] = _utcnow,
        max_batch: int = 512,
    ) -> None:
        """A store over the file at ``path``; ``signer`` None opens it read-only (audits)."""
        self.path = path
        self._signer = signer
        self._clock = clock
        self._max_batch = max_batch
        self._hooks: list[AppendHook] = []
        self._commit_hooks: list[Callable[[SqliteTxn], None]] = []
        self._schema: list[str] = [_SCHEMA]
        self._writer: sqlite3.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        # Commands submitted during one turn of the event loop travel to the writer together,
        # so tasks woken by one group commit all land in the next group, not one by one.
        self._pending: list[_Job] = []
        self._jobs: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._tree_conn: sqlite3.Connection | None = None
        self._tree_lock = threading.Lock()

    # -- set-up ---------------------------------------------------------------

    def add_schema(self, ddl: str) -> None:
        """Tables of the layers above, created with the log's own (before :meth:`open`)."""
        self._schema.append(ddl)

    def add_append_hook(self, hook: AppendHook) -> None:
        self._hooks.append(hook)

    def add_commit_hook(self, hook: Callable[[SqliteTxn], None]) -> None:
        """Run ``hook(txn)`` after a group's commands, inside its transaction.

        A hook that raises fails the whole group: it guards the log itself
        (the checkpoint policy refuses to sign an inconsistent tree).
        """
        self._commit_hooks.append(hook)

    @property
    def signer(self) -> NoteSigner:
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        return self._signer

    def use_signer(self, signer: NoteSigner) -> None:
        """Sign later groups with ``signer`` (after a committed key rotation)."""
        self._signer = signer

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        readonly = self._signer is None
        if readonly and not self.path.is_file():
            raise StorageError(f"no ledger database at {self.path}")
        try:
            if not readonly:
                self._writer = await asyncio.to_thread(self._open_writer)
                self._reader = await aiosqlite.connect(self.path)
            else:
                self._reader = await aiosqlite.connect(f"file:{self.path}?mode=ro", uri=True)
            await self._reader.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            await self._reader.execute("PRAGMA query_only = ON")
            if readonly:
                await self._check_schema()
        except sqlite3.Error as exc:
            await self.close()
            raise StorageError(f"cannot open ledger database {self.path}: {exc}") from exc
        except BaseException:
            await self.close()
            raise
        if not readonly:
            self._thread = threading.Thread(
                target=self._write_loop, name="memseal-writer", daemon=True
            )
            self._thread.start()

    async def _check_schema(self) -> None:
        assert self._reader is not None
        try:
            async with self._reader.execute("SELECT value FROM meta WHERE key = 'schema'") as cur:
                row = await cur.fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"{self.path} is not a memseal ledger: {exc}") from exc
        if row is None or row[0] != SCHEMA_VERSION:
            found = "none" if row is None else row[0]
            raise StorageError(
                f"{self.path} has ledger schema {found}; this reads {SCHEMA_VERSION}"
            )

    def _open_writer(self) -> sqlite3.Connection:
        conn = _connect_writer(self.path)
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
            elif row[0] != SCHEMA_VERSION:
                raise StorageError(
                    f"{self.path} has ledger schema {row[0]}; this memseal reads {SCHEMA_VERSION}"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            raise
        return conn

    async def close(self) -> None:
        """Finish every queued command (drain), then close the connections."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._flush()
            self._jobs.put(None)
            await asyncio.to_thread(self._thread.join)
        if self._reader is not None:
            await self._reader.close()
        if self._tree_conn is not None:
            self._tree_conn.close()
        if self._writer is not None and self._thread is None:
            self._writer.close()

    # -- writing --------------------------------------------------------------

    async def run(self, command: Command[T]) -> T:
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        if self._closed or self._thread is None or self._loop is None:
            raise StorageError("the ledger store is closed")
        future: asyncio.Future[T] = self._loop.create_future()
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(_Job(command, future))
        return await future

    async def exclusive(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the writer's connection between group commits, outside a
        transaction (VACUUM, ``wal_checkpoint``, FTS merges). Nothing else writes meanwhile."""
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        if self._closed or self._thread is None or self._loop is None:
            raise StorageError("the ledger store is closed")

        def unused(txn: WriteTxn) -> None:  # pragma: no cover - raw jobs bypass commands
            raise AssertionError("raw job run as a command")

        future: asyncio.Future[T] = self._loop.create_future()
        self._flush()
        self._jobs.put([_Job(unused, future, raw=work)])
        return await future

    def _flush(self) -> None:
        jobs, self._pending = self._pending, []
        if jobs:
            self._jobs.put(jobs)

    def _write_loop(self) -> None:
        """The writer thread: one group commit per pass, one hop back to the loop per group."""
        assert self._loop is not None and self._writer is not None
        stopping = False
        while not stopping:
            first = self._jobs.get()
            if first is None:
                break
            batch = list(first)
            # Group commit: everything queued while the last group was committing.
            while len(batch) < self._max_batch:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                batch.extend(more)
            try:
                self._commit_or_run(batch)
            except BaseException as exc:  # the whole group failed to commit
                error: BaseException = exc
                if not isinstance(exc, MemsealError):
                    error = StorageError(f"commit failed: {exc}")
                    error.__cause__ = exc
                for job in batch:
                    job.outcome = (False, error)
            try:
                self._loop.call_soon_threadsafe(_resolve, batch)
            except RuntimeError:  # the loop is gone; nobody is waiting any more
                break
        self._writer.close()

    def _commit_or_run(self, batch: list[_Job]) -> None:
        commands: list[_Job] = []
        for job in batch:
            if job.raw is None:
                commands.append(job)
                continue
            if commands:  # keep submission order around the maintenance job
                self._commit(commands)
                commands = []
            assert self._writer is not None
            try:
                job.outcome = (True, job.raw(self._writer))
            except BaseException as exc:
                job.outcome = (False, _translate(exc))
        if commands:
            self._commit(commands)

    def _commit(self, batch: list[_Job]) -> None:
        conn = self._writer
        assert conn is not None
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot begin a write transaction: {exc}") from exc
        try:
            txn = SqliteTxn(conn, self.signer, self._clock, self._hooks)
            for job in batch:
                conn.execute("SAVEPOINT command")
                mark = txn.mark()
                try:
                    value = job.command(txn)
                except BaseException as exc:
                    conn.execute("ROLLBACK TO command")
                    conn.execute("RELEASE command")
                    txn.reset(mark)
                    job.outcome = (False, _translate(exc))
                else:
                    conn.execute("RELEASE command")
                    job.outcome = (True, value)
            for hook in self._commit_hooks:
                hook(txn)
            conn.execute("COMMIT")
            self._signer = txn.signer
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- reading --------------------------------------------------------------

    def _db(self) -> aiosqlite.Connection:
        if self._reader is None or self._closed:
            raise StorageError("the ledger store is closed")
        return self._reader

    async def head(self) -> Head:
        try:
            async with self._db().execute(
                "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
            ) as cur:
                row = await cur.fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read the ledger head: {exc}") from exc
        if row is None:
            return Head(size=0, leaf_hash=None)
        return Head(size=row[0] + 1, leaf_hash=row[1])

    async def read(self, seq: int) -> Record:
        _check_seq(seq, "seq")
        records = await self._fetch(seq, seq + 1, 1)
        if not records:
            raise NotFound(f"no entry at seq {seq}")
        return records[0]

    async def _fetch(self, start: int, stop: int, limit: int) -> list[Record]:
        try:
            async with self._db().execute(
                "SELECT e.seq, e.leaf, e.hash, e.sig, p.salt, p.data FROM entries e "
                "LEFT JOIN payloads p ON p.seq = e.seq "
                "WHERE e.seq >= ? AND e.seq < ? ORDER BY e.seq LIMIT ?",
                (start, stop, limit),
            ) as cur:
                rows = await cur.fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read the ledger: {exc}") from exc
        return [
            Record(seq=r[0], leaf=r[1], leaf_hash=r[2], signature=r[3], salt=r[4], payload=r[5])
            for r in rows
        ]

    async def scan(self, start: int = 0, stop: int | None = None) -> AsyncIterator[Record]:
        _check_seq(start, "start")
        if stop is not None:
            _check_seq(stop, "stop")
        end = _MAX_SEQ if stop is None else stop
        position = start
        while position < end:
            chunk = await self._fetch(position, end, _SCAN_CHUNK)
            if not chunk:
                return
            for record in chunk:
                yield record
            position = chunk[-1].seq + 1

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """A read-only query of the adapter's own dialect (for adapters of the layers above)."""
        try:
            async with self._db().execute(sql, params) as cur:
                return [tuple(row) for row in await cur.fetchall()]
        except sqlite3.Error as exc:
            raise StorageError(f"query failed: {exc}") from exc

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
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read the Merkle tree: {exc}") from exc

    async def tree_range(self, start: int, stop: int) -> list[bytes]:
        """Stored tree hashes ``start <= idx < stop`` in order (verification)."""
        rows = await self.rows(
            "SELECT idx, hash FROM tree WHERE idx >= ? AND idx < ? ORDER BY idx", (start, stop)
        )
        return [r[1] for r in rows]

    async def checkpoints(self) -> list[StoredCheckpoint]:
        rows = await self.rows("SELECT size, root, note, at FROM checkpoints ORDER BY size")
        return [StoredCheckpoint(size=r[0], root=r[1], note=r[2], at=r[3]) for r in rows]

    async def stray_rows(self, size: int) -> list[tuple[str, int]]:
        """Rows outside the log of ``size`` entries: payloads, tree hashes or mentions
        with no entry (planted rows that would also block a later append)."""
        rows = await self.rows(
            "SELECT 'payload', seq FROM payloads WHERE seq < 0 OR seq >= ? "
            "UNION ALL SELECT 'mention', seq FROM mentions WHERE seq < 0 OR seq >= ? "
            "UNION ALL SELECT 'entry', seq FROM entries WHERE seq < 0 "
            "UNION ALL SELECT 'tree hash', idx FROM tree WHERE idx < 0 OR idx >= ? "
            "LIMIT 5",
            (size, size, stored_hash_count(size)),
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    async def redacted_by(self, seq: int) -> int | None:
        """The seq of the signed entry that erased ``seq``'s payload, if one did."""
        rows = await self.rows("SELECT by_seq FROM redactions WHERE seq = ?", (seq,))
        return None if not rows else int(rows[0][0])

    async def mentioning(self, ref: str) -> list[int]:
        rows = await self.rows("SELECT seq FROM mentions WHERE ref = ? ORDER BY seq", (ref,))
        return [r[0] for r in rows]


def _translate(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        error = StorageError(f"database error: {exc}")
        error.__cause__ = exc
        return error
    return exc
