"""The attacker's hand on the store: a connection of its own to the tables, no keys.

On SQLite the folder's ``ledger.db``; on PostgreSQL the store's schema, with
SQLite's ``?`` placeholders turned into psycopg's.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from memseal.memory import Memory


class _Postgres:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(statement.replace("?", "%s"), params)


@contextlib.contextmanager
def attacker(memory: Memory) -> Iterator[Any]:
    """A connection to the memory's store behind its back (autocommit)."""
    store: Any = memory.ledger.store
    if store.dialect == "sqlite":
        with contextlib.closing(
            sqlite3.connect(memory.folder / "ledger.db", isolation_level=None)
        ) as conn:
            yield conn
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        yield _Postgres(conn)


def rows(memory: Memory, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with attacker(memory) as conn:
        return [tuple(r) for r in conn.execute(statement, params).fetchall()]


def run(memory: Memory, statement: str, params: Sequence[Any] = ()) -> None:
    with attacker(memory) as conn:
        conn.execute(statement, params)
