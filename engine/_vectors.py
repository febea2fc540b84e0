"""The vector cache and semantic ranking.

Vectors are made before the writer (in a worker thread: embedding is
CPU-bound and blocking) and cached in ``engine_vectors`` by (embedder id,
content hash). ``rebuild`` keeps the table; the engine records which
embedder filled it, and a different embedder at open means the old
vectors go and every item is embedded again, so one ranking never mixes
vectors of two models.

A vector is stored as little-endian float32 (the embedders hand out
float32-exact values, so nothing is lost). Rows are written only while an
item with that content is live (``INSERT ... WHERE EXISTS``): a vector
computed for an item that a concurrent forget has just removed is dropped
rather than left behind.
"""

from __future__ import annotations

import asyncio
import sys
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from memseal.ledger.errors import StorageError
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.store import WriteTxn

from ._projection import embed_text
from .embedders import Embedder

_np: Any
try:  # numpy is optional: the default embedder brings it, the hashing one does not
    import numpy

    _np = numpy
except ImportError:  # pragma: no cover - exercised only where numpy is absent
    _np = None

__all__ = ["VectorCache", "pack", "unpack"]

_BATCH: Final = 64
_QUERY_CACHE: Final = 256


def pack(vector: Sequence[float]) -> bytes:
    values = array("f", vector)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI machine
        values.byteswap()
    return values.tobytes()


def unpack(blob: bytes) -> array[float]:
    values = array("f")
    values.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover
        values.byteswap()
    return values


_INSERT: Final = (
    "INSERT OR IGNORE INTO engine_vectors (embedder, content, vec) "
    "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM engine_items WHERE content = ?)"
)


def insert_vectors(txn: WriteTxn, embedder_id: str, rows: Sequence[tuple[str, bytes]]) -> None:
    for content, blob in rows:
        txn.execute(_INSERT, (embedder_id, content, blob, content))


class VectorCache:
    """One embedder's vectors: making them, caching them, ranking by them."""

    def __init__(self, store: SqliteLogStore, embedder: Embedder) -> None:
        self._store = store
        self.embedder = embedder
        self.id = embedder.id
        self.dim = embedder.dim
        self._queries: OrderedDict[str, bytes] = OrderedDict()

    async def embed(self, texts: Sequence[str]) -> list[bytes]:
        """Packed vectors for ``texts``, computed in a worker thread."""
        if not texts:
            return []
        vectors = await asyncio.to_thread(self.embedder.embed, list(texts))
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise StorageError(f"embedder {self.id} returned vectors of the wrong count or length")
        return [pack(v) for v in vectors]

    async def cached(self, content: str) -> bool:
        rows = await self._store.rows(
            "SELECT 1 FROM engine_vectors WHERE embedder = ? AND content = ?", (self.id, content)
        )
        return bool(rows)

    async def query_vector(self, text: str) -> bytes:
        blob = self._queries.get(text)
        if blob is None:
            (blob,) = await self.embed([text])
            self._queries[text] = blob
            if len(self._queries) > _QUERY_CACHE:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(text)
        return blob

    async def adopt(self) -> None:
        """Make this embedder the cache's: drop other embedders' vectors, record its id."""
        found = await self._store.rows("SELECT value FROM engine_meta WHERE key = 'embedder'")
        if found and found[0][0] == self.id:
            return
        embedder_id, dim = self.id, str(self.dim)

        def command(txn: WriteTxn) -> None:
            txn.execute("DELETE FROM engine_vectors WHERE embedder != ?", (embedder_id,))
            txn.execute(
                "INSERT OR REPLACE INTO engine_meta (key, value) VALUES "
                "('embedder', ?), ('embedder_dim', ?)",
                (embedder_id, dim),
            )

        await self._store.run(command)

    async def fill(self) -> int:
        """Embed every live content that has no vector yet; returns how many were made."""
        made = 0
        while True:
            rows = await self._store.rows(
                "SELECT i.content, i.title, i.text FROM engine_items i WHERE NOT EXISTS "
                "(SELECT 1 FROM engine_vectors v WHERE v.embedder = ? AND v.content = i.content) "
                f"GROUP BY i.content LIMIT {_BATCH}",
                (self.id,),
            )
            if not rows:
                return made
            await self._embed_and_store([(r[0], embed_text(r[1], r[2])) for r in rows])
            made += len(rows)

    async def _embed_and_store(self, todo: Sequence[tuple[str, str]]) -> dict[str, bytes]:
        blobs = await self.embed([text for _, text in todo])
        pairs = [(content, blob) for (content, _), blob in zip(todo, blobs, strict=True)]
        embedder_id = self.id
        await self._store.run(lambda txn: insert_vectors(txn, embedder_id, pairs))
        return dict(pairs)

    async def rank(
        self, where: str, params: Sequence[Any], query: str, cap: int
    ) -> list[tuple[int, float]]:
        """(seq, cosine) for every item under ``where``, best first, at most ``cap``."""
        target = await self.query_vector(query)
        found = await self._store.rows(
            "SELECT i.seq, i.content, v.vec FROM engine_items i LEFT JOIN engine_vectors v "
            f"ON v.embedder = ? AND v.content = i.content WHERE {where}",
            [self.id, *params],
        )
        width = self.dim * 4
        missing = sorted(
            {content for _, content, blob in found if blob is None or len(blob) != width}
        )
        made: dict[str, bytes] = {}
        if missing:
            # Items written by a process without this embedder: embed them now, once.
            texts = await self._texts(missing)
            made = await self._embed_and_store([(c, texts[c]) for c in missing if c in texts])
        seqs: list[int] = []
        blobs: list[bytes] = []
        for seq, content, blob in found:
            vector = made.get(content) if blob is None or len(blob) != width else blob
            if vector is not None:
                seqs.append(seq)
                blobs.append(vector)
        scores = _dot(blobs, target, self.dim)
        ranked = sorted(zip(seqs, scores, strict=True), key=lambda p: (-p[1], -p[0]))
        return ranked[:cap]

    async def _texts(self, contents: Sequence[str]) -> dict[str, str]:
        texts: dict[str, str] = {}
        for start in range(0, len(contents), 500):
            part = list(contents[start : start + 500])
            for content, title, text in await self._store.rows(
                "SELECT content, title, text FROM engine_items "
                f"WHERE content IN ({','.join('?' * len(part))})",
                part,
            ):
                texts.setdefault(content, embed_text(title, text))
        return texts


def _dot(blobs: Sequence[bytes], target: bytes, dim: int) -> list[float]:
    """Cosine of unit vectors, rounded to four places (so the last bits never reorder)."""
    if not blobs:
        return []
    if _np is not None:
        matrix = _np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)
        query = _np.frombuffer(target, dtype="<f4").astype(_np.float64)
        # einsum, not BLAS: a fixed summation order whatever the thread count.
        values = _np.einsum("ij,j->i", matrix.astype(_np.float64), query)
        return [round(float(v), 4) for v in values]
    q = unpack(target)
    return [round(sum(a * b for a, b in zip(unpack(blob), q, strict=True)), 4) for blob in blobs]
