"""One PostgreSQL write transaction: the rows of an append, sent ahead in a pipeline.

:class:`PostgresTxn` is what the PostgreSQL store (:mod:`.postgres`) hands each
command: the dialect's half of :class:`~._txn.LogTxn`. Kept apart from the store
because it is the statements of one transaction, while the store is connection
handling (the writer's lock, reconnects, readers); the store makes one per group
commit and sets its :attr:`PostgresTxn.pipeline`.

An append's rows are held for the group's one INSERT a table, as on SQLite
(:class:`~._txn.LogTxn`), and in the group's pipeline every statement that
returns no rows is sent without waiting for its answer: its error surfaces by
the end of its unit at the latest (the group, which then runs again call by
call, or a savepoint's unit, which it rolls back alone).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from ._pg_sql import sends_ahead, translate_placeholders, upsert_runs
from ._txn import LogTxn, in_order

__all__ = ["Conn", "PostgresAppendHook", "PostgresTxn", "read_tree"]

Conn = psycopg.Connection[TupleRow]

# One round trip erases what an entry redacts (see :meth:`LogTxn._erase`).
_ERASE = (
    "WITH p AS (DELETE FROM payloads WHERE seq = ANY(%s::bigint[])), "
    "m AS (DELETE FROM mentions WHERE seq = ANY(%s::bigint[])) "
    "INSERT INTO redactions (seq, by_seq) SELECT DISTINCT s, %s::bigint "
    "FROM unnest(%s::bigint[]) s ON CONFLICT (seq) DO NOTHING"
)

PostgresAppendHook = Callable[["PostgresTxn", int, bytes], None]
"""Called inside the transaction after each append with (txn, seq, leaf hash)."""


def read_tree(conn: Conn, indexes: Sequence[int]) -> list[bytes]:
    """Stored Merkle hashes by index on ``conn``, in the order asked."""
    if not indexes:
        return []
    rows = conn.execute(
        "SELECT idx, hash FROM tree WHERE idx = ANY(%s::bigint[])", (list(indexes),)
    ).fetchall()
    found: dict[int, bytes] = {r[0]: r[1] for r in rows}
    return in_order(indexes, found)


@functools.lru_cache(maxsize=256)
def _insert_sql(into: str, tail: str, width: int, count: int) -> str:
    """A multi-row INSERT of ``count`` rows of ``width`` values, ``$n`` placeholders."""
    rows = (
        "(" + ", ".join(f"${n}" for n in range(start, start + width)) + ")"
        for start in range(1, width * count, width)
    )
    return f"INSERT INTO {into} VALUES {', '.join(rows)}{tail}"


class PostgresTxn(LogTxn[Conn]):
    """The open write transaction handed to each command (see :class:`WriteTxn`)."""

    _ROLLBACK_TO = "ROLLBACK TO SAVEPOINT {}"
    _RELEASE = "RELEASE SAVEPOINT {}"
    dialect = "postgresql"

    def _erase(self, earlier: Sequence[int], seq: int) -> None:
        seqs = list(earlier)
        self._touch(_ERASE)  # the held payloads and mentions rows first
        self._send(_ERASE, (seqs, seqs, seq, seqs))

    _rows: psycopg.RawCursor[TupleRow] | None = None

    def _insert_rows(self, into: str, tail: str, rows: Sequence[tuple[Any, ...]]) -> None:
        # On a raw cursor (the server's $n placeholders): psycopg parses a %s statement of
        # over 50 parameters anew each time, a quarter of the writer's time in a profile.
        if self._rows is None:
            self._rows = psycopg.RawCursor(self.conn)
        # PostgreSQL refuses an upsert that meets one key twice in a statement, where SQLite
        # applies the rows in order: a key met again starts the next statement.
        for part in upsert_runs(into, tail, rows):
            if self.pipeline is not None:
                self._pending = True
            self._rows.execute(
                _insert_sql(into, tail, len(part[0]), len(part)), [v for row in part for v in row]
            )

    def _raw(self, sql: str, params: Sequence[Any]) -> None:
        self._send(translate_placeholders(sql), params)

    #: Whether the group's commands ran and stand (set False by a failed run as one unit).
    ran = True

    #: The group's pipeline while :meth:`PostgresLogStore._commit` runs it (see
    #: :meth:`execute`); None runs every statement at once.
    pipeline: psycopg.Pipeline | None = None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one statement inside the transaction (``?`` placeholders become ``%s``).

        In the group's pipeline a statement that returns no rows (an INSERT,
        UPDATE or DELETE without RETURNING) is sent without waiting for its
        answer: a round trip each was most of a recorded call's time. Its
        error, if any, is raised by the next statement that waits, at the
        latest when its savepoint's unit ends (:meth:`LogTxn._settle`), so it
        rolls back the same unit as before.
        """
        self._touch(sql)  # what the group kept about a table this writes is stale now
        if self.pipeline is not None and sends_ahead(sql):
            self._send(translate_placeholders(sql), list(params))
            return []
        cur = self.conn.execute(translate_placeholders(sql), list(params))
        if self.pipeline is not None:
            self.pipeline.sync()  # this statement's rows, and any earlier error
            self._pending = False
        return cur.fetchall() if cur.description is not None else []

    #: Whether a statement was sent ahead since the pipeline last synced: a sync waits a
    #: round trip even with nothing to answer, and a unit settles at each end.
    _pending = False

    _ahead: psycopg.Cursor[TupleRow] | None = None

    def _send(self, query: str, params: Sequence[Any] = ()) -> None:
        """Run a statement whose rows nobody reads: in the pipeline, sent ahead on one
        cursor kept for them (a new cursor a statement was a tenth of the writer's time)."""
        if self.pipeline is None:
            self.conn.execute(query, params)
            return
        if self._ahead is None:
            self._ahead = self.conn.cursor()
        self._pending = True
        self._ahead.execute(query, params)

    def _sql(self, statement: str) -> None:
        self._send(statement)

    def _settle(self) -> None:
        if self.pipeline is not None and self._pending:
            self._pending = False
            self.pipeline.sync()

    def tree_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        """Stored Merkle hashes by index, as of this transaction; StorageError if one is missing."""
        self._touch("tree")
        return read_tree(self.conn, indexes)
