"""Building the memory as of a tree size: the live projection cut back to the prefix.

The engine's projection is a pure function of the log, and every row of it says
which entry made it: an item's row is its ``memory_stored`` entry's seq, its
facets and dates share that seq, a verdict row is its ``trust_changed`` entry's
seq. What a rebuild of the prefix ``seq < N`` would hold is therefore read off
the live projection, on one read snapshot, without replaying a single entry:

* the items stored below ``N`` that are still live (an item leaves the live
  projection only by a forget, and a forget erases its text: one forgotten after
  ``N`` is left out of the view too, which is what privacy asks), with their
  facets and dates;
* their verdicts below ``N``, and the trust each item had at ``N``: the trust of
  its last verdict below ``N``, else the ``previous`` of its first verdict (the
  trust it was stored with), else the live one;
* the live vector cache's vectors of those items (keyed by the same content
  hash), so a view embeds nothing again.

These rows are written into a temporary SQLite store in the process's temporary
folder (mode 0700), its full-text index built in one pass, and an engine opened
over it. The temporary store holds no log: its entries table has one unsigned
placeholder row at seq ``N - 1``, so the engine's log size (``max(seq) + 1``,
which pins fetch cursors and hybrid's prefix) reads ``N``. Nothing reads or
verifies that row. Its ``engine_meta`` has no position or running hash (nothing
reads a view's state hash). ``tests/integration/test_as_of.py`` checks the rows
against a rebuild of the prefix, table by table.

The item's signed structure (id, kind, namespace, trust, seq) of an item a
forget at or after ``N`` erased is kept in :attr:`Built.erased`, for
``memory_get`` to show the forget marker: found in the ledger's redactions
(``seq < N <= by_seq``), the trust followed through its erased verdicts below
``N``.

Forgets after a view was built. The latest forget is the largest ``by_seq`` of
the redactions (:data:`AS_OF_DDL` indexes it): the watermark. Each read
compares it with the watermark its views were checked at, so a forget made by
*another* process is applied before the read answers: a view holding a text that
forget erased is dropped, its folder removed, and built again. In this process a
commit hook on the live store does it at once: a group whose forget raised the
watermark removes the folder of every idle view it touched before the forget's
caller resumes (a view a read still holds goes when that read ends).

Warm views: :class:`ViewCache` keeps the :data:`CAPACITY` most recently used
views, keyed by size.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, Final

import msgspec

from memseal.engine import Answerer, Embedder, Engine, ranked_at
from memseal.engine._schema import HASHED, PROJECTION_VERSION
from memseal.engine.trust import trust_rank
from memseal.ledger.entry import decode_entry
from memseal.ledger.errors import Conflict
from memseal.ledger.log import Ledger
from memseal.ledger.note import NoteSigner
from memseal.ledger.opening import LogLocation, log_store
from memseal.ledger.store import Execute, SqlStore, WriteTxn
from memseal.replay.evidence._temp_log import parse_time

__all__ = ["AS_OF_DDL", "CAPACITY", "Built", "Erased", "ViewCache", "ViewLog"]

#: Views a cache keeps (the least recently used beyond it is closed).
CAPACITY: Final = 4
#: Builds tried while forgets keep committing during the read of the live rows.
_BUILD_ATTEMPTS: Final = 3
#: What the watermark reads fast (both dialects): the latest forget is max(by_seq).
AS_OF_DDL: Final = "CREATE INDEX IF NOT EXISTS redactions_by_seq ON redactions (by_seq)"
_WATERMARK: Final = "SELECT coalesce(max(by_seq), -1) FROM redactions"
_LOWEST_SINCE: Final = "SELECT min(seq) FROM redactions WHERE by_seq > ?"
_ITEMS: Final = f"SELECT {', '.join(HASHED['engine_items'])} FROM engine_items WHERE seq < ?"
_FACETS: Final = "SELECT seq, facet, value FROM engine_facets WHERE seq < ?"
_DATES: Final = "SELECT seq, ref FROM engine_dates WHERE seq < ?"
_VERDICTS: Final = (
    f"SELECT {', '.join(HASHED['engine_verdicts'])} FROM engine_verdicts WHERE item < ? "
    "ORDER BY seq"
)
_VECTORS: Final = (
    "SELECT v.content, v.vec FROM engine_vectors v WHERE v.embedder = ? AND v.content IN "
    "(SELECT i.content FROM engine_items i WHERE i.seq < ?)"
)
_ERASED: Final = (
    "SELECT r.seq, r.by_seq, e.leaf FROM redactions r JOIN entries e ON e.seq = r.seq "
    "WHERE r.seq < ? AND r.by_seq >= ? ORDER BY r.seq"
)
_LAST_TIME: Final = "SELECT leaf FROM entries WHERE seq = ?"
_ROWS_PER_INSERT: Final = 200
_EPOCH: Final = datetime(2000, 1, 1, tzinfo=UTC)


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
    kind: str = ""
    namespace: str = ""
    trust: str = ""
    observed_at: str = ""
    confidence: float | None = None


_body = msgspec.json.Decoder(_Body)


class _Rows(msgspec.Struct, kw_only=True):
    """What one read snapshot of the live store gives a view at ``size``."""

    watermark: int
    items: list[tuple[Any, ...]]
    facets: list[tuple[Any, ...]]
    dates: list[tuple[Any, ...]]
    verdicts: list[tuple[Any, ...]]
    vectors: list[tuple[Any, ...]]
    erased: list[tuple[Any, ...]]
    last_leaf: bytes | None


def _read(size: int, embedder: str | None) -> Any:
    def read(execute: Execute) -> _Rows:
        last = execute(_LAST_TIME, (size - 1,)) if size else []
        return _Rows(
            watermark=int(execute(_WATERMARK, ())[0][0]),
            items=execute(_ITEMS, (size,)),
            facets=execute(_FACETS, (size,)),
            dates=execute(_DATES, (size,)),
            verdicts=execute(_VERDICTS, (size,)),
            vectors=[] if embedder is None else execute(_VECTORS, (embedder, size)),
            erased=execute(_ERASED, (size, size)),
            last_leaf=bytes(last[0][0]) if last else None,
        )

    return read


def _trust_at(size: int, verdicts: Sequence[tuple[Any, ...]]) -> dict[int, str]:
    """The trust at ``size`` of each item whose trust changed at or after it, by item seq."""
    # Verdict columns: seq, item, trust, previous, actor, reason, at (in seq order).
    before: dict[int, str] = {}
    first_after: dict[int, str] = {}
    for seq, item, trust, previous, *_ in verdicts:
        if seq < size:
            before[int(item)] = str(trust)
        else:
            first_after.setdefault(int(item), str(previous))
    return {item: before.get(item, previous) for item, previous in first_after.items()}


def _insert(
    txn: WriteTxn, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        part = rows[start : start + _ROWS_PER_INSERT]
        marks = ", ".join("(" + ", ".join("?" * len(columns)) + ")" for _ in part)
        txn.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES {marks}",
            [value for row in part for value in row],
        )


class ViewLog:
    """The temporary store of one view, and the engine over it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.store: SqlStore | None = None
        self.ledger: Ledger | None = None
        self.engine: Engine | None = None

    async def fill(
        self,
        rows: _Rows,
        size: int,
        secret: bytes,
        *,
        embedder: Embedder | None,
        zone: tzinfo,
        answerer: Answerer | None,
        ranks_as: str | None = None,
    ) -> None:
        """Write the view's rows (see the module docstring), then open the engine over them;
        ``ranks_as`` names the live store, whose full-text ranking the view repeats."""
        when = _EPOCH if rows.last_leaf is None else parse_time(decode_entry(rows.last_leaf).at)
        signer = NoteSigner.generate("memseal-as-of")
        store = log_store(LogLocation(folder=self.folder), signer, clock=lambda: when)
        Engine.register_schema(store)
        await store.open()
        self.store = store
        self.ledger = Ledger(store, signer.verifier, None)
        moved = _trust_at(size, rows.verdicts)
        items = []
        for row in rows.items:
            trust = moved.get(int(row[0]))
            if trust is not None:
                row = (*row[:4], trust, trust_rank(trust), *row[6:])  # type: ignore[arg-type]
            items.append(row)
        verdicts = [row for row in rows.verdicts if row[0] < size]

        def command(txn: WriteTxn) -> None:
            _insert(txn, "engine_items", HASHED["engine_items"], items)
            _insert(txn, "engine_facets", HASHED["engine_facets"], rows.facets)
            _insert(txn, "engine_dates", HASHED["engine_dates"], rows.dates)
            _insert(txn, "engine_verdicts", HASHED["engine_verdicts"], verdicts)
            if embedder is not None:
                vectors = [(embedder.id, content, bytes(vec)) for content, vec in rows.vectors]
                _insert(txn, "engine_vectors", ("embedder", "content", "vec"), vectors)
            # One pass over the items: FTS5 reads the external content table.
            txn.execute("INSERT INTO engine_fts (engine_fts) VALUES ('rebuild')")
            txn.execute(
                "INSERT INTO engine_meta (key, value) VALUES ('projection', ?), "
                "('generation', '1')",
                (PROJECTION_VERSION,),
            )
            if size:
                # The placeholder that makes the engine's log size N (module docstring).
                txn.execute(
                    "INSERT INTO entries (seq, leaf, hash, sig) VALUES (?, ?, ?, ?)",
                    (size - 1, b"", b"", b""),
                )

        await store.run(command)
        # ann=None: a view ranks by the exact scan, as a rebuilt log did (engine/_ann.py).
        self.engine = await Engine.open(
            self.ledger,
            store,
            secret,
            clock=lambda: when,
            embedder=embedder,
            zone=zone,
            answerer=answerer,
            ann=None,
            ranks_as=ranks_as,
        )

    async def close(self) -> None:
        """Close the engine and the store, those of them :meth:`fill` got to."""
        try:
            if self.engine is not None:
                await self.engine.close()
        finally:
            if self.ledger is not None:
                await self.ledger.close()
            elif self.store is not None:
                await self.store.close()


