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

Ranking reads only ``(seq, content)`` of the candidates from SQLite; the
vectors themselves are held in memory (:class:`Resident`), loaded from the
table the first time a content is ranked and evicted when this process
forgets it. (Reading 1 KiB blobs row by row through the table's primary
key cost ten times the arithmetic.)
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from memseal.ledger.errors import StorageError
from memseal.ledger.store import Execute, Snapshots, SqlStore, WriteTxn

from ._ann import AnnIndex, ann_available, in_scope
from ._batching import Batcher, default_lanes
from ._projection import embed_text
from .embedders import Embedder

if TYPE_CHECKING:  # the pgvector path imports this module; Engine attaches it
    from ._pgvector import PgVector

#: Called as the HNSW index is built with (items in it, items in all).
Progress = Callable[[int, int], None]

_np: Any
try:  # numpy is optional: the default embedder brings it, the hashing one does not
    import numpy

    _np = numpy
except ImportError:  # pragma: no cover - exercised only where numpy is absent
    _np = None

__all__ = ["Resident", "VectorCache", "insert_vectors", "pack", "unpack"]

#: Contents a fill embeds per model call (more texts share a call's equal-length runs).
_FILL_BATCH: Final = 512
_QUERY_CACHE: Final = 256
_CHUNK: Final = 500
#: Seconds between two counts of the items while the HNSW index is not built.
_RECOUNT: Final = 30.0
#: Items added to the HNSW index per read (a build shows progress between them).
_BUILD_CHUNK: Final = 20_000


def pack(vector: Sequence[float]) -> bytes:
    """``vector`` as little-endian float32 bytes, the form ``engine_vectors`` keeps."""
    values = array("f", vector)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI machine
        values.byteswap()
    return values.tobytes()


def unpack(blob: bytes) -> array[float]:
    """The float32 values of a packed vector (see :func:`pack`)."""
    values = array("f")
    values.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover
        values.byteswap()
    return values


_INSERT: Final = (
    "INSERT INTO engine_vectors (embedder, content, vec) "
    "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM engine_items WHERE content = ?) "
    "ON CONFLICT DO NOTHING"
)


def insert_vectors(
    txn: WriteTxn,
    embedder_id: str,
    rows: Sequence[tuple[str, bytes]],
    pg: PgVector | None = None,
) -> None:
    """Cache ``(content, vector)`` rows for ``embedder_id`` in ``txn``, each only
    while a live item has that content (and in pgvector's table, if attached)."""
    for content, blob in rows:
        txn.execute(_INSERT, (embedder_id, content, blob, content))
    if pg is not None:
        pg.insert(txn, [(content, vector_text(unpack(blob))) for content, blob in rows])


