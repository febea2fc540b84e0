"""The log-store port: what the ledger needs from a database, as small Protocols.

A store appends entries in units of work and reads them back. A unit of
work is a :data:`Command`: a plain function run by the store's single
writer inside the write transaction, given a :class:`WriteTxn`. Inside it
a command may append entries and write its own rows (projections, memos)
through :meth:`WriteTxn.execute`; the store wraps each command in a
savepoint, so a command that raises is rolled back alone while the rest of
its group commit lands. An awaited :meth:`LogStore.run` returns only once
the transaction holding the command is durable.

Every adapter (SQLite now, PostgreSQL later) passes the one contract suite
in ``tests/unit/ledger/test_store_contract.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import msgspec

from ._snapshots import OnePrefix, observing_sizes, one_prefix
from .entry import Draft, Entry, decode_entry
from .note import NoteSigner

_log = logging.getLogger("memseal.ledger")

__all__ = [
    "Appended",
    "Command",
    "Execute",
    "Head",
    "LogStore",
    "OnePrefix",
    "Record",
    "Snapshots",
    "SqlStore",
    "StoredCheckpoint",
    "WriteTxn",
    "observing_sizes",
    "one_prefix",
    "run_committed",
]

T = TypeVar("T")
Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
"""Runs one statement of the store's dialect and returns its rows."""


class Appended(msgspec.Struct, frozen=True, kw_only=True):
    """What an append tells its caller: where the entry landed and its hash."""

    seq: int
    leaf_hash: bytes
    at: str


class Head(msgspec.Struct, frozen=True, kw_only=True):
    """The log's size and the leaf hash of its last entry (None when empty)."""

    size: int
    leaf_hash: bytes | None


class StoredCheckpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpoint the log signed: its size, root and the signed note text."""

    size: int
    root: bytes
    note: str
    at: str


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """One stored entry with its signature and, unless redacted, its payload."""

    seq: int
    leaf: bytes
    leaf_hash: bytes
    signature: bytes
    salt: bytes | None
    payload: bytes | None

    def entry(self) -> Entry:
        """Decode the stored bytes (strictly; raises msgspec errors on a bad entry)."""
        return decode_entry(self.leaf)


class WriteTxn(Protocol):
    """The writer's view of one open write transaction."""

    @property
    def dialect(self) -> str:
        """The SQL :meth:`execute` takes: ``"sqlite"`` or ``"postgresql"``."""
        ...

    @property
    def size(self) -> int:
        """The number of entries including those appended so far in this transaction."""
        ...

    def append(self, draft: Draft) -> Appended:
        """Sign and append one entry; erase the payloads it redacts."""
        ...

    @property
    def signer(self) -> NoteSigner:
        """The key signing this transaction's entries."""
        ...

    def use_signer(self, signer: NoteSigner) -> None:
        """Sign the entries that follow with ``signer`` (key rotation, committed with them)."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement of the adapter's own dialect inside the transaction."""
        ...

    def defer(self, into: str, row: tuple[Any, ...], tail: str = "") -> None:
        """Insert ``row`` into ``into`` (``table (col, ...)``, then ``tail``: an ``ON
        CONFLICT`` clause) before the command ends, or before a statement naming the
        table runs: with the group's other rows, in one multi-row INSERT, where the
        adapter can."""
        ...

    def hold_last(self, table: str, sql: str, params: tuple[Any, ...]) -> None:
        """Run ``sql`` on ``table`` as :meth:`defer` inserts; a later call for the same
        table replaces it (an upsert of fixed keys, written once a group)."""
        ...

    def known(self, key: str) -> Any:
        """What an earlier command of this group kept under ``key``, or None."""
        ...

    def keep(self, key: str, value: Any, tables: Sequence[str]) -> None:
        """Keep ``value`` for the group's later commands, until a statement writing one of
        ``tables`` runs or a unit rolls back."""
        ...

    def lookup(self, table: str, column: str, value: Any, want: str) -> Any:
        """``want`` of the row of ``table`` whose ``column`` is ``value`` (a unique key), or
        None; the rows held for ``table`` are not looked at (the caller tracks them, as for
        :meth:`read_past`). While a group runs as one unit, an adapter whose reads each
        wait a round trip answers None at once and reads the group's values in one
        statement before anything writes ``table``: a value found there runs the group
        again, with every lookup read at once."""
        ...

    def read_past(self, sql: str, params: Sequence[Any], table: str) -> list[tuple[Any, ...]]:
        """The rows of a read the rows held for ``table`` cannot change (the caller
        tracks them): they stay held for the group's INSERT."""
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested unit of the command, rolled back alone (rows and log state) if it raises."""
        ...

    def tree_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        """Stored Merkle hashes by index, as of this transaction (a ``HashReader``)."""
        ...

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        """The newest stored checkpoint as this transaction sees it, or None."""

    def store_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        """Keep a signed checkpoint; it commits with the transaction."""

    def now(self) -> str:
        """The store clock's time, formatted as entries carry it."""
        ...


Command = Callable[[WriteTxn], T]


