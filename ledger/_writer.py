"""The group-commit writer both log stores share: one thread, one connection.

Why a writer thread of our own rather than an async driver for writes:
aiosqlite crosses to its database thread once per statement (44 to 200
microseconds each, measured here, more than a signature), and asyncpg is
async only, so every statement of a command would hop from a thread back
to the event loop. A unit of work must read the head once the write lock
is held, sign, insert its entries and its callers' rows, and commit; the
writer runs a whole group of commands in one crossing instead.

Commands submitted during one turn of the event loop travel to the writer
together, so tasks woken by one group commit all land in the next group,
not one by one. The writer takes everything queued while the last group
was committing (up to ``max_batch`` jobs), hands the commands to the
adapter's ``commit`` (one transaction, a savepoint per command) and its
maintenance jobs to ``run_raw`` (outside any transaction, in submission
order), then hops back to the event loop once to resolve the whole group.
A future resolves only after the commit that holds its command returned.

The adapter supplies the database side as callables: ``commit`` sets each
job's :attr:`Job.outcome` or raises (the whole group failed), ``run_raw``
runs one maintenance job on the writer's connection and returns its value
or raises, ``translate`` turns a driver error into a :class:`StorageError`,
and ``finish`` closes the connection when the thread stops.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .errors import MemsealError, StorageError
from .store import Command, WriteTxn

__all__ = ["GroupCommitWriter", "Job"]

T = TypeVar("T")
C = TypeVar("C")


@dataclass(eq=False)
class Job(Generic[C]):
    """One submission to the writer: a command (or a raw maintenance job) and the
    future its caller awaits, resolved when the writer is done (a command: once committed)."""

    command: Command[Any]
    future: asyncio.Future[Any]
    outcome: tuple[bool, Any] = field(default=(False, None))
    # Maintenance (scrub, WAL checkpoint, VACUUM) runs on the writer outside any transaction.
    raw: Callable[[C], Any] | None = None


def _resolve(batch: list[Job[Any]]) -> None:
    for job in batch:
        if job.future.done():  # the caller was cancelled; the work stands
            continue
        ok, value = job.outcome
        if ok:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)


def _unused(txn: WriteTxn) -> None:  # pragma: no cover - raw jobs bypass commands
    raise AssertionError("raw job run as a command")


class GroupCommitWriter(Generic[C]):
    """The job queue and writer thread of one store (see the module docstring).

    ``C`` is the type of the writer's connection that maintenance jobs receive.
    """

    def __init__(
        self,
        *,
        commit: Callable[[list[Job[C]]], None],
        run_raw: Callable[[Callable[[C], Any]], Any],
        translate: Callable[[BaseException], BaseException],
        finish: Callable[[], None],
        max_batch: int,
        name: str,
    ) -> None:
        self._commit = commit
        self._run_raw = run_raw
        self._translate = translate
        self._finish = finish
        self._max_batch = max_batch
        self._name = name
        self._pending: list[Job[C]] = []
        self._jobs: queue.SimpleQueue[list[Job[C]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def running(self) -> bool:
        """Whether the writer thread was started."""
        return self._thread is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the writer thread; jobs resolve on ``loop``."""
        self._loop = loop
        self._thread = threading.Thread(target=self._write_loop, name=self._name, daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Finish every queued job (drain), then let the thread close the connection."""
        if self._thread is None:
            return
        self._flush()
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)

    async def run(self, command: Command[T]) -> T:
        """Queue ``command`` for the next group commit; resolve after that commit."""
        assert self._loop is not None
        future: asyncio.Future[T] = self._loop.create_future()
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(Job(command, future))
        return await future

    async def exclusive(self, work: Callable[[C], T]) -> T:
        """Run ``work`` on the writer's connection between group commits."""
        assert self._loop is not None
        future: asyncio.Future[T] = self._loop.create_future()
        self._flush()
        self._jobs.put([Job(_unused, future, raw=work)])
        return await future

    def _flush(self) -> None:
        jobs, self._pending = self._pending, []
        if jobs:
            self._jobs.put(jobs)

    def _write_loop(self) -> None:
        """The writer thread: one group commit per pass, one hop back to the loop per group."""
        assert self._loop is not None
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
        self._finish()

    def _commit_or_run(self, batch: list[Job[C]]) -> None:
        commands: list[Job[C]] = []
        for job in batch:
            if job.raw is None:
                commands.append(job)
                continue
            if commands:  # keep submission order around the maintenance job
                self._commit(commands)
                commands = []
            try:
                job.outcome = (True, self._run_raw(job.raw))
            except BaseException as exc:
                job.outcome = (False, self._translate(exc))
        if commands:
            self._commit(commands)
