"""Which store ranked a recorded read: SQLite's FTS5 BM25 or PostgreSQL's ``ts_rank``.

A read proof, a bundle's reads section and a view of the memory as of a
point re-derive exact and hybrid reads, and to come out byte for byte they
must rank full text as the store did when the read ran. That is the store's
dialect, except in a ledger ``memseal migrate`` copied from SQLite to
PostgreSQL: there the reads that observed fewer entries than the copy held
ran on SQLite. The copy writes that size into the target's ``meta`` table,
in the transaction that copies the entries, under :data:`SQLITE_RANKED_BELOW`.

The mark is unsigned, like a proof's ``ranked_by`` hint it feeds: it only
picks the ranking a verifier repeats. It cannot make a forged result pass,
since the result is in the signed call; but a wrong one makes true proofs
fail, and views as of a point and replays rank otherwise than the store did.
So a row that cannot be a copied count (not digits, 0, more than the log
holds) is refused, naming it; within those bounds the row must be the one
migrate wrote (docs/auditing.md says how to write it for an older ledger).

A read on SQLite observed at most the entries the copy read, less its own call
entry, which the copy holds too; a read on PostgreSQL observed at least those.
So a read that observed ``size`` entries ran on SQLite exactly when ``size`` is
below the mark.
"""

from __future__ import annotations

from typing import Final

from memseal.ledger.errors import StorageError
from memseal.ledger.store import SqlStore

__all__ = ["SQLITE_RANKED_BELOW", "ranked_at", "ranked_by", "sqlite_ranked_below"]

#: The ``meta`` key of a migrated ledger: the number of entries copied from SQLite.
SQLITE_RANKED_BELOW: Final = "sqlite_ranked_below"


async def sqlite_ranked_below(store: SqlStore) -> int | None:
    """The size below which ``store``'s reads ran on SQLite (None: never migrated).

    Raises StorageError naming the row when it holds anything but an entry count.
    """
    if store.dialect == "sqlite":
        return None  # a ledger is only ever moved from SQLite, never to it
    rows = await store.rows("SELECT value FROM meta WHERE key = ?", (SQLITE_RANKED_BELOW,))
    if not rows:
        return None
    value = rows[0][0]
    # A hand-written row: refuse one that cannot be the count, rather than guess which
    # reads SQLite ranked (a long one before int(), which caps the digits it reads).
    ok = isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20
    size = (await store.head()).size
    if ok and 0 < int(value) <= size:
        return int(value)
    why = f"more than the {size} entries the log holds" if ok and int(value) else "no count"
    raise StorageError(
        f"the store's meta row {SQLITE_RANKED_BELOW!r} holds {value!r:.40}, {why}: write "
        "the number of entries the migration copied, in digits alone"
    )


def ranked_by(dialect: str, below: int | None, size: int) -> str:
    """The store that ranked a read which observed ``size`` entries (see the module docstring).

    ``dialect`` is the ledger's store now, ``below`` its :func:`sqlite_ranked_below`.
    """
    return "sqlite" if below is not None and size < below else dialect


async def ranked_at(store: SqlStore, size: int) -> str:
    """The store that ranked a read of ``store``'s ledger which observed ``size`` entries."""
    return ranked_by(store.dialect, await sqlite_ranked_below(store), size)
