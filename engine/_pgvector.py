"""Semantic ranking inside PostgreSQL, when the database has the pgvector extension.

Without pgvector, every server process ranks by holding the vectors in its
own memory (:class:`._vectors.Resident`), as on SQLite. With it, the vectors
are also kept as a pgvector column, ``engine_vectors.emb``, and the database
ranks: each process then holds no copy, and a ranking reads no vector over
the wire. The extension is used when an administrator has installed it in
the database (memseal never creates extensions); which schema holds it is
looked up, since the ledger's schema is the only one on the search path.

The exact ranking is the same scan as in memory: the inner product of unit
vectors (cosine), rounded to four places, ties to the newer item, so both
paths return the same order (the shared ranking tests run on both). Past
:data:`._ann.ANN_MIN` vectors an HNSW index (pgvector's ``hnsw``, an
expression index on ``emb`` cast to the embedder's dimension, partial on
the embedder) proposes candidates, with the same contract as on SQLite
(``_ann``): each proposal is checked against the query's own condition and
scored exactly, the search widens while too few survive, and the scan
answers when it would have to widen past ``hnsw.ef_search``'s ceiling. The
index is made by the first ranking that finds enough vectors; a database
whose pgvector predates HNSW (0.5.0) keeps the scan. ``vec`` (little-endian float32 bytes) stays the
record; ``emb`` is filled from it: at write time by this process, and at
open, or just before a ranking, for rows written by a process that did
not know of the extension (or copied in by ``memseal migrate``). A ranking
that still meets such rows after filling once (stored that instant by
another process) scores them in the process from the same snapshot and
merges them in (``VectorCache._rank_in_database``): none is left out.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Sequence
from typing import Any, Final

from memseal.ledger.store import Execute, Snapshots, SqlStore, WriteTxn

from ._vectors import VectorCache, unpack, vector_text

__all__ = ["PgVector", "find_pgvector", "use_pgvector"]

_CHUNK: Final = 256
#: pgvector's largest ``hnsw.ef_search``: past it the scan answers.
_EF_CEILING: Final = 1_000


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (an embedder id: ours, but quoted all the same)."""
    return "'" + text.replace("'", "''") + "'"


async def find_pgvector(reader: Snapshots) -> str | None:
    """The quoted schema holding the ``vector`` extension, or None without it."""
    rows = await reader.rows(
        "SELECT quote_ident(n.nspname) FROM pg_extension e "
        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    )
    return str(rows[0][0]) if rows else None


