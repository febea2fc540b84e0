"""Building the memory as of a tree size: the log prefix copied into a temporary log.

A view at size ``N`` is a :class:`~memseal.replay._reexec.TempLog` holding the
live log's entries ``seq < N`` with their *current* payloads, and an engine whose
projection a rebuild derived from them. Only the engine's own entries are
copied whole; every other entry (tool calls, runs, key rotations) is an inert
gap entry at its seq, so the copy keeps no recorded arguments or results and the
item seqs (``ledger_ref``) stay those of the live log.

Privacy wins over history. A payload a later forget erased is copied as
missing, so the item is simply not in the view's projection; the item's signed
structure (id, kind, namespace, trust, seq) is kept in :attr:`Built.erased` with
the seq of that forget, for ``memory_get`` to show the forget marker. A forget
committed *after* a view was built is found by :meth:`ViewCache.refresh` (each
read scans the entries appended since the last one): a view holding a payload
that forget erased is closed and dropped, and its temporary folder removed.

Warm views: :class:`ViewCache` keeps the :data:`CAPACITY` most recently used
views, keyed by size. A size not cached is built by extending the largest idle
cached view below it (copying only the entries between, then one rebuild of the
temporary projection), else from seq 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import AsyncIterator
from datetime import UTC, tzinfo
from pathlib import Path
from typing import Final

import msgspec

from memseal.engine import Answerer, Embedder, Engine
from memseal.engine.events import ENGINE_KINDS
from memseal.ledger.errors import Conflict
from memseal.ledger.store import SqlStore, WriteTxn

from ._reexec import Source, TempLog

__all__ = ["CAPACITY", "Built", "Erased", "ViewCache"]

#: Views a cache keeps (the least recently used beyond it is closed).
CAPACITY: Final = 4
#: Entries read from the live store per scan (and copied per command).
_CHUNK: Final = 2_048
#: Builds tried while forgets keep committing during the copy.
_BUILD_ATTEMPTS: Final = 3
_FORGOTTEN: Final = "memory_forgotten"
# The live vector cache's rows for the items stored in a seq range. Every item of a view
# that no later forget took is still a live item (items leave only by a forget) with the
# same keyed content hash, so its vector is there: a view embeds nothing again. Rows of
# engine tables read by name: the engine has no API handing its cache to another store.
_LIVE_VECTORS: Final = (
    "SELECT v.content, v.vec FROM engine_vectors v WHERE v.embedder = ? AND v.content IN "
    "(SELECT i.content FROM engine_items i WHERE i.seq >= ? AND i.seq < ?)"
)
_PUT_VECTOR: Final = (
    "INSERT INTO engine_vectors (embedder, content, vec) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
)


class Erased(msgspec.Struct, frozen=True, kw_only=True):
    """An item of the view whose text a later forget erased: its signed structure only."""

    id: str
    seq: int
    kind: str
    namespace: str
    trust: str
    observed_at: str
    confidence: float | None
    forgotten_at: int


class _Body(msgspec.Struct, kw_only=True):
    # The fields of memory_stored and trust_changed bodies a view needs (others ignored).
    item: str | None = None
    items: tuple[str, ...] = ()
    kind: str = ""
    namespace: str = ""
    trust: str = ""
    observed_at: str = ""
    confidence: float | None = None


_body = msgspec.json.Decoder(_Body)


class Built:
    """One built view: its temporary log, the size it holds, and what a later forget erased."""

    def __init__(self, log: TempLog) -> None:
        self.log = log
        self.size = 0
        #: The live log's size up to which forgets have been checked against this view.
        self.checked = 0
        #: Items present at ``size`` whose payload a later forget erased, by id.
        self.erased: dict[str, Erased] = {}
        # Erased items' stored seqs whose forget seq is still to be looked up.
        self._pending: dict[str, Erased] = {}
        self.users = 0
        self.dead = False

    @property
    def engine(self) -> Engine:
        """The engine over the view's projection."""
        assert self.log.engine is not None
        return self.log.engine

    def note(self, seq: int, kind: str, body: bytes, erased: bool) -> None:
        """Follow the items whose text is erased through one copied engine entry."""
        try:
            decoded = _body.decode(body)
        except msgspec.DecodeError:
            return  # the rebuild counts and skips it too
        if kind == "memory_stored" and erased and decoded.item is not None:
            self._pending[decoded.item] = Erased(
                id=decoded.item,
                seq=seq,
                kind=decoded.kind,
                namespace=decoded.namespace,
                trust=decoded.trust,
                observed_at=decoded.observed_at,
                confidence=decoded.confidence,
                forgotten_at=-1,
            )
        elif kind == "trust_changed" and decoded.item is not None:
            for held in (self._pending, self.erased):
                if decoded.item in held:
                    held[decoded.item] = msgspec.structs.replace(
                        held[decoded.item], trust=decoded.trust
                    )
        elif kind == _FORGOTTEN:
            # Forgotten before the view's size: gone at that point, as the live memory said.
            for item in decoded.items:
                self._pending.pop(item, None)
                self.erased.pop(item, None)

    async def settle(self, store: SqlStore) -> None:
        """Look up the forget that erased each pending item (the ledger's redaction record)."""
        for item, found in list(self._pending.items()):
            by = await store.redacted_by(found.seq)
            if by is not None and by >= self.size:
                self.erased[item] = msgspec.structs.replace(found, forgotten_at=by)
            # Erased with no record of the forget, or by one inside the prefix: leave it out.
        self._pending.clear()

    async def close(self) -> None:
        """Close the temporary log and remove its folder (the copied texts go with it)."""
        try:
            await self.log.close()
        finally:
            await asyncio.to_thread(shutil.rmtree, self.log.folder, True)


