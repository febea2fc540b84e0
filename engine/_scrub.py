"""The scrub after a forget: make forgotten text unrecoverable from the files.

A forget's transaction already deletes the rows (and the ledger erases the
payloads) with ``secure_delete`` on, so SQLite zeroes what it frees. Two
copies can remain: the FTS5 index (SQLite 3.40's FTS5 has no secure-delete,
and a delete there is itself a new index segment naming the terms), and
the WAL, which keeps old page images until a checkpoint. So the scrub:

1. merges the FTS index into one segment (``optimize``), which drops the
   deleted documents' terms and frees the old segments;
2. checkpoints the WAL with ``TRUNCATE``: every page goes back into the
   database file and the WAL is cut to zero bytes.

Step 2 fails while a reader holds an old snapshot; it is retried with a
short busy timeout (so the writer is never held long), and the forget's
mark in ``engine_scrub`` stays until it succeeds, so a scrub interrupted
by a crash resumes when the engine next opens.

On PostgreSQL a deleted row stays in its page as a dead tuple until VACUUM
reclaims it, and the tsvector index holds lexemes, not the text. So the
scrub there is ``VACUUM`` of the projection tables and of the ledger's
payloads and mentions (:func:`vacuum`), then the marks are cleared. A
VACUUM frees the dead tuples' space for reuse; the bytes can remain until
that space is written again, and the server's WAL keeps them until its
segments are recycled (see docs/scaling.md).

:class:`Scrubber` runs these steps for one engine: one scrub at a time,
each step on the writer's connection between group commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
from collections.abc import Callable
from typing import Any, Final

from memseal.ledger.errors import StorageError
from memseal.ledger.store import Snapshots, SqlStore

__all__ = ["Scrubber", "checkpoint_and_clear", "optimize_fts", "vacuum", "vacuum_clear"]

# The writer's normal busy timeout (the store's), restored after each attempt.
_NORMAL_TIMEOUT_MS: Final = 30_000
_ATTEMPT_TIMEOUT_MS: Final = 100


def optimize_fts(conn: sqlite3.Connection) -> None:
    """SQLite, step 1: merge the FTS index into one segment, dropping deleted documents."""
    conn.execute("INSERT INTO engine_fts (engine_fts) VALUES ('optimize')")


def _truncate(conn: sqlite3.Connection) -> bool:
    conn.execute(f"PRAGMA busy_timeout = {_ATTEMPT_TIMEOUT_MS}")
    try:
        row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.OperationalError:  # locked by another process's checkpoint or writer
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {_NORMAL_TIMEOUT_MS}")
    return row is not None and row[0] == 0


def checkpoint_and_clear(conn: sqlite3.Connection, upto: int) -> bool:
    """One attempt at step 2; on success the marks up to ``upto`` are cleared."""
    if not _truncate(conn):
        return False
    conn.execute("DELETE FROM engine_scrub WHERE seq <= ?", (upto,))
    # Clearing the marks wrote a page to the WAL (no text); empty it again if we can.
    _truncate(conn)
    return True


#: What a forget's transaction deleted rows from, projections and ledger alike.
_VACUUMED: Final = (
    "engine_items, engine_fts, engine_facets, engine_dates, engine_verdicts, engine_vectors, "
    "payloads, mentions"
)


def vacuum(conn: Any) -> None:
    """PostgreSQL: reclaim the dead tuples the forget left (on an autocommit connection)."""
    conn.execute(f"VACUUM {_VACUUMED}")


def vacuum_clear(conn: Any, upto: int) -> bool:
    """PostgreSQL: the marks up to ``upto`` cleared (the VACUUM has run); always done."""
    conn.execute("DELETE FROM engine_scrub WHERE seq <= %s", (upto,))
    return True


#: Per dialect: the scrub's one-off step, then its retried one (True when done).
_STEPS: Final[dict[str, tuple[Callable[[Any], None], Callable[[Any, int], bool]]]] = {
    "sqlite": (optimize_fts, checkpoint_and_clear),
    "postgresql": (vacuum, vacuum_clear),
}
_ATTEMPTS: Final = 6


class Scrubber:
    """The scrubs of one engine: run after each forget, retried in the background.

    Readers holding an old snapshot make the WAL truncation wait: it is
    retried briefly, then in the background until it succeeds.
    """

    def __init__(self, store: SqlStore, reader: Snapshots) -> None:
        self._store = store
        self._reader = reader
        self._first, self._attempt = _STEPS[store.dialect]
        self._lock = asyncio.Lock()
        self._retry: asyncio.Task[None] | None = None

    async def pending(self) -> bool:
        """Whether a forget's scrub is marked and not done (one was interrupted)."""
        return bool(await self._reader.rows("SELECT 1 FROM engine_scrub LIMIT 1"))

    async def run(self) -> bool:
        """Finish every pending scrub; True when done, False when left to the retry."""
        async with self._lock:
            upto = await self._upto()
            if upto is None:
                return True
            await self._store.exclusive(self._first)
            for attempt in range(_ATTEMPTS):
                if await self._store.exclusive(functools.partial(self._attempt_at, upto)):
                    return True
                await asyncio.sleep(min(0.02 * 2**attempt, 0.25))
        if self._retry is None or self._retry.done():
            self._retry = asyncio.create_task(self._later())
        return False

    async def close(self) -> None:
        """Stop a pending background retry (its mark stays: the next open resumes it)."""
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry
            self._retry = None

    async def _upto(self) -> int | None:
        found = await self._reader.rows("SELECT max(seq) FROM engine_scrub")
        upto: int | None = found[0][0] if found else None
        return upto

    def _attempt_at(self, upto: int, conn: object) -> bool:
        return self._attempt(conn, upto)

    async def _later(self) -> None:
        delay = 1.0
        while True:
            await asyncio.sleep(delay)
            try:
                async with self._lock:
                    upto = await self._upto()
                    if upto is None or await self._store.exclusive(
                        functools.partial(self._attempt_at, upto)
                    ):
                        return
            except StorageError:
                return  # the store closed; the mark stays and the next open resumes
            delay = min(delay * 2, 60.0)
