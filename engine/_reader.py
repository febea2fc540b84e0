"""The engine's read path: one thread hop and one snapshot per query.

A query runs several statements (rank, coverage, the items, their
verdicts). Through aiosqlite each statement costs three crossings between
the event loop and its thread, which measured here was fifteen times the
SQL itself; and separate statements may see different commits, so an item
ranked by one could be forgotten before the next loads it. Here a whole
query is one function run on a reader thread inside one read transaction:
one crossing, one consistent snapshot.

Connections are the reader threads' own (``query_only``), opened on first
use and closed with the reader. They hold a snapshot only while a query
runs, so the forget scrub's WAL checkpoint is never held up for long.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

from memseal.ledger.errors import StorageError

__all__ = ["Execute", "Reader"]

T = TypeVar("T")
Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

_BUSY_TIMEOUT_MS: Final = 30_000


class Reader:
    """Runs read functions ``fn(execute)`` on a small pool of read-only connections."""

    def __init__(self, path: Path, workers: int = 2) -> None:
        self._path = path
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="memseal-read")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _call(self, fn: Callable[[Execute], T]) -> T:
        conn = self._connection()

        def execute(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            return conn.execute(sql, params).fetchall()

        try:
            conn.execute("BEGIN")
            try:
                return fn(execute)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StorageError(f"query failed: {exc}") from exc

    async def run(self, fn: Callable[[Execute], T]) -> T:
        """``fn(execute)`` on a reader thread, inside one read transaction."""
        if self._closed:
            raise StorageError("the engine is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, fn)

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await self.run(lambda execute: execute(sql, params))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._pool.shutdown, True)
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