class ViewCache:
    """Built views of one live store, most recently used last (see the module docstring)."""

    def __init__(
        self,
        store: SqlStore,
        secret: bytes,
        *,
        embedder: Embedder | None = None,
        zone: tzinfo = UTC,
        answerer: Answerer | None = None,
        capacity: int = CAPACITY,
    ) -> None:
        self._store = store
        self._secret = secret
        self._embedder = embedder
        self._zone = zone
        self._answerer = answerer
        self._capacity = capacity
        self._views: OrderedDict[int, Built] = OrderedDict()
        self._lock = asyncio.Lock()
        self._closed = False
        #: Builds made from seq 0, and builds that extended a smaller view (for tests and docs).
        self.cold_builds = 0
        self.extensions = 0

    @property
    def modes(self) -> tuple[str, ...]:
        """The fetch modes a view serves: those of an engine with this cache's embedder."""
        return ("exact",) if self._embedder is None else ("exact", "semantic", "hybrid")

    def sizes(self) -> list[int]:
        """The sizes of the views kept, least recently used first."""
        return list(self._views)

    @contextlib.asynccontextmanager
    async def use(self, size: int) -> AsyncIterator[Built]:
        """The view at ``size`` (0 <= size <= the live size, checked by the caller), held
        for one read: it is neither extended nor closed while held."""
        async with self._lock:
            if self._closed:
                raise Conflict("the memory is closed: its as-of views are gone")
            built = await self._get(size)
            built.users += 1
        try:
            yield built
        finally:
            built.users -= 1
            if built.dead and built.users == 0:
                await built.close()

    async def clear(self) -> None:
        """Close every view kept (one a read still holds closes when that read ends)."""
        async with self._lock:
            views, self._views = list(self._views.values()), OrderedDict()
            for built in views:
                await self._drop(built)

    async def close(self) -> None:
        """:meth:`clear`, and build no view again."""
        self._closed = True  # first: a read waiting for the lock must not build one anew
        await self.clear()

    # -- inside the lock ----------------------------------------------------------------

    async def _drop(self, built: Built) -> None:
        built.dead = True
        if built.users == 0:
            await built.close()

    async def refresh(self) -> int:
        """Drop every view holding a payload a forget committed since its last check erased;
        returns the live size checked up to."""
        head = (await self._store.head()).size
        if not self._views:
            return head
        low = min(built.checked for built in self._views.values())
        forgets = await self._forgets(low, head)
        for size, built in list(self._views.items()):
            if any(seq >= built.checked and first < built.size for seq, first in forgets):
                del self._views[size]
                await self._drop(built)
            else:
                built.checked = head
        return head

    async def _forgets(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The forgets at ``start <= seq < stop``: (seq, the lowest seq they redact)."""
        found = []
        async for record in self._store.scan(start, stop):
            entry = record.entry()
            if entry.kind == _FORGOTTEN and entry.redacts:
                found.append((record.seq, min(entry.redacts)))
        return found

    async def _get(self, size: int) -> Built:
        for _attempt in range(_BUILD_ATTEMPTS):
            head = await self.refresh()
            built = self._views.get(size)
            if built is not None:
                self._views.move_to_end(size)
                return built
            built = await self._build(size)
            # A forget that committed while the entries were read may have erased one that
            # was already copied: look (from the size checked before the copy began).
            forgets = await self._forgets(head, (await self._store.head()).size)
            if any(first < size for _seq, first in forgets):
                await self._drop(built)
                continue
            built.checked = head
            self._views[size] = built
            while len(self._views) > self._capacity:
                _, oldest = self._views.popitem(last=False)
                await self._drop(oldest)
            return built
        raise Conflict(
            f"forgets kept committing while the memory as of size {size} was built "
            f"({_BUILD_ATTEMPTS} tries); nothing is served from it: ask again"
        )

    async def _build(self, size: int) -> Built:
        """The view at ``size``: a cached idle smaller one extended, else a new one."""
        base = max(
            (s for s, b in self._views.items() if s < size and b.users == 0),
            default=None,
        )
        if base is not None:
            built = self._views.pop(base)
            self.extensions += 1
        else:
            folder = Path(tempfile.mkdtemp(prefix="memseal-as-of-"))
            built = Built(
                TempLog(
                    folder, self._secret, self._embedder, zone=self._zone, answerer=self._answerer
                )
            )
            try:
                await built.log.open()
            except BaseException:
                await built.close()
                raise
            self.cold_builds += 1
        try:
            await self._copy(built, size)
        except BaseException:
            await self._drop(built)
            raise
        return built

    async def _copy(self, built: Built, size: int) -> None:
        """Copy the live entries ``built.size <= seq < size`` into the view, then rebuild."""
        start = built.size
        while start < size:
            stop = min(start + _CHUNK, size)
            batch: list[Source | int] = []
            async for record in self._store.scan(start, stop):
                entry = record.entry()
                if entry.kind not in ENGINE_KINDS:
                    batch.append(record.seq)  # an inert gap: the view keeps no call's texts
                    continue
                body = bytes(entry.body)
                built.note(
                    record.seq,
                    entry.kind,
                    body,
                    record.payload is None and entry.payload_hash is not None,
                )
                batch.append(
                    Source(
                        seq=record.seq,
                        kind=entry.kind,
                        at=entry.at,
                        body=body,
                        payload=record.payload,
                        redacts=(),  # the live log erased them already: nothing to redo
                        committed=entry.payload_hash is not None,
                    )
                )
            await built.log.append(batch, rebuild=False)
            await self._share_vectors(built, start, stop)
            start = stop
        built.size = size
        await built.log.rebuild()
        await built.settle(self._store)

    async def _share_vectors(self, built: Built, start: int, stop: int) -> None:
        """Put the live cache's vectors of the items stored at ``start <= seq < stop`` into
        the view's store before its rebuild, whose fill then finds them there."""
        if self._embedder is None or built.log.store is None:
            return
        embedder = self._embedder.id
        rows = await self._store.rows(_LIVE_VECTORS, (embedder, start, stop))
        if not rows:
            return

        def put(txn: WriteTxn) -> None:
            for content, vec in rows:
                txn.execute(_PUT_VECTOR, (embedder, content, bytes(vec)))

        await built.log.store.run(put)
