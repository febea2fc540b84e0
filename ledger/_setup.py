"""What both log stores share, kept once: their set-up and their connections' life.

The layers above add their tables (``add_schema``) and hooks before the store
opens; the ledger hands over a rotated key (``use_signer``) and says where a
key another process rotated to can be found (``set_key_source``). The store's
group commit reads all of it. :class:`StoreSetup` also opens and closes the
connections (a writer, a reader and a tree reader), runs commands and
exclusive work through the one group-commit writer (:mod:`._writer`), and
runs a group's commands in its transaction; the adapters (:mod:`.sqlite`,
:mod:`.postgres`) supply the driver's half.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from ._txn import KeySource, LogTxn
from ._writer import GroupCommitWriter, Job
from .errors import StorageError
from .note import NoteSigner
from .store import Command, Head, Record

__all__ = [
    "SCHEMA_VERSION",
    "StoreSetup",
    "check_version",
    "head_of",
    "records_of",
    "translator",
    "utcnow",
]

#: The version of the log's own tables, both stores; an open refuses another.
SCHEMA_VERSION = "1"


class _Closes(Protocol):
    def close(self) -> None: ...


class _ClosesAsync(Protocol):
    async def close(self) -> None: ...


TxnT = TypeVar("TxnT", bound=LogTxn[Any])
ConnT = TypeVar("ConnT", bound=_Closes)
ReaderT = TypeVar("ReaderT", bound=_ClosesAsync)
T = TypeVar("T")


def utcnow() -> datetime:
    """The stores' default clock."""
    return datetime.now(UTC)


def records_of(rows: Iterable[Sequence[Any]]) -> list[Record]:
    """Records from rows of (seq, leaf, hash, sig, salt, payload)."""
    return [
        Record(seq=r[0], leaf=r[1], leaf_hash=r[2], signature=r[3], salt=r[4], payload=r[5])
        for r in rows
    ]


def head_of(row: Sequence[Any] | None) -> Head:
    """The head from the last entry's (seq, hash) row, or the empty log's."""
    if row is None:
        return Head(size=0, leaf_hash=None)
    return Head(size=row[0] + 1, leaf_hash=row[1])


def check_version(where: str, found: object, reader: str = "this reads") -> None:
    """Refuse a log whose tables are of another schema version (``found`` None: none)."""
    if found != SCHEMA_VERSION:
        shown = "none" if found is None else found
        raise StorageError(f"{where} has ledger schema {shown}; {reader} {SCHEMA_VERSION}")


def translator(
    errors: tuple[type[BaseException], ...], said: Callable[[BaseException], str] = str
) -> Callable[[BaseException], BaseException]:
    """What the writer raises for a command's error: a driver's (``errors``) as a
    StorageError caused by it (``said`` words it), any other as it is."""

    def translate(exc: BaseException) -> BaseException:
        if isinstance(exc, errors):
            error = StorageError(f"database error: {said(exc)}")
            error.__cause__ = exc
            return error
        return exc

    return translate