def vector_text(values: Sequence[float]) -> str:
    """pgvector's text form of float32 values; ``repr`` round-trips each exactly."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


class Resident:
    """This process's copy of one embedder's vectors (thread-safe).

    Vectors are held once per content hash; items (by seq) point at them, so
    a ranking asks SQLite for candidate seqs only. With numpy the vectors are
    rows of one float32 matrix (freed rows are reused); without it, one
    ``array('f')`` each.
    """

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._lock = threading.Lock()
        self._by_seq: dict[int, int] = {}
        self._by_content: dict[str, int] = {}
        self._free: list[int] = []
        self._rows: list[array[float]] = []
        self._matrix: Any = None if _np is None else _np.zeros((64, dim), dtype="<f4")
        self._used = 0
        #: The HNSW index over these vectors, once the engine made one (see ``_ann``).
        self.ann: AnnIndex | None = None

    def unknown(self, seqs: Iterable[int]) -> list[int]:
        """The seqs this copy has no vector for."""
        with self._lock:
            return [seq for seq in seqs if seq not in self._by_seq]

    def put(self, items: Iterable[tuple[int, str, bytes]]) -> None:
        """Hold the vector ``blob`` of content hash ``content`` for item ``seq``."""
        width = self._dim * 4
        with self._lock:
            for seq, content, blob in items:
                if len(blob) != width:
                    continue
                row = self._by_content.get(content)
                if row is None:
                    row = self._row_for(blob)
                    self._by_content[content] = row
                self._by_seq[seq] = row

    def _row_for(self, blob: bytes) -> int:
        if self._free:
            row = self._free.pop()
        else:
            row = self._used
            self._used += 1
        if _np is None:
            if row == len(self._rows):
                self._rows.append(unpack(blob))
            else:
                self._rows[row] = unpack(blob)
        else:
            if row >= len(self._matrix):
                grown = _np.zeros((len(self._matrix) * 2, self._dim), dtype="<f4")
                grown[: len(self._matrix)] = self._matrix
                self._matrix = grown
            self._matrix[row] = _np.frombuffer(blob, dtype="<f4")
        return row

    def matrix(self, seqs: Sequence[int]) -> Any:
        """A copy of the vectors of items ``seqs`` (all resident), one row each (numpy)."""
        with self._lock:
            return self._matrix[[self._by_seq[seq] for seq in seqs]].copy()

    def drop(self, seqs: Iterable[int], contents: Iterable[str]) -> None:
        """Forget items ``seqs`` and the vectors of ``contents`` (no live item holds them)."""
        seqs = list(seqs)
        if self.ann is not None:
            self.ann.remove(seqs)
        with self._lock:
            for seq in seqs:
                self._by_seq.pop(seq, None)
            for content in contents:
                row = self._by_content.pop(content, None)
                if row is not None:
                    self._free.append(row)
                    if _np is not None:
                        self._matrix[row] = 0  # no copy of a forgotten text's vector lingers

    def rank(self, seqs: Sequence[int], target: bytes, cap: int) -> list[tuple[int, float]]:
        """(seq, cosine with ``target``) best first, ties to the newer seq, at most ``cap``;
        items with no vector here are left out. Scores are rounded to four places, so
        that last-bit differences between machines never reorder."""
        with self._lock:
            rows = [self._by_seq.get(seq, -1) for seq in seqs]
            if _np is not None:
                return self._rank_numpy(seqs, rows, target, cap)
            q = unpack(target)
            scored = [
                (seq, round(sum(a * b for a, b in zip(self._rows[r], q, strict=True)), 4))
                for seq, r in zip(seqs, rows, strict=True)
                if r >= 0
            ]
        scored.sort(key=lambda p: (-p[1], -p[0]))
        return scored[:cap]

    def _rank_numpy(
        self, seqs: Sequence[int], rows: Sequence[int], target: bytes, cap: int
    ) -> list[tuple[int, float]]:
        np = _np
        where = np.asarray(rows, dtype=np.int64)
        keep = where >= 0
        where, ids = where[keep], np.asarray(seqs, dtype=np.int64)[keep]
        if not len(where):
            return []
        query = np.frombuffer(target, dtype="<f4")
        # einsum, not BLAS: one fixed summation order whatever the thread count, so the
        # same inputs give the same bits run after run.
        if len(where) * 4 > self._used:
            # Most rows are wanted: one pass over the whole matrix, then pick.
            values = np.einsum("ij,j->i", self._matrix[: self._used], query)[where]
        else:
            values = np.einsum("ij,j->i", self._matrix[where], query)
        values = np.round(values.astype(np.float64), 4)
        order = np.lexsort((-ids, -values))[:cap]  # by score, then newest first
        return list(zip(ids[order].tolist(), values[order].tolist(), strict=True))


class VectorCache:
    """One embedder's vectors: making them, caching them, ranking by them."""

    def __init__(self, store: SqlStore, reader: Snapshots, embedder: Embedder) -> None:
        self._store = store
        self._reader = reader
        self.embedder = embedder
        self.id = embedder.id
        self.dim = embedder.dim
        self.resident = Resident(embedder.dim)
        self._batcher = Batcher(lambda texts: list(embedder.embed(texts)))
        self._queries: OrderedDict[str, bytes] = OrderedDict()
        #: Ranking in the database (PostgreSQL with pgvector), set by the engine at start.
        self.pg: PgVector | None = None
        #: The HNSW index (SQLite), set by :meth:`use_ann` when the engine asks for one.
        self.ann: AnnIndex | None = None
        self._counted = -_RECOUNT

    def use_ann(self, minimum: int) -> None:
        """Rank through an HNSW index once ``minimum`` vectors are live (see ``_ann``)."""
        if ann_available() and _np is not None:
            self.ann = self.resident.ann = AnnIndex(self.dim, minimum=minimum)

    def reset(self) -> None:
        """Start the in-memory state afresh (after a rebuild). The resident vectors are keyed
        by seq and the HNSW index holds seqs up to a high-water mark; a rebuilt projection
        may hold other items under those seqs, or items below that mark it never saw."""
        minimum = None if self.ann is None else self.ann.minimum
        self.resident = Resident(self.dim)
        self.ann = None
        self._counted = -_RECOUNT
        if minimum is not None:
            self.use_ann(minimum)

    async def build_ann(self, progress: Progress | None = None) -> int:
        """Bring the HNSW index up to every live item; returns how many it holds."""
        if self.ann is None:
            return 0
        total = (await self._reader.rows("SELECT count(*) FROM engine_items"))[0][0]
        if int(total) < self.ann.minimum:
            return 0  # built when a ranking first finds enough items
        while (await self._catch_up(_BUILD_CHUNK))[0]:
            if progress is not None:
                progress(len(self.ann), int(total))
        if progress is not None:
            progress(len(self.ann), int(total))
        return len(self.ann)

    async def _catch_up(self, limit: int | None = None) -> tuple[bool, bool]:
        """Add a batch of new items to the index, embedding any without a vector:
        (whether any were added, whether an item still has no vector)."""
        ann = self.ann
        assert ann is not None
        found, absent = await self._reader.run(lambda ex: ann.catch_up(ex, self.id, limit))
        if absent:
            texts = await self._reader.run(functools.partial(_texts, contents=sorted(set(absent))))
            await self.embed_and_store(list(texts.items()))
            found, absent = await self._reader.run(lambda ex: ann.catch_up(ex, self.id, limit))
        if found:
            self.resident.put(found)
            seqs = [seq for seq, _, _ in found]
            await asyncio.to_thread(ann.add, seqs, self.resident.matrix(seqs), seqs[-1])
        return bool(found), bool(absent)

    async def embed(self, texts: Sequence[str]) -> list[bytes]:
        """Packed vectors for ``texts``, computed in a worker thread, in one model call
        with the texts of other stores in flight (``_batching``)."""
        if not texts:
            return []
        vectors = await self._batcher.embed(texts)
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise StorageError(f"embedder {self.id} returned vectors of the wrong count or length")
        return [pack(v) for v in vectors]

    async def uncached(self, contents: Sequence[str]) -> set[str]:
        """Which of ``contents`` have no vector from this embedder yet (one query)."""
        wanted = sorted(set(contents))
        embedder_id = self.id

        def work(execute: Execute) -> set[str]:
            have: set[str] = set()
            for start in range(0, len(wanted), _CHUNK):
                part = wanted[start : start + _CHUNK]
                have.update(
                    row[0]
                    for row in execute(
                        "SELECT content FROM engine_vectors WHERE embedder = ? "
                        f"AND content IN ({','.join('?' * len(part))})",
                        [embedder_id, *part],
                    )
                )
            return set(wanted) - have

        return await self._reader.run(work)

    async def query_vector(self, text: str) -> bytes:
        """The packed vector of a question, from a small LRU cache of recent ones."""
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
        found = await self._reader.rows("SELECT value FROM engine_meta WHERE key = 'embedder'")
        if found and found[0][0] == self.id:
            return
        embedder_id, dim = self.id, str(self.dim)

        def command(txn: WriteTxn) -> None:
            txn.execute("DELETE FROM engine_vectors WHERE embedder != ?", (embedder_id,))
            txn.execute(
                "INSERT INTO engine_meta (key, value) VALUES ('embedder', ?), ('embedder_dim', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (embedder_id, dim),
            )

        await self._store.run(command)

    async def fill(self) -> int:
        """Embed every live content that has no vector yet; returns how many were made.

        Reads a few batches at a time and embeds them at once, one model call per core,
        so a large fill uses the machine (stores in flight join the same calls)."""
        made = 0
        lanes = default_lanes()
        while True:
            rows = await self._reader.rows(
                # One row per content; every item of a content hash has the same title and
                # text (the hash is of them), so min() picks that text in either dialect.
                "SELECT i.content, min(i.title), min(i.text) FROM engine_items i WHERE NOT EXISTS "
                "(SELECT 1 FROM engine_vectors v WHERE v.embedder = ? AND v.content = i.content) "
                f"GROUP BY i.content LIMIT {_FILL_BATCH * lanes}",
                (self.id,),
            )
            if not rows:
                return made
            todo = [(r[0], embed_text(r[1], r[2])) for r in rows]
            parts = [todo[i : i + _FILL_BATCH] for i in range(0, len(todo), _FILL_BATCH)]
            blobs = await asyncio.gather(*(self.embed([t for _, t in p]) for p in parts))
            pairs = [
                (content, blob)
                for part, made_blobs in zip(parts, blobs, strict=True)
                for (content, _), blob in zip(part, made_blobs, strict=True)
            ]
            await self._store.run(
                functools.partial(_insert_pairs, embedder_id=self.id, pairs=pairs, pg=self.pg)
            )
            made += len(rows)

    async def embed_and_store(self, todo: Sequence[tuple[str, str]]) -> None:
        """Embed the ``(content, text)`` pairs and cache their vectors."""
        blobs = await self.embed([text for _, text in todo])
        pairs = [(content, blob) for (content, _), blob in zip(todo, blobs, strict=True)]
        embedder_id, pg = self.id, self.pg
        await self._store.run(lambda txn: insert_vectors(txn, embedder_id, pairs, pg))

    async def rank(
        self, where: str, params: Sequence[Any], query: str, cap: int, want: int | None = None
    ) -> list[tuple[int, float]]:
        """(seq, cosine) for every item under ``where``, best first, at most ``cap``.

        ``want`` is how many the caller will read (a page's end): through the HNSW
        index, at least that many are found (or all there are), not always ``cap``.

        Candidates and any vectors not yet in memory are read in one read
        transaction and scored on the reader thread. Items written by a
        process without this embedder have no vector: they are embedded now,
        once, and the ranking runs again.
        """
        target = await self.query_vector(query)
        if self.pg is not None:
            pg = self.pg
            if await pg.ensure_hnsw():
                text = vector_text(unpack(target))
                wanted = want or cap
                near = await self._reader.run(
                    lambda execute: pg.propose_rank(execute, where, params, text, cap, wanted)
                )
                if near is not None:
                    return near
            return await self._rank_in_database(pg, where, params, target, cap)
        if self.ann is not None:
            approx = await self._rank_approx(self.ann, where, params, target, cap, want or cap)
            if approx is not None:
                return approx
        embedder_id, resident, width = self.id, self.resident, self.dim * 4

        def work(
            execute: Execute, embed_missing: bool
        ) -> tuple[list[tuple[int, float]], list[str]]:
            """(ranking, []) or, when vectors are missing and may be made, ([], contents)."""
            seqs = [
                row[0] for row in execute(f"SELECT i.seq FROM engine_items i WHERE {where}", params)
            ]
            unknown = resident.unknown(seqs)
            absent: set[str] = set()
            for start in range(0, len(unknown), _CHUNK):
                part = unknown[start : start + _CHUNK]
                found = execute(
                    "SELECT i.seq, i.content, v.vec FROM engine_items i LEFT JOIN engine_vectors v "
                    f"ON v.embedder = ? AND v.content = i.content "
                    f"WHERE i.seq IN ({','.join('?' * len(part))})",
                    [embedder_id, *part],
                )
                usable = [(seq, c, blob) for seq, c, blob in found if blob and len(blob) == width]
                resident.put(usable)
                absent.update(c for _, c, blob in found if not blob or len(blob) != width)
            if embed_missing and absent:
                return [], sorted(absent)
            return resident.rank(seqs, target, cap), []

        ranked, absent = await self._reader.run(lambda execute: work(execute, True))
        if absent:
            texts = await self._reader.run(lambda execute: _texts(execute, absent))
            await self.embed_and_store(list(texts.items()))
            # Anything still without a vector now (stored this instant by a process with no
            # embedder) is left out of this one ranking rather than embedded in a loop.
            ranked, _ = await self._reader.run(lambda execute: work(execute, False))
        return ranked

    async def _rank_approx(
        self,
        ann: AnnIndex,
        where: str,
        params: Sequence[Any],
        target: bytes,
        cap: int,
        want: int,
    ) -> list[tuple[int, float]] | None:
        """The ranking through the HNSW index, or None for the exact scan (see ``_ann``)."""
        if ann.high < 0:
            # Not built: only worth it past the minimum, and counting costs, so look again
            # at most once every ``_RECOUNT`` seconds.
            if time.monotonic() < self._counted + _RECOUNT:
                return None
            self._counted = time.monotonic()
            count = (await self._reader.rows("SELECT count(*) FROM engine_items"))[0][0]
            if int(count) < ann.minimum:
                return None
        while True:
            added, blocked = await self._catch_up(_BUILD_CHUNK)
            if blocked:  # an item this index cannot hold yet: only the scan sees everything
                return None
            if not added:
                break
        if not ann.active:
            return None
        query = _np.frombuffer(target, dtype="<f4")
        resident, wanted = self.resident, min(want, cap)

        def work(execute: Execute) -> list[tuple[int, float]] | None:
            if execute("SELECT 1 FROM engine_items WHERE seq > ? LIMIT 1", (ann.high,)):
                return None  # stored since the catch-up: the index does not hold it yet
            for count in ann.proposals(wanted):
                proposed = ann.propose(query, count)
                passed = in_scope(execute, proposed, where, params)
                if len(passed) >= wanted or len(proposed) >= len(ann):
                    return resident.rank(sorted(passed), target, cap)
            return None

        return await self._reader.run(work)

    async def _rank_in_database(
        self, pg: PgVector, where: str, params: Sequence[Any], target: bytes, cap: int
    ) -> list[tuple[int, float]]:
        text = vector_text(unpack(target))
        for attempt in range(2):
            ranked, absent, unfilled = await self._reader.run(
                lambda execute: pg.rank(execute, where, params, text, cap)
            )
            if not absent and not unfilled:
                return ranked
            if attempt:
                break
            # Rows written by a process without pgvector or without this embedder.
            if absent:
                texts = await self._reader.run(functools.partial(_texts, contents=absent))
                await self.embed_and_store(list(texts.items()))
            if unfilled:
                await pg.fill(unfilled)
        # Still gaps (written this instant elsewhere): rank what has a vector now.
        return await self._reader.run(
            lambda execute: pg.rank_filled(execute, where, params, text, cap)
        )


def _insert_pairs(
    txn: WriteTxn, *, embedder_id: str, pairs: Sequence[tuple[str, bytes]], pg: PgVector | None
) -> None:
    insert_vectors(txn, embedder_id, pairs, pg)


def _texts(execute: Execute, contents: Sequence[str]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for start in range(0, len(contents), _CHUNK):
        part = list(contents[start : start + _CHUNK])
        for content, title, text in execute(
            "SELECT content, title, text FROM engine_items "
            f"WHERE content IN ({','.join('?' * len(part))})",
            part,
        ):
            texts.setdefault(content, embed_text(title, text))
    return texts
