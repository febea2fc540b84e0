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

What this process holds in memory (the resident vectors, keyed by item seq,
and the HNSW index over them) belongs to one *generation* of the
projections: ``engine_meta.generation``, which every rebuild, in this
process or another, raises in its own transaction. Every snapshot a ranking
reads names its generation; one newer than what is held means the
projections were rebuilt (an item may hold another seq's content now, or
sit below the index's high-water mark): the held state is set aside, a
fresh one is made, and the ranking starts again on it. A ranking never
mixes the state of one generation with a snapshot of another.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from memseal.ledger.errors import StorageError
from memseal.ledger.store import Execute, Snapshots, SqlStore, WriteTxn

from ._ann import AnnIndex, ann_available, in_scope
from ._batching import Batcher, default_lanes
from ._projection import embed_text
from ._resident import Resident, Tombstones, pack, unpack
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
#: Times one ranking starts again on a fresh state before it gives up (see the module doc).
_RENEWALS: Final = 3
#: The log's size and the projections' generation, as one snapshot sees them.
_VIEW: Final = (
    "SELECT (SELECT coalesce(max(seq), -1) + 1 FROM entries), "
    "(SELECT value FROM engine_meta WHERE key = 'generation')"
)


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


class _Rebuilt(StorageError):
    """A snapshot of another generation than the state in hand (never leaves this module)."""

    def __init__(self, generation: int) -> None:
        super().__init__(f"the projections are at generation {generation}")
        self.generation = generation


class _State:
    """What this process holds for one generation of the projections."""

    def __init__(
        self, generation: int, dim: int, tombstones: Tombstones, minimum: int | None
    ) -> None:
        self.generation = generation
        self.resident = Resident(dim, tombstones)
        self.ann: AnnIndex | None = None
        if minimum is not None and ann_available() and _np is not None:
            self.ann = AnnIndex(dim, minimum=minimum)
        #: Held by whoever adds to the index (a build or a catch-up), one at a time.
        self.catching = asyncio.Lock()
        #: When the items were last counted while the index was not built.
        self.counted = -_RECOUNT

    def drop(self, seqs: Sequence[int], contents: Sequence[str]) -> None:
        if self.ann is not None:
            self.ann.remove(seqs)
        self.resident.drop(seqs, contents)

    def check(self, execute: Execute, tombstones: Tombstones, sizes: list[int] | None) -> int:
        """The log size this snapshot sees (appended to ``sizes``, if given); raises
        :class:`_Rebuilt` for another generation."""
        seen, generation = execute(_VIEW, ())[0]
        if int(generation or 0) != self.generation:
            raise _Rebuilt(int(generation or 0))
        tombstones.saw(int(seen))
        if sizes is not None:
            sizes.append(int(seen))
        return int(seen)


class VectorCache:
    """One embedder's vectors: making them, caching them, ranking by them."""

    def __init__(self, store: SqlStore, reader: Snapshots, embedder: Embedder) -> None:
        self._store = store
        self._reader = reader
        self.embedder = embedder
        self.id = embedder.id
        self.dim = embedder.dim
        self._batcher = Batcher(lambda texts: list(embedder.embed(texts)))
        self._queries: OrderedDict[str, bytes] = OrderedDict()
        #: Ranking in the database (PostgreSQL with pgvector), set by the engine at start.
        self.pg: PgVector | None = None
        self._tombstones = Tombstones()
        #: Live vectors past which rankings go through an HNSW index (None: no index).
        self._minimum: int | None = None
        # Generation -1: the first snapshot read makes the state of the one it sees.
        self._state = _State(-1, self.dim, self._tombstones, None)
        #: Every state some ranking may still hold: a forget drops its items from each.
        self._states: weakref.WeakSet[_State] = weakref.WeakSet([self._state])
        # A forget's drop walks the states on the writer's thread while a ranking may
        # replace the state in hand on the event loop's.
        self._states_lock = threading.Lock()

    @property
    def resident(self) -> Resident:
        """The resident vectors of the state in hand."""
        return self._state.resident

    def held_vectors(self, contents: Sequence[str]) -> dict[str, bytes]:
        """The stored vectors of ``contents`` that rankings loaded into the state in hand."""
        return self._state.resident.vectors(contents)

    @property
    def ann(self) -> AnnIndex | None:
        """The HNSW index of the state in hand (SQLite), once :meth:`use_ann` asked for one."""
        return self._state.ann

    @property
    def generation(self) -> int:
        """The generation of the projections the state in hand was made for (-1: none yet)."""
        return self._state.generation

    def use_ann(self, minimum: int) -> None:
        """Rank through an HNSW index once ``minimum`` vectors are live (see ``_ann``)."""
        self._minimum = minimum
        self._replace(self._state, self._state.generation)

    def _replace(self, old: _State, generation: int) -> None:
        # Only the state in hand is replaced, and only by a newer one (or by itself, afresh):
        # a ranking that read an older snapshot starts again rather than going back.
        if self._state is old and generation >= old.generation:
            fresh = _State(generation, self.dim, self._tombstones, self._minimum)
            with self._states_lock:
                self._states.add(fresh)
            self._state = fresh

    def mark(self, seqs: Sequence[int], stamp: int) -> None:
        """Items ``seqs`` are being forgotten by the entry at ``stamp`` (not yet committed):
        no read of an older snapshot loads them again (see ``_resident``)."""
        self._tombstones.mark(seqs, stamp)

    def drop(self, seqs: Sequence[int], contents: Sequence[str], stamp: int) -> None:
        """Items ``seqs`` (and the vectors of ``contents``) are forgotten by the entry at
        ``stamp``: marked first, so no read of an older snapshot brings them back, then
        dropped from every state a ranking may still hold (see ``_resident``)."""
        self._tombstones.mark(seqs, stamp)
        with self._states_lock:
            states = list(self._states)
        for state in states:
            state.drop(seqs, contents)

    async def refresh(self) -> None:
        """Take up the projections' current generation (after a rebuild, here or elsewhere)."""
        state = self._state
        rows = await self._reader.rows("SELECT value FROM engine_meta WHERE key = 'generation'")
        generation = int(rows[0][0]) if rows else 0
        if generation != state.generation:
            self._replace(state, generation)

    async def build_ann(self, progress: Progress | None = None) -> int:
        """Bring the HNSW index up to every live item; returns how many it holds.

        ``progress(items in the index, items in all)`` is called after each chunk."""
        for _ in range(_RENEWALS):
            state = self._state
            try:
                with self._tombstones.reading():
                    return await self._build(state, progress)
            except _Rebuilt as rebuilt:
                self._replace(state, rebuilt.generation)
        raise StorageError("the projections were rebuilt again and again while the index was")

    async def _build(self, state: _State, progress: Progress | None) -> int:
        ann = state.ann
        if ann is None:
            return 0
        total = int((await self._reader.rows("SELECT count(*) FROM engine_items"))[0][0])
        if total < ann.minimum:
            return 0  # built when a ranking first finds enough items
        async with state.catching:
            while (await self._catch_up(state, ann, _BUILD_CHUNK))[0]:
                if progress is not None:
                    progress(len(ann), total)
        if progress is not None:
            progress(len(ann), total)
        return len(ann)

    async def _catch_up(self, state: _State, ann: AnnIndex, limit: int) -> tuple[bool, bool]:
        """Add a batch of new items to the index, embedding any without a vector:
        (whether any were added, whether an item is still left out: one with no vector,
        or one this process forgot after the snapshot was taken)."""
        tombstones = self._tombstones

        def read(execute: Execute) -> tuple[int, list[tuple[int, str, bytes]], list[str]]:
            seen = state.check(execute, tombstones, None)
            return (seen, *ann.catch_up(execute, self.id, limit))

        seen, found, absent = await self._reader.run(read)
        if absent:
            texts = await self._reader.run(functools.partial(_texts, contents=sorted(set(absent))))
            await self.embed_and_store(list(texts.items()))
            seen, found, absent = await self._reader.run(read)
        refused = state.resident.put(found, seen)
        if refused:
            # Stop before it: the next catch-up's snapshot holds its forget (or its
            # forget was rolled back, and the item is taken in then).
            found = [row for row in found if row[0] < refused[0]]
        added = False
        if found:
            seqs = [seq for seq, _, _ in found]
            matrix = _np.frombuffer(b"".join(blob for _, _, blob in found), dtype="<f4")
            refuse = functools.partial(tombstones.refused, seen=seen)
            added = True
            stopped = await asyncio.to_thread(
                ann.add, seqs, matrix.reshape(len(seqs), self.dim), seqs[-1], refuse
            )
            refused = refused or stopped
        return added, bool(absent) or bool(refused)

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
                functools.partial(insert_vectors, embedder_id=self.id, rows=pairs, pg=self.pg)
            )
            made += len(rows)

    async def embed_and_store(self, todo: Sequence[tuple[str, str]]) -> None:
        """Embed the ``(content, text)`` pairs and cache their vectors."""
        blobs = await self.embed([text for _, text in todo])
        pairs = [(content, blob) for (content, _), blob in zip(todo, blobs, strict=True)]
        embedder_id, pg = self.id, self.pg
        await self._store.run(lambda txn: insert_vectors(txn, embedder_id, pairs, pg))

    async def rank(
        self,
        where: str,
        params: Sequence[Any],
        query: str,
        cap: int,
        want: int | None = None,
        sizes: list[int] | None = None,
    ) -> list[tuple[int, float]]:
        """(seq, cosine) for every item under ``where``, best first, at most ``cap``.

        ``want`` is how many the caller will read (a page's end): through the HNSW
        index, at least that many are found (or all there are), not always ``cap``.
        ``sizes`` gets the log size of each snapshot ranked in, the one that made the
        ranking last (none in the database: pgvector).

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
        for _ in range(_RENEWALS):
            state = self._state
            try:
                with self._tombstones.reading():
                    wanted = want or cap
                    return await self._rank_held(state, where, params, target, cap, wanted, sizes)
            except _Rebuilt as rebuilt:
                self._replace(state, rebuilt.generation)
        raise StorageError("the projections were rebuilt again and again during one ranking")

    async def _rank_held(
        self,
        state: _State,
        where: str,
        params: Sequence[Any],
        target: bytes,
        cap: int,
        want: int,
        sizes: list[int] | None,
    ) -> list[tuple[int, float]]:
        """The ranking by the vectors ``state`` holds (through its index when it can);
        raises :class:`_Rebuilt` when a snapshot is of another generation."""
        if state.ann is not None:
            ann = state.ann
            approx = await self._rank_approx(state, ann, where, params, target, cap, want, sizes)
            if approx is not None:
                return approx
        embedder_id, resident, width = self.id, state.resident, self.dim * 4
        tombstones = self._tombstones

        def work(
            execute: Execute, embed_missing: bool
        ) -> tuple[list[tuple[int, float]], list[str]]:
            """(ranking, []) or, when vectors are missing and may be made, ([], contents)."""
            seen = state.check(execute, tombstones, sizes)
            seqs = [
                row[0] for row in execute(f"SELECT i.seq FROM engine_items i WHERE {where}", params)
            ]
            unknown = resident.unknown(seqs)
            absent: set[str] = set()
            loose: list[tuple[int, bytes]] = []
            for start in range(0, len(unknown), _CHUNK):
                part = unknown[start : start + _CHUNK]
                found = execute(
                    "SELECT i.seq, i.content, v.vec FROM engine_items i LEFT JOIN engine_vectors v "
                    f"ON v.embedder = ? AND v.content = i.content "
                    f"WHERE i.seq IN ({','.join('?' * len(part))})",
                    [embedder_id, *part],
                )
                usable = [(seq, c, blob) for seq, c, blob in found if blob and len(blob) == width]
                # An item this process forgot after this snapshot began is scored for this
                # ranking (the snapshot's), never held again; a later read drops it.
                refused = set(resident.put(usable, seen))
                loose.extend((seq, bytes(blob)) for seq, _, blob in usable if seq in refused)
                absent.update(c for _, c, blob in found if not blob or len(blob) != width)
            if embed_missing and absent:
                return [], sorted(absent)
            return resident.rank(seqs, target, cap, loose), []

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
        state: _State,
        ann: AnnIndex,
        where: str,
        params: Sequence[Any],
        target: bytes,
        cap: int,
        want: int,
        sizes: list[int] | None,
    ) -> list[tuple[int, float]] | None:
        """The ranking through the HNSW index, or None for the exact scan (see ``_ann``)."""
        if ann.high < 0:
            # Not built: only worth it past the minimum, and counting costs, so look again
            # at most once every ``_RECOUNT`` seconds.
            if time.monotonic() < state.counted + _RECOUNT:
                return None
            state.counted = time.monotonic()
            count = (await self._reader.rows("SELECT count(*) FROM engine_items"))[0][0]
            if int(count) < ann.minimum:
                return None
        query = _np.frombuffer(target, dtype="<f4")
        resident, wanted, tombstones = state.resident, min(want, cap), self._tombstones

        def work(execute: Execute) -> list[tuple[int, float]] | bool | None:
            """The ranking; None for the scan; False when items are newer than the index."""
            state.check(execute, tombstones, sizes)
            if execute("SELECT 1 FROM engine_items WHERE seq > ? LIMIT 1", (ann.high,)):
                return False  # stored since the last catch-up: the index does not hold them
            if not ann.active:
                return None
            for count in ann.proposals(wanted):
                proposed = ann.propose(query, count)
                passed = in_scope(execute, proposed, where, params)
                if len(passed) >= wanted or len(proposed) >= len(ann):
                    return resident.rank(sorted(passed), target, cap)
            return None

        # Search first and catch up only when the index is behind: a read that follows no
        # write costs one snapshot, not two.
        for attempt in range(2):
            if ann.high >= 0:
                found = await self._reader.run(work)
                if found is not False:
                    return found if isinstance(found, list) else None
            if attempt or (state.catching.locked() and not ann.active):
                return None  # behind again, or being built (after a rebuild): the scan answers
            async with state.catching:
                while True:
                    added, blocked = await self._catch_up(state, ann, _BUILD_CHUNK)
                    if blocked:  # an item the index cannot hold yet: only the scan sees all
                        return None
                    if not added:
                        break
        return None

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
        # Still gaps (written this instant by such a process): the database ranks what has
        # its ``emb``, and the rest, from the same snapshot, are scored here as the scan
        # scores them, so no candidate is left out for want of a vector.
        width = self.dim * 4
        ranked, gaps = await self._reader.run(
            lambda execute: (
                pg.rank_filled(execute, where, params, text, cap),
                pg.gaps(execute, where, params),
            )
        )
        missing = sorted(
            {
                c: embed_text(title, t) for _, c, v, title, t in gaps if len(v or b"") != width
            }.items()
        )
        made = dict(
            zip([c for c, _ in missing], await self.embed([t for _, t in missing]), strict=True)
        )
        if made:
            await self._store.run(
                functools.partial(
                    insert_vectors, embedder_id=self.id, rows=list(made.items()), pg=pg
                )
            )
        loose = [(seq, made.get(c) or vec or b"") for seq, c, vec, _, _ in gaps]
        scored = Resident(self.dim).rank([], target, cap, loose)
        return sorted([*ranked, *scored], key=lambda p: (-p[1], -p[0]))[:cap]


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
