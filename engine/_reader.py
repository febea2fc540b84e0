"""The engine's read path: whole queries on one snapshot each (the store's pool).

A query runs several statements (rank, coverage, the items, their
verdicts); it runs as one function ``fn(execute)`` on a reader thread
inside one read transaction of the store's :meth:`~memseal.ledger.store.SqlStore.snapshots`
pool: one thread crossing, one consistent snapshot, on either store.
"""

from __future__ import annotations

from memseal.ledger.store import Execute, Snapshots

__all__ = ["Execute", "Snapshots"]