class StoreSetup(ABC, Generic[TxnT, ConnT, ReaderT]):
    """The shared half of a store whose write transactions are ``TxnT``, whose writer
    and tree reader are ``ConnT`` connections and whose reader is a ``ReaderT``."""

    #: What the driver raises; an open that fails with one of them is a StorageError.
    _DRIVER_ERRORS: ClassVar[tuple[type[BaseException], ...]]

    def __init__(
        self,
        signer: NoteSigner | None,
        schema: str,
        *,
        clock: Callable[[], datetime],
        max_batch: int,
        translate: Callable[[BaseException], BaseException],
        thread: str,
    ) -> None:
        self._signer = signer
        self._schema: list[str] = [schema]
        self._hooks: list[Callable[[TxnT, int, bytes], None]] = []
        self._commit_hooks: list[Callable[[TxnT], None]] = []
        self._key_source: KeySource | None = None
        self._clock = clock
        self._max_batch = max_batch
        self._translate = translate
        self._writer: ConnT | None = None
        self._reader: ReaderT | None = None
        self._tree_conn: ConnT | None = None
        self._tree_lock = threading.Lock()
        self._closed = False
        self._group: GroupCommitWriter[ConnT] = GroupCommitWriter(
            commit=self._commit,
            run_raw=self._run_raw,
            translate=translate,
            finish=self._finish,
            max_batch=max_batch,
            name=thread,
        )

    def add_schema(self, ddl: str) -> None:
        """Tables of the layers above, created with the log's own (before ``open``)."""
        self._schema.append(ddl)

    def add_append_hook(self, hook: Callable[[TxnT, int, bytes], None]) -> None:
        """Run ``hook(txn, seq, leaf_hash)`` inside the transaction after each append."""
        self._hooks.append(hook)

    def add_commit_hook(self, hook: Callable[[TxnT], None]) -> None:
        """Run ``hook(txn)`` after a group's commands, inside its transaction.

        A hook that raises fails the whole group: it guards the log itself
        (the checkpoint policy refuses to sign an inconsistent tree).
        """
        self._commit_hooks.append(hook)

    @property
    def signer(self) -> NoteSigner:
        """The key the next group is signed with; a read-only store has none."""
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        return self._signer

    def use_signer(self, signer: NoteSigner) -> None:
        """Sign later groups with ``signer`` (after a committed key rotation)."""
        self._signer = signer

    def set_key_source(self, source: KeySource) -> None:
        """Where to find the key another process rotated to (see ``adopt_current_key``)."""
        self._key_source = source

    # -- the driver's half ----------------------------------------------------

    @abstractmethod
    def _open_writer(self) -> ConnT:
        """The writer's connection, the tables made (runs on a thread)."""

    @abstractmethod
    async def _open_reader(self, readonly: bool) -> ReaderT:
        """The reader's connection (read-only: the store was opened without a signer)."""

    @abstractmethod
    async def _check_schema(self) -> None:
        """Refuse, on a read-only open, a database that is not a ledger of this version."""

    @abstractmethod
    def _open_failed(self, exc: BaseException) -> StorageError:
        """What an open that the driver failed with ``exc`` says."""

    @abstractmethod
    def _close_writer(self, writer: ConnT) -> None:
        """Close the writer's connection (and what guards its turn)."""

    @abstractmethod
    def _commit(self, batch: list[Job[ConnT]]) -> None:
        """Run ``batch`` in one transaction and commit it (on the writer's thread)."""

    @abstractmethod
    def _run_raw(self, work: Callable[[ConnT], T]) -> T:
        """Run maintenance ``work`` on the writer's connection (on the writer's thread)."""

    @abstractmethod
    def _finish(self) -> None:
        """Close the writer's connection as the writer's thread ends."""

    # -- set-up ---------------------------------------------------------------

    async def open(self) -> None:
        """Connect (with a signer: the writer too, making the tables) and start writing."""
        loop = asyncio.get_running_loop()
        readonly = self._signer is None
        try:
            if not readonly:
                self._writer = await asyncio.to_thread(self._open_writer)
            self._reader = await self._open_reader(readonly)
            if readonly:
                await self._check_schema()
        except self._DRIVER_ERRORS as exc:
            await self.close()
            raise self._open_failed(exc) from exc
        except BaseException:
            await self.close()
            raise
        if not readonly:
            self._group.start(loop)

    async def close(self) -> None:
        """Finish every queued command (drain), then close the connections."""
        if self._closed:
            return
        self._closed = True
        await self._group.stop()
        if self._reader is not None:
            await self._reader.close()
        with self._tree_lock:
            if self._tree_conn is not None:
                self._tree_conn.close()
        if self._writer is not None and not self._group.running:
            self._close_writer(self._writer)

    def _db(self) -> ReaderT:
        if self._reader is None or self._closed:
            raise StorageError("the ledger store is closed")
        return self._reader

    # -- writing --------------------------------------------------------------

    def _writable(self) -> None:
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        if self._closed or not self._group.running:
            raise StorageError("the ledger store is closed")

    async def run(self, command: Command[T]) -> T:
        """Run ``command`` in the next group commit; resolve once that commit is durable."""
        self._writable()
        return await self._group.run(command)

    async def exclusive(self, work: Callable[[ConnT], T]) -> T:
        """Run ``work`` on the writer's connection between group commits, outside a
        transaction (VACUUM and the like). No process appends to this ledger meanwhile."""
        self._writable()
        return await self._group.exclusive(work)

    def _run_grouped(self, txn: TxnT, batch: list[Job[ConnT]]) -> bool:
        """The group's commands as one unit (:meth:`LogTxn.run_grouped`), then the commit
        hooks; False, with the outcomes unset, when a command failed: the caller rolls the
        transaction back and runs :meth:`_run_group`."""
        txn.adopt_current_key(self._key_source)
        outcomes = txn.run_grouped([job.command for job in batch])
        if outcomes is None:
            return False
        for job, outcome in zip(batch, outcomes, strict=True):
            job.outcome = outcome
        for hook in self._commit_hooks:
            hook(txn)
        return True

    def _run_group(self, txn: TxnT, batch: list[Job[ConnT]]) -> None:
        """The group's commands, each in its savepoint, then the commit hooks."""
        txn.adopt_current_key(self._key_source)
        for job in batch:
            job.outcome = txn.run_command(job.command, self._translate)
        for hook in self._commit_hooks:
            hook(txn)