class PgVector:
    """The ``emb`` column of one embedder's rows, and ranking by it."""

    def __init__(
        self,
        schema: str,
        store: SqlStore,
        reader: Snapshots,
        embedder_id: str,
        dim: int = 0,
        minimum: int | None = None,
    ) -> None:
        self.type = f"{schema}.vector"
        self._schema = schema
        self._op = f"OPERATOR({schema}.<#>)"  # negative inner product
        self._store = store
        self._reader = reader
        self._embedder = embedder_id
        self._dim = dim
        #: Vectors past which an HNSW index proposes candidates (None: always the scan).
        self.minimum = minimum
        #: Whether the HNSW index exists (made by :meth:`ensure_hnsw`).
        self.hnsw = False
        #: Every item up to this seq has its ``emb`` (so the HNSW index holds it), as of
        #: the projections' generation :attr:`generation`: a rebuild (here or in another
        #: process) makes the items anew, so the mark is set aside with the generation.
        self.high = -1
        self.generation: int | None = None
        # Rankings run on reader threads, each on a snapshot of its own: the mark is read
        # and raised under this lock, and only by a snapshot of its generation or a newer.
        self._mark_lock = threading.Lock()

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

    def gaps(
        self, execute: Execute, where: str, params: Sequence[Any]
    ) -> list[tuple[int, str, bytes | None, str | None, str]]:
        """(seq, content, stored vector or None, title, text) of every item under ``where``
        whose ``emb`` is unfilled: what :meth:`rank_filled` leaves out (the rare path)."""
        rows = execute(
            "SELECT i.seq, i.content, v.vec, i.title, i.text FROM engine_items i "
            "LEFT JOIN engine_vectors v ON v.embedder = ? AND v.content = i.content "
            f"WHERE ({where}) AND v.emb IS NULL",
            [self._embedder, *params],
        )
        return [
            (int(seq), str(c), None if vec is None else bytes(vec), title, str(text))
            for seq, c, vec, title, text in rows
        ]

    async def ensure_hnsw(self) -> bool:
        """Make the HNSW index once enough vectors are filled; whether it is there."""
        if self.hnsw or self.minimum is None or not self._dim:
            return self.hnsw
        rows = await self._reader.rows(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        )
        if not rows or _version(str(rows[0][0])) < (0, 5, 0):
            self.minimum = None  # no HNSW in this pgvector: the scan, for good
            return False
        filled = await self._reader.rows(
            "SELECT count(*) FROM engine_vectors WHERE embedder = ? AND emb IS NOT NULL",
            (self._embedder,),
        )
        if int(filled[0][0]) < self.minimum:
            return False
        statement = (
            f"CREATE INDEX IF NOT EXISTS {self._index_name()} ON engine_vectors USING hnsw "
            f"(({self._cast('emb')}) {self._schema}.vector_ip_ops) "
            f"WHERE embedder = {_literal(self._embedder)}"
        )
        await self._store.run(lambda txn: txn.execute(statement))
        self.hnsw = True
        return True

    def _index_name(self) -> str:
        # One index per embedder (a new embedder's vectors replace the old ones').
        return (
            "engine_vectors_hnsw_"
            + hashlib.blake2b(self._embedder.encode(), digest_size=6).hexdigest()
        )

    def _cast(self, column: str) -> str:
        return f"{column}::{self.type}({self._dim})"

    def _raise_mark(self, generation: int, high: int) -> None:
        # A snapshot of an older generation (read before a rebuild committed) says
        # nothing of the items the rebuild made: it leaves the mark alone.
        with self._mark_lock:
            if self.generation is None or generation > self.generation:
                self.generation, self.high = generation, high
            elif generation == self.generation:
                self.high = max(self.high, high)

    def propose_rank(
        self,
        execute: Execute,
        where: str,
        params: Sequence[Any],
        target: str,
        cap: int,
        want: int,
    ) -> list[tuple[int, float]] | None:
        """The ranking through the HNSW index, or None for the scan (see the module doc)."""
        # An item whose ``emb`` is unfilled is not in the index: only the scan (which fills
        # it) would see it. Items are checked once, by seq, as they come.
        seen = execute("SELECT value FROM engine_meta WHERE key = 'generation'", ())
        generation = int(seen[0][0]) if seen else 0
        with self._mark_lock:
            high = self.high if generation == self.generation else -1
        since = execute(
            "SELECT max(i.seq), count(*) FILTER (WHERE v.emb IS NULL) FROM engine_items i "
            "LEFT JOIN engine_vectors v ON v.embedder = ? AND v.content = i.content "
            "WHERE i.seq > ?",
            [self._embedder, high],
        )
        if since and since[0][1]:
            return None
        if since and since[0][0] is not None:
            self._raise_mark(generation, int(since[0][0]))
        count = max(want * 4, 100)
        while count <= _EF_CEILING:
            # ef_search bounds what one index scan can return: at least the count asked.
            execute(f"SET LOCAL hnsw.ef_search = {int(count)}", ())
            found = execute(
                "WITH near AS (SELECT content FROM engine_vectors "
                f"WHERE embedder = {_literal(self._embedder)} "
                f"ORDER BY {self._cast('emb')} {self._op} ?::{self.type}({self._dim}) LIMIT ?) "
                f"SELECT i.seq, round((-(v.emb {self._op} ?::{self.type}))::numeric, 4) AS s, "
                "(SELECT count(*) FROM near) FROM near "
                "JOIN engine_items i ON i.content = near.content "
                "JOIN engine_vectors v ON v.embedder = ? AND v.content = i.content "
                f"WHERE {where} ORDER BY s DESC, i.seq DESC LIMIT ?",
                [target, count, target, self._embedder, *params, cap],
            )
            near = int(found[0][2]) if found else 0
            if len(found) >= min(want, cap) or (found and near < count):
                return [(int(seq), float(score)) for seq, score, _ in found]
            if not found:
                total = execute(
                    "SELECT count(*) < ? FROM engine_vectors WHERE embedder = ?",
                    [count, self._embedder],
                )
                if total[0][0]:
                    return []  # every vector was proposed and none is in scope
            count *= 4
        return None

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


async def use_pgvector(
    store: SqlStore, reader: Snapshots, vectors: VectorCache, minimum: int | None = None
) -> None:
    """Attach the pgvector index to ``vectors`` when the database has the extension;
    past ``minimum`` vectors an HNSW index proposes candidates (None: the scan)."""
    schema = await find_pgvector(reader)
    if schema is not None:
        pg = PgVector(schema, store, reader, vectors.id, vectors.dim, minimum)
        await pg.attach()
        vectors.pg = pg
