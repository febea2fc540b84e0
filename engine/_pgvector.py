"""Semantic ranking inside PostgreSQL, when the database has the pgvector extension.

Without pgvector, every server process ranks by holding the vectors in its
own memory (:class:`._vectors.Resident`), as on SQLite. With it, the vectors
are also kept as a pgvector column, ``engine_vectors.emb``, and the database
ranks: each process then holds no copy, and a ranking reads no vector over
the wire. The extension is used when an administrator has installed it in
the database (memseal never creates extensions); which schema holds it is
looked up, since the ledger's schema is the only one on the search path.

The ranking is the same exact scan as in memory, not an approximate index:
the inner product of unit vectors (cosine), rounded to four places, ties
to the newer item, so both paths return the same order (the shared
ranking tests run on both). ``vec`` (little-endian float32 bytes) stays the
record; ``emb`` is filled from it: at write time by this process, and at
open, or just before a ranking, for rows written by a process that did
not know of the extension (or copied in by ``memseal migrate``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Final

from memseal.ledger.store import Execute, Snapshots, SqlStore, WriteTxn

from ._vectors import VectorCache, unpack, vector_text

__all__ = ["PgVector", "find_pgvector", "use_pgvector"]

_CHUNK: Final = 256


async def find_pgvector(reader: Snapshots) -> str | None:
    """The quoted schema holding the ``vector`` extension, or None without it."""
    rows = await reader.rows(
        "SELECT quote_ident(n.nspname) FROM pg_extension e "
        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    )
    return str(rows[0][0]) if rows else None


class PgVector:
    """The ``emb`` column of one embedder's rows, and ranking by it."""

    def __init__(self, schema: str, store: SqlStore, reader: Snapshots, embedder_id: str) -> None:
        self.type = f"{schema}.vector"
        self._op = f"OPERATOR({schema}.<#>)"  # negative inner product
        self._store = store
        self._reader = reader
        self._embedder = embedder_id

    async def attach(self) -> None:
        """Add the column if missing, then fill it for every row that lacks it."""
        column = f"ALTER TABLE engine_vectors ADD COLUMN IF NOT EXISTS emb {self.type}"
        await self._store.run(lambda txn: txn.execute(column))
        while True:
            rows = await self._reader.rows(
                "SELECT content FROM engine_vectors WHERE embedder = ? AND emb IS NULL LIMIT ?",
                (self._embedder, _CHUNK),
            )
            if not rows:
                return
            await self.fill([str(r[0]) for r in rows])

    async def fill(self, contents: Sequence[str]) -> None:
        """Set ``emb`` from the stored float32 bytes ``vec`` for ``contents``."""
        for start in range(0, len(contents), _CHUNK):
            part = list(contents[start : start + _CHUNK])
            marks = ",".join("?" * len(part))
            rows = await self._reader.rows(
                "SELECT content, vec FROM engine_vectors "
                f"WHERE embedder = ? AND emb IS NULL AND content IN ({marks})",
                [self._embedder, *part],
            )
            pairs = [(str(c), vector_text(unpack(bytes(blob)))) for c, blob in rows]
            await self._store.run(functools.partial(self._insert_all, pairs))

    def _insert_all(self, pairs: Sequence[tuple[str, str]], txn: WriteTxn) -> None:
        self.insert(txn, pairs)

    def insert(self, txn: WriteTxn, rows: Sequence[tuple[str, str]]) -> None:
        """Set ``emb`` for rows just written in ``txn`` ((content, vector text) pairs)."""
        for content, text in rows:
            txn.execute(
                f"UPDATE engine_vectors SET emb = ?::{self.type} "
                "WHERE embedder = ? AND content = ?",
                (text, self._embedder, content),
            )

    def rank(
        self, execute: Execute, where: str, params: Sequence[Any], target: str, cap: int
    ) -> tuple[list[tuple[int, float]], list[str], list[str]]:
        """(ranking, contents with no vector, contents whose ``emb`` is unfilled).

        One scan of the candidates ranks them and counts those without a vector;
        only when some lack one are their contents looked up (the rare path).
        """
        found = self._scan(execute, where, params, target, cap)
        if not found or not found[0][2]:
            return [(int(seq), float(score)) for seq, score, _ in found], [], []
        gaps = execute(
            "SELECT DISTINCT i.content, v.vec IS NULL FROM engine_items i "
            "LEFT JOIN engine_vectors v ON v.embedder = ? AND v.content = i.content "
            f"WHERE ({where}) AND v.emb IS NULL",
            [self._embedder, *params],
        )
        absent = sorted(str(c) for c, none in gaps if none)
        unfilled = sorted(str(c) for c, none in gaps if not none)
        return [], absent, unfilled

    def rank_filled(
        self, execute: Execute, where: str, params: Sequence[Any], target: str, cap: int
    ) -> list[tuple[int, float]]:
        """(seq, cosine) of the items under ``where`` that have a vector, best first."""
        found = self._scan(execute, where, params, target, cap)
        return [(int(seq), float(score)) for seq, score, _ in found if score is not None]

    def _scan(
        self, execute: Execute, where: str, params: Sequence[Any], target: str, cap: int
    ) -> list[tuple[Any, ...]]:
        # (seq, rounded score or NULL without a vector, how many candidates lack one).
        return execute(
            f"SELECT i.seq, round((-(v.emb {self._op} ?::{self.type}))::numeric, 4) AS s, "
            "count(*) FILTER (WHERE v.emb IS NULL) OVER () "
            "FROM engine_items i LEFT JOIN engine_vectors v "
            "ON v.embedder = ? AND v.content = i.content "
            f"WHERE {where} ORDER BY s DESC NULLS LAST, i.seq DESC LIMIT ?",
            [target, self._embedder, *params, cap],
        )


async def use_pgvector(store: SqlStore, reader: Snapshots, vectors: VectorCache) -> None:
    """Attach the pgvector index to ``vectors`` when the database has the extension."""
    schema = await find_pgvector(reader)
    if schema is not None:
        pg = PgVector(schema, store, reader, vectors.id)
        await pg.attach()
        vectors.pg = pg
