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
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Final

import msgspec

from memseal.ledger.errors import InvalidRequest, StorageError, Unsupported
from memseal.ledger.log import Ledger
from memseal.ledger.store import SqlStore, WriteTxn, run_committed

from ._ann import ANN_MIN
from ._dates import check_zone
from ._dialect import for_dialect
from ._fetch import RANK_CAP, Asked, rank_page
from ._forget import plan_forget
from ._item_rows import got_from_rows, rows_to_items
from ._paging import DEFAULT_LIMIT, Cursor, check_limit, decode_cursor, encode_cursor
from ._pgvector import use_pgvector
from ._projection import Projection, recompute_total, state_hash
from ._rebuild import check_projections, rebuild_command
from ._schema import PROJECTION_VERSION, ddl_for
from ._scope import scope_sql
from ._scrub import Scrubber
from ._vectors import VectorCache
from ._writes import Prepared, embed, prepare, prepare_many, store_command, trust_command
from .currency import check_currency, in_force
from .embedders import Embedder
from .events import Keyring
from .explore import Exploration, check_facet, explore
from .filters import DateRange, Filter, check_date_range, check_filter
from .items import check_ids, clean_text
from .namespaces import Namespace, Reach, check_reach
from .recall import Answerer, ExtractiveAnswerer, Recollection
from .results import (
    Fetched,
    Forgotten,
    Got,
    Mode,
    NewItem,
    Page,
    ProjectionCheck,
    RebuildReport,
    Stored,
    TrustChange,
)
from .trust import DEFAULT_MIN_TRUST, Trust, check_min_trust, trust_rank

__all__ = ["RANK_CAP", "Clock", "Engine", "Progress"]

Clock = Callable[[], datetime]
Progress = Callable[[int, int], None]
"""Called as rebuild goes with (entries done, entries in all), on the event loop."""

MAX_QUERY_CHARS: Final = 2_000
MAX_INSTRUCTIONS_CHARS: Final = 4_000


_utcnow: Clock = functools.partial(datetime.now, UTC)


