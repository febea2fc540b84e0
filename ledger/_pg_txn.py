"""One PostgreSQL write transaction: the rows of an append, sent ahead in a pipeline.

:class:`PostgresTxn` is what the PostgreSQL store (:mod:`.postgres`) hands each
command: the dialect's half of :class:`~._txn.LogTxn`. Kept apart from the store
because it is the statements of one transaction, while the store is connection
handling (the writer's lock, reconnects, readers); the store makes one per group
commit and sets its :attr:`PostgresTxn.pipeline`.

An append writes its entry, tree hashes, payload and mentions in one round trip
(one statement of CTEs), and in the group's pipeline every statement that
returns no rows is sent without waiting for its answer: its error surfaces by
the end of its savepoint's unit at the latest, so it rolls back that unit alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from ._pg_sql import sends_ahead, translate_placeholders
from ._txn import LogTxn, in_order
from .entry import RESIDUE_SALT, Draft
from .merkle import stored_hash_count

__all__ = ["Conn", "PostgresAppendHook", "PostgresTxn", "read_tree"]

Conn = psycopg.Connection[TupleRow]

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


class PostgresTxn(LogTxn[Conn]):
    """The open write transaction handed to each command (see :class:`WriteTxn`)."""

    _ROLLBACK_TO = "ROLLBACK TO SAVEPOINT {}"
    _RELEASE = "RELEASE SAVEPOINT {}"
    dialect = "postgresql"

    def _write_entry(
        self, draft: Draft, seq: int, leaf: bytes, digest: bytes, signature: bytes
    ) -> None:
        new_tree = self._grow_edge(seq, digest)
        base = stored_hash_count(seq)
        # One round trip for the entry, its tree hashes, its payload and its mentions.
        ctes = ["e AS (INSERT INTO entries (seq, leaf, hash, sig) VALUES (%s, %s, %s, %s))"]
        params: list[Any] = [seq, leaf, digest, signature]
        if draft.payload is not None:
            ctes.append("p AS (INSERT INTO payloads (seq, salt, data) VALUES (%s, %s, %s))")
            params += [seq, draft.salt, draft.payload]
            if draft.mentions:
                ctes.append(
                    "m AS (INSERT INTO mentions (ref, seq) SELECT r, %s FROM unnest(%s::text[]) r)"
                )
                params += [seq, list(draft.mentions)]
        params += [list(range(base, base + len(new_tree))), new_tree]
        self._send(
            "WITH "
            + ", ".join(ctes)
            + " INSERT INTO tree (idx, hash) SELECT * FROM unnest(%s::bigint[], %s::bytea[])",
            params,
        )
        if draft.redacts:
            earlier_seqs = list(draft.redacts)
            # Which signed entry erased it: replay marks forgotten texts with that seq.
            self._send(
                "WITH p AS (DELETE FROM payloads WHERE seq = ANY(%s::bigint[])), "
                "m AS (DELETE FROM mentions WHERE seq = ANY(%s::bigint[])) "
                "INSERT INTO redactions (seq, by_seq) SELECT DISTINCT s, %s::bigint "
                "FROM unnest(%s::bigint[]) s ON CONFLICT (seq) DO NOTHING",
                (earlier_seqs, earlier_seqs, seq, earlier_seqs),
            )
        for earlier, residue, mentions in draft.kept:
            # What the forget left of this payload: the texts it did not forget (entry.py).
            self._send(
                "WITH p AS (INSERT INTO payloads (seq, salt, data) VALUES (%s, %s, %s)) "
                "INSERT INTO mentions (ref, seq) SELECT r, %s FROM unnest(%s::text[]) r",
                (earlier, RESIDUE_SALT, residue, earlier, list(mentions)),
            )

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
        return read_tree(self.conn, indexes)
