"""``verify --deep`` over the full-text index: is it exactly what the items index?

The state hash leaves the index out (FTS5 keeps it in shadow tables whose
layout is SQLite's, and PostgreSQL's ``tsvector`` documents are the
server's), so a deleted or altered index row would make exact search
silently miss an item while every hashed projection still matched. The
items themselves are held to the log by the state hash; this module holds
the index to the items, on the same read snapshot.

* SQLite: FTS5's own ``integrity-check`` needs a write transaction, so the
  index is read through a temporary ``fts5vocab`` table (its ``instance``
  rows: term, document, column, offset) and compared with a contentless
  FTS5 table, with the same tokenizer, filled in a scratch database from the
  live items. Each document's rows are folded into one digest, so the
  comparison holds one number per item in memory.
* PostgreSQL: ``engine_fts`` is a table of ``tsvector`` documents; each must
  equal the document the live item's text, title and tags make (the
  literal :mod:`._dialect` inserts), and no document may lack an item.

:func:`fts_difference` returns the first seq that differs, or None.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from typing import Any, Final

from memseal.ledger.store import Execute

from ._dialect import POSTGRES

__all__ = ["fts_difference"]

_WINDOW: Final = 1_024
_MOD: Final = 1 << 128
_VOCAB: Final = "memseal_check_fts_vocab"
_TOKENIZE: Final = "porter unicode61 remove_diacritics 2"  # as engine_fts in _schema.py


def fts_difference(execute: Execute, dialect: str) -> int | None:
    """The first item seq whose full-text index rows differ from its item's, or None."""
    if dialect == "postgresql":
        return _postgres(execute)
    return _sqlite(execute)


def _items(execute: Execute) -> Any:
    """The live items' (seq, text, title, tags), a window at a time."""
    last = -1
    while True:
        rows = execute(
            "SELECT seq, text, title, tags FROM engine_items WHERE seq > ? ORDER BY seq LIMIT ?",
            (last, _WINDOW),
        )
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _digests(rows: list[tuple[Any, ...]], into: dict[int, int]) -> None:
    for term, doc, column, offset in rows:
        mark = hashlib.blake2b(f"{term}\0{column}\0{offset}".encode(), digest_size=16).digest()
        into[int(doc)] = (into.get(int(doc), 0) + int.from_bytes(mark, "big")) % _MOD


def _vocab_digests(execute: Callable[..., list[tuple[Any, ...]]], table: str) -> dict[int, int]:
    found: dict[int, int] = {}
    _digests(execute(f"SELECT term, doc, col, offset FROM {table}", ()), found)
    return found


def _sqlite(execute: Execute) -> int | None:
    # 1. the live index as FTS5 holds it (a temp table: no write to the database itself)
    execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_VOCAB} "
        "USING fts5vocab('main', 'engine_fts', 'instance')",
        (),
    )
    try:
        live = _vocab_digests(execute, f"temp.{_VOCAB}")
    finally:
        execute(f"DROP TABLE IF EXISTS temp.{_VOCAB}", ())
    # 2. what the live items make the same tokenizer index, in a scratch database
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        scratch.execute(
            f"CREATE VIRTUAL TABLE expected USING fts5(text, title, tags, content='', "
            f"tokenize='{_TOKENIZE}')"
        )
        for rows in _items(execute):
            scratch.executemany(
                "INSERT INTO expected (rowid, text, title, tags) VALUES (?, ?, ?, ?)", rows
            )
        scratch.execute("CREATE VIRTUAL TABLE vocab USING fts5vocab('expected', 'instance')")
        wanted = _vocab_digests(lambda sql, p: scratch.execute(sql, p).fetchall(), "vocab")
    finally:
        scratch.close()
    # 3. document by document (an item with no indexed word has no rows on either side)
    differs = [seq for seq in set(live) | set(wanted) if live.get(seq) != wanted.get(seq)]
    return min(differs) if differs else None


def _postgres(execute: Execute) -> int | None:
    words = POSTGRES.fts_words  # the very literal the store inserts
    assert words is not None
    first: int | None = None
    # 1. each item's document is there and is the one its text, title and tags make
    for rows in _items(execute):
        found = execute(
            "SELECT min(x.seq) FROM unnest(?::bigint[], ?::text[]) "
            "AS x(seq, doc) LEFT JOIN engine_fts f ON f.seq = x.seq "
            "WHERE f.doc IS NULL OR f.doc <> x.doc::tsvector",
            ([r[0] for r in rows], [words(*r[1:4]) for r in rows]),
        )
        if found and found[0][0] is not None:
            first = int(found[0][0])
            break
    # 2. no document without its item (it would be found by words no item holds)
    orphan = execute(
        "SELECT min(f.seq) FROM engine_fts f "
        "WHERE NOT EXISTS (SELECT 1 FROM engine_items i WHERE i.seq = f.seq)",
        (),
    )
    if orphan and orphan[0][0] is not None:
        seq = int(orphan[0][0])
        first = seq if first is None else min(first, seq)
    return first