def _erased(size: int, rows: Sequence[tuple[Any, ...]]) -> dict[str, Erased]:
    """The items of the view at ``size`` whose text a forget at or after it erased."""
    found: dict[str, Erased] = {}
    for seq, by, leaf in rows:
        try:
            entry = decode_entry(bytes(leaf))
            body = _body.decode(bytes(entry.body))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue  # verify reports such an entry; a view shows nothing of it
        if body.item is None:
            continue
        if entry.kind == "memory_stored" and body.item not in found:
            # The first store of an id stands (the projection's rule), in seq order here.
            found[body.item] = Erased(
                id=body.item,
                seq=int(seq),
                kind=body.kind,
                namespace=body.namespace,
                trust=body.trust,
                observed_at=body.observed_at,
                confidence=body.confidence,
                forgotten_at=int(by),
            )
        elif entry.kind == "trust_changed" and body.item in found:
            held = found[body.item]
            if held.forgotten_at == int(by):  # a verdict on this store of the id
                found[body.item] = msgspec.structs.replace(held, trust=body.trust)
    return found


class Built:
    """One built view: its temporary store, the size it holds, what a later forget erased."""

    def __init__(self, log: ViewLog, size: int) -> None:
        self.log = log
        self.size = size
        #: The forget watermark (latest ``by_seq``) this view's rows were read at.
        self.checked = -1
        #: Items present at ``size`` whose payload a later forget erased, by id.
        self.erased: dict[str, Erased] = {}
        self.users = 0
        self.dead = False
        self._removed = False

    @property
    def engine(self) -> Engine:
        """The engine over the view's projection."""
        assert self.log.engine is not None
        return self.log.engine

    def remove_files(self) -> None:
        """Remove the folder now (the copied texts go with it; open handles die on close)."""
        if not self._removed:
            self._removed = True
            shutil.rmtree(self.log.folder, ignore_errors=True)

    async def close(self) -> None:
        """Close the temporary store and remove its folder."""
        try:
            await self.log.close()
        finally:
            self._removed = False  # again: closing may have written the WAL back
            await asyncio.to_thread(self.remove_files)


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
        self._loop: asyncio.AbstractEventLoop | None = None
        # The watermark the commit hook last saw (written on the store's writer thread).
        self._hook_mark: int | None = None
        self._pending: set[asyncio.Task[None]] = set()
        #: Views built (for tests and docs).
        self.cold_builds = 0

    @property
    def modes(self) -> tuple[str, ...]:
        """The fetch modes a view serves: those of an engine with this cache's embedder."""
        return ("exact",) if self._embedder is None else ("exact", "semantic", "hybrid")

    def sizes(self) -> list[int]:
        """The sizes of the views kept, least recently used first."""
        return list(self._views)

    def folders(self) -> list[Path]:
        """The temporary folders of the views kept (what a forget must not leave text in)."""
        return [built.log.folder for built in self._views.values()]

    @contextlib.asynccontextmanager
    async def use(self, size: int) -> AsyncIterator[Built]:
        """The view at ``size`` (0 <= size <= the live size, checked by the caller), held
        for one read: it is not closed while held."""
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
        for task in list(self._pending):
            with contextlib.suppress(Exception):
                await task

    # -- forgets ------------------------------------------------------------------------

    def _on_commit(self, txn: Any) -> None:
        """The live store's commit hook (on its writer thread, inside the transaction):
        a group that raised the forget watermark purges the views it touched."""
        loop, mark = self._loop, self._hook_mark
        if loop is None or mark is None or not self._views:
            return
        latest = int(txn.execute(_WATERMARK, ())[0][0])
        if latest <= mark:
            return
        low = txn.execute(_LOWEST_SINCE, (mark,))[0][0]
        self._hook_mark = latest
        if low is not None:
            # Queued before the writer hands the forget's caller its result: it runs first.
            with contextlib.suppress(RuntimeError):  # the loop closed: the views went with it
                loop.call_soon_threadsafe(self._purge, int(low))

    def _purge(self, low: int) -> None:
        """Drop every view holding the entry ``low`` or above it (on the loop's thread)."""
        for size, built in list(self._views.items()):
            if size > low:
                del self._views[size]
                self._discard(built)

    def _discard(self, built: Built) -> None:
        built.dead = True
        if built.users == 0:
            built.remove_files()  # now: the erased text leaves the disk before anything else
            task = asyncio.get_running_loop().create_task(built.close())
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def refresh(self) -> int:
        """Drop every view holding a payload a forget erased since its check (by this or
        any other process); returns the watermark now."""
        latest = int((await self._store.rows(_WATERMARK))[0][0])
        for size, built in list(self._views.items()):
            if latest > built.checked:
                low = (await self._store.rows(_LOWEST_SINCE, (built.checked,)))[0][0]
                if low is not None and int(low) < size:
                    del self._views[size]
                    await self._drop(built)
                    continue
                built.checked = latest
        return latest

    # -- inside the lock ----------------------------------------------------------------

    async def _drop(self, built: Built) -> None:
        built.dead = True
        if built.users == 0:
            await built.close()

    async def _get(self, size: int) -> Built:
        for _attempt in range(_BUILD_ATTEMPTS):
            await self.refresh()
            built = self._views.get(size)
            if built is not None:
                self._views.move_to_end(size)
                return built
            built = await self._build(size)
            # A forget that committed after the snapshot: look before serving from it.
            self._views[size] = built
            await self.refresh()
            if size not in self._views:
                continue
            while len(self._views) > self._capacity:
                _, oldest = self._views.popitem(last=False)
                await self._drop(oldest)
            return built
        raise Conflict(
            f"forgets kept committing while the memory as of size {size} was built "
            f"({_BUILD_ATTEMPTS} tries); nothing is served from it: ask again"
        )

    async def _build(self, size: int) -> Built:
        """The view at ``size``, from one read snapshot of the live store."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        embedder = None if self._embedder is None else self._embedder.id
        snapshots = self._store.snapshots(workers=1)
        try:
            rows: _Rows = await snapshots.run(_read(size, embedder))
        finally:
            await snapshots.close()
        if self._hook_mark is None:
            # From the first view on, this process's forgets purge views as they commit.
            self._hook_mark = rows.watermark
            self._store.add_commit_hook(self._on_commit)
        folder = Path(tempfile.mkdtemp(prefix="memseal-as-of-"))
        built = Built(ViewLog(folder), size)
        built.checked = rows.watermark
        built.erased = _erased(size, rows.erased)
        try:
            await built.log.fill(
                rows,
                size,
                self._secret,
                embedder=self._embedder,
                zone=self._zone,
                answerer=self._answerer,
                ranks_as=await ranked_at(self._store, size),
            )
        except BaseException:
            await built.close()
            raise
        self.cold_builds += 1
        return built