class Engine:
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
    def modes(self) -> tuple[Mode, ...]:
        """The fetch modes served: exact always; semantic and hybrid with an embedder."""
        if self._vectors is None:
            return ("exact",)
        return ("exact", "semantic", "hybrid")

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

    def _mode(self, mode: object) -> Mode:
        if mode is None:
            return "hybrid" if "hybrid" in self.modes else "exact"
        if mode not in ("exact", "semantic", "hybrid"):
            raise InvalidRequest("`mode` is not one of exact, semantic, hybrid")
        if mode not in self.modes:
            raise Unsupported(
                f"`mode` {mode} needs an embedder; this engine serves exact search only"
            )
        chosen: Mode = mode
        return chosen

    # -- writes -----------------------------------------------------------------

    async def store(
        self,
        content: object,
        *,
        namespace: Namespace | str,
        tags: Sequence[str] | None = None,
        meta: object = None,
        observed_at: datetime | str | None = None,
        trust: Trust = "unverified",
        sources: Sequence[str] | None = None,
    ) -> Stored:
        """Store one learning, document or conversation at ``namespace``.

        The same live memory (namespace, kind and content) stored again is
        a replay: the existing id comes back with ``replayed=True`` and
        nothing is appended. After a forget it is stored anew.
        """
        command = await self.plan_store(
            content,
            namespace=namespace,
            tags=tags,
            meta=meta,
            observed_at=observed_at,
            trust=trust,
            sources=sources,
        )
        return await self._store.run(command)

    async def plan_store(
        self,
        content: object,
        *,
        namespace: Namespace | str,
        tags: Sequence[str] | None = None,
        meta: object = None,
        observed_at: datetime | str | None = None,
        trust: Trust = "unverified",
        sources: Sequence[str] | None = None,
    ) -> Callable[[WriteTxn], Stored]:
        """:meth:`store` in two parts, for a caller that owns the transaction.

        Validates and embeds now (raising :class:`InvalidRequest` before
        anything runs); the returned command does the content-id dedupe and
        the append when run in the writer, alone through ``ledger.run`` or
        inside a larger command of the caller's.
        """
        prepared = prepare(
            self._keyring, self._clock, content, namespace, tags, meta, observed_at, trust, sources
        )
        (prepared,) = await embed(self._vectors, [prepared])
        return self._store_command(prepared)

    async def store_many(self, items: Sequence[NewItem]) -> builtins.list[Stored]:
        """Store several items; validated (all or none), embedded in one batch, group-committed.

        Each item is its own command: a replay or a failure of one leaves
        the others alone, exactly as separate :meth:`store` calls would.
        """
        prepared = await embed(self._vectors, prepare_many(self._keyring, self._clock, items))
        return list(
            await asyncio.gather(*(self._store.run(self._store_command(p)) for p in prepared))
        )

    def _store_command(self, prepared: Prepared) -> Callable[[WriteTxn], Stored]:
        pg = None if self._vectors is None else self._vectors.pg
        words = self._sql.fts_words
        if words is not None:
            # Here, not in the writer: the one writer thread is the store's bottleneck.
            d = prepared.derived
            index = words(d.text, prepared.payload.title, d.tags)
            derived = msgspec.structs.replace(d, words=index)
            prepared = msgspec.structs.replace(prepared, derived=derived)
        return store_command(prepared, self._keyring, self.embedder_id, pg)

    async def promote(
        self, item_id: str, *, actor: str, reason: str, reach: Reach | None = None
    ) -> TrustChange:
        """Mark an item verified (a signed ``trust_changed`` entry naming actor and reason)."""
        return await self._set_trust(item_id, "verified", actor, reason, reach)

    async def reject(
        self, item_id: str, *, actor: str, reason: str, reach: Reach | None = None
    ) -> TrustChange:
        """Mark an item rejected: no read returns it any more (forget still reaches it)."""
        return await self._set_trust(item_id, "rejected", actor, reason, reach)

    async def mark_stale(
        self, item_id: str, *, actor: str, reason: str, reach: Reach | None = None
    ) -> TrustChange:
        """Set an item's trust to ``stale`` (below ``unverified``) with a signed entry."""
        return await self._set_trust(item_id, "stale", actor, reason, reach)

    async def _set_trust(
        self, item_id: object, level: Trust, actor: object, reason: object, reach: object
    ) -> TrustChange:
        command = trust_command(item_id, level, actor, reason, reach, self._keyring)
        return await self._store.run(command)

    async def forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        scrub: bool = True,
        actor: str | None = None,
        reason: str | None = None,
    ) -> Forgotten:
        """Forget items in reach, whatever their trust, by ``ids`` or by a non-empty ``filter``.

        One signed ``memory_forgotten`` entry (per 500 items) lists the ids
        and redacts every payload that mentions them; the projection rows
        and cached vectors go in the same transaction; then the scrub
        (``scrub=False`` leaves it pending for :meth:`scrub` or the next open).
        With ``reason`` (and ``actor``, who asked), each entry carries them as its
        payload, which no later forget erases; a forget without them signs none.
        """
        command, release = self.plan_forget(
            ids=ids, filter=filter, reach=reach, actor=actor, reason=reason
        )
        result = await run_committed(self._store.run, command, release)
        if result.seqs and scrub:
            done = await self.scrub()
            result = msgspec.structs.replace(result, scrubbed=done)
        return result

    def plan_forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        actor: object = None,
        reason: object = None,
    ) -> tuple[Callable[[WriteTxn], Forgotten], Callable[[], None]]:
        """:meth:`forget` in parts, for a caller that owns the transaction.

        Validates now (raising :class:`InvalidRequest` before anything
        runs) and returns ``(command, release)``: ``command`` resolves the
        items and appends the ``memory_forgotten`` entries when run in the
        writer (alone, or inside a larger command of the caller's);
        ``release`` lets go of this process's in-memory copies of the
        forgotten vectors and must be called once that transaction committed,
        even when the caller stopped waiting (``memseal.ledger.store.run_committed``
        does both). Then await :meth:`scrub`. The command's result says
        ``scrubbed=False`` whenever it forgot something.
        """
        return plan_forget(
            self._keyring,
            self._vectors,
            ids=ids,
            filter=filter,
            reach=reach,
            actor=actor,
            reason=reason,
        )

    async def scrub(self) -> bool:
        """Finish every pending forget's scrub (FTS merge, WAL truncation); True when done.

        Readers holding an old snapshot make the truncation wait: it is
        retried briefly here, then in the background until it succeeds
        (see :mod:`memseal.engine._scrub`).
        """
        return await self._scrubber.run()

    # -- reads ------------------------------------------------------------------

    async def get(
        self,
        ids: Sequence[str],
        *,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
    ) -> Got:
        """Items by id, in the order asked; unknown or out-of-reach ids come back as missing."""
        wanted = check_ids(ids)
        floor = trust_rank(check_min_trust(min_trust))
        scope = check_reach(reach)
        marks = ",".join("?" * len(wanted))
        found = await self._reader.rows(
            f"SELECT {self._sql.item_select}, i.trust_rank FROM engine_items i "
            f"WHERE i.id IN ({marks})",
            wanted,
        )
        return got_from_rows(found, wanted, scope, floor, self._keyring)

    async def list(
        self,
        *,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> Page:
        """Items newest first; the cursor pages on to older items, unmoved by new writes."""
        picked = check_filter(filter)
        floor = check_min_trust(min_trust)
        count = check_limit(limit)
        scope = check_reach(reach)
        query = self._keyring.query_ref("list", picked, scope, floor)
        before = 2**62
        if cursor is not None:
            before = decode_cursor(cursor, "list", query).seq
        where, params = scope_sql(scope, floor, picked)
        found = await self._reader.rows(
            f"SELECT {self._sql.item_select} FROM engine_items i WHERE {where} AND i.seq < ? "
            "ORDER BY i.seq DESC LIMIT ?",
            [*params, before, count + 1],
        )
        items = rows_to_items(found[:count], self._keyring)
        next_cursor = None
        if len(found) > count:
            next_cursor = encode_cursor(Cursor(v=1, op="list", query=query, seq=items[-1].seq))
        return Page(items=tuple(items), next_cursor=next_cursor)

    async def fetch(
        self,
        query: str,
        *,
        mode: Mode | None = None,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
        refers_to: DateRange | dict[str, object] | None = None,
        zone: tzinfo | None = None,
    ) -> Fetched:
        """Ranked hits for ``query``: ``exact`` (BM25), ``semantic`` or ``hybrid`` (RRF).

        With no mode, hybrid when served, else exact. ``refers_to`` moves
        the items about those days (read in ``zone``, the host's) first and
        drops none. The cursor keeps later pages to the items the first
        page could see.
        """
        text = clean_text(query, "query", MAX_QUERY_CHARS)
        chosen = self._mode(mode)
        picked = check_filter(filter)
        floor = check_min_trust(min_trust)
        count = check_limit(limit)
        days = check_date_range(refers_to)
        scope = check_reach(reach)
        where_zone = check_zone(zone, self._zone)
        key = self._keyring.query_ref(
            "fetch", text, chosen, picked, scope, floor, days, str(where_zone)
        )
        snapshot: int | None = None
        offset = 0
        if cursor is not None:
            position = decode_cursor(cursor, "fetch", key)
            snapshot, offset = position.seq, position.offset
        where, params = scope_sql(scope, floor, picked)
        asked = Asked(
            text=text,
            mode=chosen,
            where=where,
            params=params,
            snapshot=snapshot,
            offset=offset,
            count=count,
            days=days,
            zone=where_zone,
            rule=in_force(self._currency),
        )
        seen, total, hits = await rank_page(
            self._reader, self._vectors, self._sql, self._keyring, asked
        )
        next_cursor = None
        if total > offset + count:
            next_cursor = encode_cursor(
                Cursor(v=1, op="fetch", query=key, seq=seen, offset=offset + count)
            )
        return Fetched(hits=tuple(hits), mode=chosen, min_trust=floor, next_cursor=next_cursor)

    async def explore(
        self,
        facet: str,
        *,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
    ) -> Exploration:
        """How the items in scope spread over ``facet`` (see :mod:`memseal.engine.explore`)."""
        name = check_facet(facet)
        picked = check_filter(filter)
        floor = check_min_trust(min_trust)
        count = check_limit(limit)
        where, params = scope_sql(check_reach(reach), floor, picked)
        return await self._reader.run(lambda execute: explore(execute, name, where, params, count))

    async def recall(
        self,
        question: str,
        *,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
        instructions: str | None = None,
        refers_to: DateRange | dict[str, object] | None = None,
        zone: tzinfo | None = None,
        answerer: Answerer | None = None,
    ) -> Recollection:
        """``{answer, citations}`` for ``question`` from the best hits, by the answerer."""
        told = None
        if instructions is not None:
            told = clean_text(instructions, "instructions", MAX_INSTRUCTIONS_CHARS) or None
        if answerer is not None and not isinstance(answerer, Answerer):
            raise InvalidRequest("`answerer` must have an async answer(question, hits, ...)")
        fetched = await self.fetch(
            question,
            filter=filter,
            reach=reach,
            min_trust=min_trust,
            limit=limit,
            refers_to=refers_to,
            zone=zone,
        )
        chosen = answerer if answerer is not None else self._answerer
        result = await chosen.answer(question, fetched.hits, instructions=told)
        if not isinstance(result, Recollection):
            raise StorageError(f"answerer {type(chosen).__name__} did not return a Recollection")
        drawn = tuple(dict.fromkeys(hit.item.id for hit in fetched.hits))
        kept = tuple(c for c in result.citations if c.id in drawn)
        return Recollection(answer=result.answer, citations=kept, drawn_from=drawn)

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
