"""The :class:`Engine`: memory as signed events, read through projections.

Every write is validated first, then appended as one signed ledger entry
whose projection rows are written in the same transaction (a command on
the store's single writer): a store, trust change or forget is durable
whole or not at all. Checks that depend on current state (the content-id
dedupe, which items a forget resolves, an item's current trust) run
inside that command, never on a cached copy, so two processes on one data
folder agree. Pure, expensive work (validation, canonical encoding,
embedding) happens before it.

Every read is confined by reach, trust floor and filter before anything is
ranked (see :mod:`memseal.engine._scope`).

The class is assembled from its parts: the write verbs
(:mod:`._write_verbs`), the read verbs (:mod:`._read_verbs`), and here its
opening and closing, what it serves, and its projections' hash, audit and
rebuild.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import time
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo

from memseal.ledger.log import Ledger
from memseal.ledger.store import SqlStore, WriteTxn

from ._ann import ANN_MIN
from ._dates import check_zone
from ._dialect import for_dialect
from ._fetch import RANK_CAP
from ._pgvector import use_pgvector
from ._projection import Projection, recompute_total, state_hash

# Re-exported: memseal.tools.args states these bounds in the tools' schemas.
from ._read_verbs import MAX_INSTRUCTIONS_CHARS as MAX_INSTRUCTIONS_CHARS
from ._read_verbs import MAX_QUERY_CHARS as MAX_QUERY_CHARS
from ._read_verbs import ReadVerbs
from ._rebuild import check_projections, rebuild_command
from ._schema import PROJECTION_VERSION, ddl_for
from ._scrub import Scrubber
from ._vectors import VectorCache
from ._write_verbs import WriteVerbs
from .currency import check_currency
from .embedders import Embedder
from .events import Keyring
from .recall import Answerer, ExtractiveAnswerer
from .results import ProjectionCheck, RebuildReport

__all__ = ["RANK_CAP", "Clock", "Engine", "Progress"]

Clock = Callable[[], datetime]
Progress = Callable[[int, int], None]
"""Called as rebuild goes with (entries done, entries in all), on the event loop."""

_utcnow: Clock = functools.partial(datetime.now, UTC)


class Engine(WriteVerbs, ReadVerbs):
    """The memory engine of one data folder (see the module docstring).

    Build it with :meth:`open` after :meth:`register_schema` has added its
    tables to the store and the store is open::

        Engine.register_schema(store)
        await store.open()
        engine = await Engine.open(ledger, store, keys.secret, embedder=default_embedder())
    """

    def __init__(
        self,
        ledger: Ledger,
        store: SqlStore,
        secret: bytes,
        *,
        clock: Clock = _utcnow,
        embedder: Embedder | None = None,
        zone: tzinfo = UTC,
        answerer: Answerer | None = None,
        ann: int | None = ANN_MIN,
        ranks_as: str | None = None,
        currency: bool = True,
    ) -> None:
        self.ledger = ledger
        self._currency = check_currency(currency)
        self._store = store
        self._keyring = Keyring(secret)
        self._clock = clock
        self._zone = check_zone(zone, UTC)
        self._sql = for_dialect(store.dialect, ranks_as=ranks_as)
        self._reader = store.snapshots()
        self._vectors = None if embedder is None else VectorCache(store, self._reader, embedder)
        self._ann = ann
        if self._vectors is not None and ann is not None and store.dialect == "sqlite":
            # PostgreSQL ranks in the database (pgvector's HNSW) or by the scan; see _ann for
            # why an index here only proposes and never decides.
            self._vectors.use_ann(ann)
        self._answerer: Answerer = answerer if answerer is not None else ExtractiveAnswerer()
        self._scrubber = Scrubber(store, self._reader)

    # -- set-up -----------------------------------------------------------------

    @staticmethod
    def register_schema(store: SqlStore) -> None:
        """Add the engine's tables to ``store``; call before ``store.open()``."""
        store.add_schema(ddl_for(store.dialect))

    @classmethod
    async def open(
        cls,
        ledger: Ledger,
        store: SqlStore,
        secret: bytes,
        *,
        clock: Clock = _utcnow,
        embedder: Embedder | None = None,
        zone: tzinfo = UTC,
        answerer: Answerer | None = None,
        progress: Progress | None = None,
        ann: int | None = ANN_MIN,
        ranks_as: str | None = None,
        currency: bool = True,
    ) -> Engine:
        """An engine over an open store: projections built if new, scrubs and vectors caught up.

        ``progress`` is called as a rebuild goes, when the open needs one (a new
        store, a migrated log, an older projection layout), and as the HNSW index is
        built. ``ann`` is the count of live vectors past which semantic ranking on
        SQLite goes through that index (None: always the exact scan; see ``_ann``).
        ``ranks_as="postgresql"`` on a SQLite store ranks exact reads as PostgreSQL
        does (``_tsrank``): how a read proof re-derives a read recorded there.
        ``currency=False`` turns off the currency rule (:mod:`.currency`): reads rank
        and mark hits as before it.
        """
        engine = cls(
            ledger,
            store,
            secret,
            clock=clock,
            embedder=embedder,
            zone=zone,
            answerer=answerer,
            ann=ann,
            ranks_as=ranks_as,
            currency=currency,
        )
        await engine.start(progress)
        return engine

    async def start(self, progress: Progress | None = None) -> None:
        """Make the engine ready: build stale projections, finish a scrub, fill vectors."""
        version = await self._reader.rows("SELECT value FROM engine_meta WHERE key = 'projection'")
        if not version or version[0][0] != PROJECTION_VERSION:
            # New here (or an older layout): the projections are derived, so build them.
            await self.rebuild(progress)
        if await self._scrubber.pending():
            await self.scrub()  # a forget's scrub was interrupted: finish it now
        if self._vectors is not None:
            await self._vectors.adopt()
            await self._vectors.refresh()
            if self._store.dialect == "postgresql":
                await use_pgvector(self._store, self._reader, self._vectors, self._ann)
            await self._vectors.fill()
            await self._vectors.build_ann(progress)

    async def close(self) -> None:
        """Stop background work (a pending scrub retry). The store stays open: it is the host's."""
        await self._scrubber.close()
        await self._reader.close()

    @property
    def ann_size(self) -> int | None:
        """How many items the HNSW index holds (0 until built); None: no index here."""
        if self._vectors is None or self._vectors.ann is None:
            return None
        return len(self._vectors.ann)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder semantic search uses (its ``id`` is the cache's); None without one."""
        return None if self._vectors is None else self._vectors.embedder

    @property
    def embedder_id(self) -> str | None:
        """The id of the embedder whose vectors semantic search uses; None without one."""
        return None if self._vectors is None else self._vectors.id

    async def embedders(self) -> builtins.list[str]:
        """The ids of the embedders whose vectors the store caches, sorted.

        Usually one (the cache holds one embedder's vectors at a time), none
        before anything was embedded. An exported bundle names them: they are
        what ``memseal replay --embedder auto`` searches with.
        """
        rows = await self._reader.rows("SELECT DISTINCT embedder FROM engine_vectors")
        return sorted(str(row[0]) for row in rows)

    def facet_ref(self, facet: str, value: str) -> str:
        """The ref a payload showing ``value`` of ``facet`` mentions (see ``Keyring``)."""
        return self._keyring.facet_ref(facet, value)

    # -- projections ------------------------------------------------------------

    async def state_hash(self) -> str:
        """The projection state hash as kept incrementally (position and running sum)."""
        found = dict(
            await self._reader.rows(
                "SELECT key, value FROM engine_meta WHERE key IN ('position', 'state_sum')"
            )
        )
        return state_hash(int(found.get("position", "-1")), int(found.get("state_sum", "0"), 16))

    async def recompute_state_hash(self) -> str:
        """The state hash recomputed from every projection row (an audit of the running one)."""

        def command(txn: WriteTxn) -> str:
            position = Projection(txn.execute, self._keyring, self._sql).position
            return state_hash(position, recompute_total(txn.execute))

        return await self._store.run(command)

    async def check_projections(self) -> ProjectionCheck:
        """Rebuild the projections from the log into a scratch store and compare them
        with the live ones, row by row (``memseal verify --deep``); writes nothing."""
        return await check_projections(self._reader, self._keyring, self._store.dialect)

    async def rebuild(self, progress: Progress | None = None) -> RebuildReport:
        """Drop the projections and replay the log into them, as one writer command.

        Vectors are kept (and any missing ones made afterwards). The command raises
        the projections' generation, so every engine on this store (this one and any
        other process's) sets its in-memory vectors and HNSW index aside and makes them
        afresh; here the index is built again at once, ``progress`` called with (items
        in the index, items in all) as it is, after the replay's (entries done, entries
        in all). The result names the state hash reached and the incremental one it
        replaced.
        """
        loop = asyncio.get_running_loop()
        keyring = self._keyring
        started = time.perf_counter()

        def report(done: int, total: int) -> None:
            if progress is not None:
                loop.call_soon_threadsafe(progress, done, total)

        command = rebuild_command(keyring, report, started)

        result = await self._store.run(command)
        if self._vectors is not None:
            await self._vectors.fill()
            await self._vectors.refresh()
            await self._vectors.build_ann(progress)
        return result