async def run_committed(
    run: Callable[[Command[T]], Awaitable[T]],
    command: Command[T],
    committed: Callable[[], None] | None,
) -> T:
    """``await run(command)``, then ``committed()`` once it committed, even if the
    awaiting task is cancelled meanwhile.

    The writer commits a command its caller stopped waiting for (a dropped request, a
    timeout), so in-process follow-ups that must match the committed state (a forget
    letting go of its vectors) cannot live after the ``await``: they are tied to the
    write itself. ``committed`` runs on the event loop before the caller resumes; it is
    not called when the command failed. An exception it raises is logged on
    ``memseal.ledger`` and does not reach the caller: the write it follows is committed,
    so the caller's answer stands (a callback's exception would otherwise go only to the
    loop's handler, unnamed).
    """
    if committed is None:
        # Nothing to tie to the commit: awaited in this task, no task of its own (one
        # task and one loop turn less on every recorded read, issue 17).
        return await run(command)
    job = asyncio.ensure_future(run(command))

    def settle(done: asyncio.Future[T]) -> None:
        if not done.cancelled() and done.exception() is None:
            try:
                committed()
            except Exception:
                _log.exception("the follow-up of a committed write failed")

    job.add_done_callback(settle)
    return await asyncio.shield(job)


class LogStore(Protocol):
    """An append-only store of signed entries."""

    async def run(self, command: Command[T]) -> T:
        """Run ``command`` in the writer; return once its transaction is durable."""
        ...

    async def head(self) -> Head:
        """The log's size and last leaf hash, as of the last commit."""

    async def read(self, seq: int) -> Record:
        """One record; :class:`NotFound` when ``seq`` is not in the log."""
        ...

    def scan(self, start: int = 0, stop: int | None = None) -> AsyncIterator[Record]:
        """Records ``start <= seq < stop`` in order, fetched in chunks."""
        ...

    def scan_chunks(
        self, start: int = 0, stop: int | None = None, size: int = 1024
    ) -> AsyncIterator[list[Record]]:
        """The records of :meth:`scan`, a list of up to ``size`` at a time."""
        ...

    async def mentioning(self, ref: str) -> list[int]:
        """Seqs whose payload mentions ``ref`` (filled by the layers above)."""
        ...

    async def tree_read(self, work: Callable[[Callable[[Sequence[int]], list[bytes]]], T]) -> T:
        """Run ``work`` with a synchronous reader of stored tree hashes, on one snapshot."""
        ...

    async def tree_range(self, start: int, stop: int) -> list[bytes]:
        """The stored Merkle hashes at indexes ``start`` to ``stop`` (for proofs)."""

    async def checkpoints(self) -> list[StoredCheckpoint]:
        """Every stored checkpoint, oldest first."""

    async def payloads_present(self, seqs: Sequence[int]) -> list[int]:
        """Which of ``seqs`` still have a stored payload."""
        ...

    async def redacted_by(self, seq: int) -> int | None:
        """The seq of the signed entry that erased ``seq``'s payload, if one did."""
        ...

    async def stray_rows(self, size: int) -> list[tuple[str, int]]:
        """Rows that belong to no entry of the log of ``size`` entries."""
        ...

    async def close(self) -> None:
        """Stop the writer after the queued commits and close the connections."""


class Snapshots(Protocol):
    """Read-only queries of the layers above, each run whole on one snapshot."""

    async def run(self, fn: Callable[[Execute], T]) -> T:
        """``fn(execute)`` on a reader thread, inside one read transaction."""
        ...

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read on a snapshot of the committed state; the rows it returns."""

    async def close(self) -> None:
        """Release the snapshot connections."""


class SqlStore(LogStore, Protocol):
    """A log store the layers above can keep their own tables in (both adapters).

    Their statements are written for :attr:`dialect` (``"sqlite"`` or
    ``"postgresql"``), with ``?`` placeholders in either; most are the same
    text in both, and the few that are not are chosen by the dialect.
    """

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgres"``: which SQL the engine's projections speak."""

    @property
    def signer(self) -> NoteSigner:
        """The key that signs new entries (the current key after a rotation)."""

    def use_signer(self, signer: NoteSigner) -> None:
        """Sign with ``signer`` from now on: how a key rotation takes effect."""

    def set_key_source(self, source: Callable[[str], NoteSigner | None]) -> None:
        """Where a process finds the key another process rotated the log to."""
        ...

    def add_schema(self, ddl: str) -> None:
        """Tables of the layers above, made with the log's own when the store opens."""
        ...

    def add_commit_hook(self, hook: Callable[[Any], None]) -> None:
        """``hook(txn)`` after each group's commands, inside its transaction."""
        ...

    async def open(self) -> None:
        """Create or check the schema and start the writer; call once before any use."""

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """A read-only query (one statement, the store's reader connection)."""
        ...

    async def exclusive(self, work: Callable[[Any], T]) -> T:
        """``work(connection)`` on the writer's connection between group commits."""
        ...

    def snapshots(self, workers: int = 2) -> Snapshots:
        """A pool running whole read queries on one snapshot each (see ``_snapshots``)."""
        ...
