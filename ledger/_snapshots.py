"""Read snapshots for the layers above: one thread hop and one snapshot per query.

A query of the engine runs several statements (rank, coverage, the items,
their verdicts). Through an async driver each statement costs crossings
between the event loop and a thread, and separate statements may see
different commits, so an item ranked by one could be forgotten before the
next loads it. Here a whole query is one function ``fn(execute)`` run on a
reader thread inside one read transaction: one crossing, one consistent
snapshot.

The pool is driver-independent; each store supplies a :class:`Session`
factory (a connection of its own, read-only) and the driver's error class.
Connections belong to the pool's threads, are opened on first use and
closed with the pool. They hold a snapshot only while a query runs.

A recorded read names the tree size it observed, and a replay re-derives it
at that size. A size read before or after the query is not that: a commit can
land between the size and the query. Inside :func:`observing_sizes`, each
query also reads the log's size first, in its own snapshot, and the caller
learns the exact size every query of its read saw.

A read of several snapshots that bounds every one of them to the same log
prefix (the engine's hybrid fetch: ``seq < N`` everywhere, its corpus
statistics taken at N) may vouch for that prefix inside :func:`one_prefix`:
the observer is then told N once instead of each snapshot's own size, so a
write landing between the snapshots (a new item, past the bound) does not
make the read run again. The reader vouches only when it has checked that
nothing landing after N changed what it read.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from .errors import StorageError

__all__ = ["Execute", "OnePrefix", "Session", "SnapshotPool", "observing_sizes", "one_prefix"]

T = TypeVar("T")
Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

_SIZES: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "memseal_observed_sizes", default=None
)
# Both stores name the log's table alike; the first statement fixes SQLite's snapshot.
_SIZE_SQL = "SELECT seq FROM entries ORDER BY seq DESC LIMIT 1"


@contextlib.contextmanager
def observing_sizes() -> Iterator[list[int]]:
    """Collect, for each snapshot query run in this context, the log size it saw."""
    sizes: list[int] = []
    token = _SIZES.set(sizes)
    try:
        yield sizes
    finally:
        _SIZES.reset(token)


class OnePrefix:
    """What :func:`one_prefix` yields: the snapshots' own sizes, and the prefix vouched for."""

    def __init__(self, listening: bool) -> None:
        self.listening = listening  # an observer wants the sizes: else vouching is moot
        self.sizes: list[int] = []
        self.size: int | None = None

    def vouch(self, size: int) -> None:
        """Every snapshot of this read answered as the log prefix of ``size`` entries would."""
        self.size = size


@contextlib.contextmanager
def one_prefix() -> Iterator[OnePrefix]:
    """Hold back the sizes of the snapshot queries run inside; on leaving, tell the outer
    observer the vouched prefix size if the reader vouched for one, else each size held."""
    outer = _SIZES.get()
    prefix = OnePrefix(outer is not None)
    if outer is None:
        yield prefix
        return
    token = _SIZES.set(prefix.sizes)
    try:
        yield prefix
    finally:
        _SIZES.reset(token)
        outer.extend([prefix.size] if prefix.size is not None else prefix.sizes)


def _sized(fn: Callable[[Execute], T], sizes: list[int]) -> Callable[[Execute], T]:
    def run(execute: Execute) -> T:
        last = execute(_SIZE_SQL, ())
        result = fn(execute)
        sizes.append(last[0][0] + 1 if last else 0)
        return result

    return run


class Session(Protocol):
    """One read-only connection of a pool thread, in the store's own dialect."""

    def begin(self) -> None:
        """Open the read transaction whose snapshot every statement of the query sees."""
        ...

    def end(self) -> None:
        """End the read transaction, so the session holds no snapshot between queries."""
        ...

    def execute(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of one statement in the store's dialect, inside the open transaction."""
        ...

    def close(self) -> None:
        """Close the connection (when the pool closes, or after a query on it failed)."""
        ...

    @property
    def broken(self) -> bool:
        """The server dropped the connection (a restart): a new session may succeed."""
        ...


class SnapshotPool:
    """Runs read functions ``fn(execute)`` on a small pool of read-only sessions."""

    def __init__(
        self,
        connect: Callable[[], Session],
        errors: type[BaseException],
        workers: int = 2,
    ) -> None:
        self._connect = connect
        self._errors = errors
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="memseal-read")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        self._closed = False

    def _session(self) -> Session:
        session: Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._connect()
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def _drop(self, session: Session) -> None:
        # A session whose connection broke (a server restart) is made anew next time.
        self._local.session = None
        with self._lock:
            if session in self._sessions:
                self._sessions.remove(session)
        with contextlib.suppress(self._errors):
            session.close()

    def _call(self, fn: Callable[[Execute], T]) -> T:
        # A read changes nothing: on a session the server dropped, it runs once more.
        for attempt in range(2):
            try:
                session = self._session()
            except self._errors as exc:
                raise StorageError(f"cannot open a read connection: {exc}") from exc
            try:
                session.begin()
                try:
                    return fn(session.execute)
                finally:
                    session.end()
            except self._errors as exc:
                broken = session.broken
                self._drop(session)
                if attempt == 0 and broken:
                    continue
                raise StorageError(f"query failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(self, fn: Callable[[Execute], T]) -> T:
        """``fn(execute)`` on a reader thread, inside one read transaction."""
        if self._closed:
            raise StorageError("the store's readers are closed")
        sizes = _SIZES.get()  # read here: the executor's thread does not see our context
        if sizes is not None:
            fn = _sized(fn, sizes)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, fn)

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one read-only statement, on a snapshot of its own."""
        return await self.run(lambda execute: execute(sql, params))

    async def close(self) -> None:
        """Wait for the running reads, then close every session; later reads raise."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._pool.shutdown, True)
        with self._lock:
            for session in self._sessions:
                with contextlib.suppress(self._errors):
                    session.close()
            self._sessions.clear()
