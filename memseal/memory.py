"""``memseal.open``: one data folder (keys, database) as a :class:`Memory`.

The data folder always holds the keys (and the service's tokens). The log,
its projections and the memo tables live in the folder's SQLite file by
default, or in PostgreSQL when a store URL is given (``store=``, or the
``MEMSEAL_STORE`` environment variable): see docs/scaling.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import warnings
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Mapping,
    Sequence,
)
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from memseal.engine import ANN_MIN, Answerer, Embedder, Engine, default_embedder
from memseal.engine.currency import check_currency
from memseal.engine.embedders import check_embedder
from memseal.engine.recall import check_answerer
from memseal.ledger.errors import InvalidRequest, MemsealError, StorageError, VerificationError
from memseal.ledger.folder import DATABASE, LOCATION
from memseal.ledger.keys import (
    Keys,
    begin_rotation,
    complete_rotation,
    discard_rotation,
    key_history,
    load_keys,
)
from memseal.ledger.location import is_database_url, parse_database_url
from memseal.ledger.log import Ledger
from memseal.ledger.note import VerifierKey
from memseal.ledger.opening import (
    Location,
    LogLocation,
    check_keys,
    choose_location,
    log_store,
    open_log,
    read_location,
    record_location,
    write_location,
)
from memseal.ledger.store import SqlStore
from memseal.ledger.transparency import CheckpointPolicy
from memseal.replay.evidence import read_proof
from memseal.replay.evidence._as_of_build import AS_OF_DDL
from memseal.replay.evidence.as_of import PYTHON_NAMES, AsOfView, ViewCache, resolve_point
from memseal.replay.runs._mentions import check_facet_mentions
from memseal.replay.runs.identity import ScopeIdentity
from memseal.replay.runs.memo import ddl_for as memo_ddl_for
from memseal.replay.runs.provenance import DerivedCheck
from memseal.replay.runs.run import Run, new_run_id
from memseal.tools import MemoryTools, ToolScope

from ._recorded_tools import RecordedAsyncToolset, RecordedCall, RecordedTools, RecordedToolset

__all__ = [
    "DATABASE",
    "LOCATION",
    "STORE_ENV",
    "Location",
    "Memory",
    "RecordedAsyncToolset",
    "RecordedCall",
    "RecordedTools",
    "RecordedToolset",
    "open",
    "open_audit",
    "read_location",
    "write_location",
]

T = TypeVar("T")

#: The environment variable naming the store when ``store=`` is not given.
STORE_ENV = "MEMSEAL_STORE"
#: ``store=`` naming the data folder's own SQLite file, whatever ``MEMSEAL_STORE`` says.
FOLDER_STORE = "sqlite"
#: The data folder (keys) for ``memseal.open(URL)``, which names only the database.
DATA_ENV = "MEMSEAL_DATA"
Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


# One model per process: it is read-only after loading, and loading takes a moment.
_shared_default_embedder = functools.cache(default_embedder)


class Memory:
    """An open memseal instance: its ledger, its memory engine, tools and durable runs."""

    def __init__(
        self,
        where: LogLocation,
        keys: Keys,
        ledger: Ledger,
        engine: Engine,
        history: list[VerifierKey],
        *,
        views: ViewCache | None = None,
    ) -> None:
        self.folder = where.folder
        #: Where the log lives, fit to print: the database file, or the store URL
        #: with its password hidden.
        self.location = where.display
        self._where = where
        self._keys = keys
        self.ledger = ledger
        self.engine = engine
        # Shared with the store's key source and every run: see _folder_key.
        self._history = history
        self._closed = False
        # The runs this memory opened (a one-shot run holds no lease): closing the memory
        # closes them, so no lease outlives it. Weak: a closed run dropped by its host goes.
        self._runs: weakref.WeakSet[Run] = weakref.WeakSet()
        self._token = f"memory-{secrets.token_hex(8)}"
        # Built views of the past (as_of), kept warm; closed with the memory.
        self._views = views if views is not None else ViewCache(ledger.store, keys.secret)

    @property
    def vkey(self) -> str:
        """The current signing key's public half, as a C2SP vkey line."""
        # The store's: another process may have rotated the key since this one opened.
        return self.ledger.store.signer.verifier.text

    @property
    def trust_root(self) -> str:
        """The ledger's first key: what an auditor trusts to verify from the start.

        Equal to :attr:`vkey` until a key rotation; afterwards the chain of
        ``key_rotated`` entries leads from it to the current key.
        """
        return self.ledger.trust_root.text

    async def key_history(self) -> list[VerifierKey]:
        """The ledger's keys, oldest first, read from ``keys/history`` now and checked
        against the signed chain of ``key_rotated`` entries.

        Exports list these keys, and a long-running server exports long after it
        opened (a rotation may have extended the file since): a file cut or edited
        meanwhile is refused here, as at open, rather than handed to an auditor.
        """
        history = await asyncio.to_thread(key_history, self.folder)
        await check_keys(self.ledger.store, history, self.folder)
        return history

    async def close(self) -> None:
        """Close the runs this memory opened (releasing their leases), then the stores."""
        self._closed = True
        try:
            for run in list(self._runs):
                # The strict check belongs to the run's own close; here only the lease.
                with contextlib.suppress(MemsealError):
                    await run.close(check=False)
            self._runs.clear()
            await self._views.close()
            # A ledger begun by this open may have its first entry now: record its identity.
            with contextlib.suppress(StorageError):
                await record_location(self._where, self.ledger.store)
            await self.engine.close()
        finally:
            await self.ledger.close()

    def tools(
        self,
        scope: ToolScope | None = None,
        *,
        run_id: str | None = None,
        mode: str = "resume",
        fork: bool = False,
        lifecycle: str | None = None,
    ) -> RecordedTools:
        """The seven memory tools for one host-fixed scope (default: the root, everything),
        every call recorded as a signed ``memory_tool_call`` entry with its memo.

        Without ``run_id`` each call is a fresh one-call run; with it, every call is the
        next step of that run (opened in ``mode``, with ``fork``, as :meth:`run` does).
        ``tools.last_call`` names the run and step of the latest call.
        """
        tools = MemoryTools(self.engine, scope)
        if run_id is None:
            if mode != "resume" or fork:
                raise InvalidRequest(
                    "`mode` and `fork` choose how a named run resumes: give `run_id`"
                )
            return RecordedTools(self, tools)
        run = self._run(run_id, tools, mode=mode, fork=fork, lifecycle=lifecycle)
        return RecordedTools(self, tools, run)

    def run(
        self,
        run_id: str | None = None,
        scope: ToolScope | None = None,
        *,
        mode: str = "resume",
        fork: bool = False,
        lease_ttl: float = 15.0,
        oneshot: bool = False,
        lifecycle: str | None = None,
    ) -> Run:
        """A durable run: every call recorded as a signed entry, replayed from its memo.

        ``run_id`` names the run (a fresh one when None: see ``run.run_id``);
        ``mode`` is ``record``, ``resume`` (default), ``strict`` or
        ``revalidate``; ``fork=True`` lets a resumed run that diverges go live
        from there (recorded as a signed ``run_forked`` entry) instead of failing.
        A run belongs to the whole scope that opened it: opening it with a scope
        that differs in any field raises :class:`Conflict`. ``lifecycle`` names what
        the run is to the lifecycle layer (signed into its ``run_started`` entry).
        """
        return self._run(
            run_id,
            MemoryTools(self.engine, scope),
            mode=mode,
            fork=fork,
            lease_ttl=lease_ttl,
            oneshot=oneshot,
            lifecycle=lifecycle,
        )

    def _run(
        self,
        run_id: str | None,
        tools: MemoryTools,
        *,
        mode: str = "resume",
        fork: bool = False,
        lease_ttl: float = 15.0,
        oneshot: bool = False,
        lifecycle: str | None = None,
    ) -> Run:
        if self._closed:
            raise InvalidRequest(f"the memory at {self.location} is closed")
        run = Run(
            run_id=new_run_id() if run_id is None else run_id,
            mode=mode,
            tools=tools,
            scope=ScopeIdentity.of(tools.scope),
            ledger=self.ledger,
            store=self.ledger.store,
            secret=self._keys.secret,
            keys=self._history,
            fork=fork,
            lease_ttl=lease_ttl,
            oneshot=oneshot,
            owner=self._token,
            lifecycle=lifecycle,
        )
        if not oneshot:
            self._runs.add(run)
        return run

    async def call(
        self, name: str, arguments: Any = None, *, scope: ToolScope | None = None
    ) -> tuple[str, Any]:
        """One recorded call outside any named run: returns (the fresh run id, the result)."""
        run = self.run(None, scope, mode="record", oneshot=True)
        try:
            return run.run_id, await run.call(name, arguments)
        finally:
            await run.close()

    async def as_of(
        self,
        size: int | None = None,
        *,
        at: str | datetime | None = None,
        run: str | None = None,
        step: int | None = None,
        names: Mapping[str, str] = PYTHON_NAMES,
    ) -> AsOfView:
        """A read-only view of the memory as it stood at tree ``size``, at time ``at``
        (RFC 3339), or when run ``run`` made step ``step``; its ``tools(scope)`` serve
        the read tools, unrecorded. A later forget still applies. Raises
        :class:`InvalidRequest` naming the field for a bad point (see docs/history.md);
        ``names`` spells the fields as the caller's own interface does (HTTP, CLI)."""
        if self._closed:
            raise InvalidRequest(f"the memory at {self.location} is closed")
        point = await resolve_point(
            self.ledger.store, size=size, at=at, run=run, step=step, names=names
        )
        return AsOfView(self._views, point)

    async def verify(
        self,
        trust: str | None = None,
        *,
        checkpoints: Sequence[str] = (),
        witnesses: Sequence[str] = (),
        quorum: int | None = None,
        deep: bool = False,
    ) -> None:
        """What ``memseal verify`` checks: the ledger (against ``trust``, default the
        first key), the memo table against the signed calls and, with ``deep``, the
        projections against a rebuild from the log. With ``witnesses`` (witness vkeys),
        every one of ``checkpoints`` must carry ``quorum`` (default 1) valid witness
        cosignatures. Returns None or raises :class:`VerificationError`."""
        # The derived tables are collected on the ledger's own scan (one read and one
        # decode of the log), then checked once every entry passed.
        derived = DerivedCheck()
        summary = await self.ledger.verify(
            trust, checkpoints=checkpoints, witnesses=witnesses, quorum=quorum, observe=derived.add
        )
        await derived.check(self.ledger.store)
        if deep:
            check = await self.engine.check_projections()
            if not check.matches:
                raise VerificationError(check.line(), seq=check.seq, step="projection")
            await check_facet_mentions(self.ledger.store, summary.size, self.engine.facet_ref)

    async def rotate_key(self, name: str | None = None) -> str:
        """Hand the ledger to a new signing key; returns the new vkey.

        The old key signs a ``key_rotated`` entry naming the new one and, with
        the new key, the checkpoint cut in the same transaction; then its
        private half is deleted. Auditors keep trusting the first key.
        """
        # Another process on this ledger may have rotated since: start from the folder's key.
        self._keys = await asyncio.to_thread(load_keys, self.folder)
        new = await asyncio.to_thread(begin_rotation, self.folder, name or self._keys.signer.name)
        try:
            await self.ledger.rotate_key(new)
        except BaseException:
            await asyncio.to_thread(discard_rotation, self.folder)
            raise
        self._keys = await asyncio.to_thread(complete_rotation, self.folder, self._keys, new)
        self._history.append(new.verifier)
        return self._keys.vkey

    async def prove_read(
        self, run_id: str, step: int, *, disclose: Literal["reach", "all"] = "reach"
    ) -> bytes:
        """The read proof (``memseal/read-proof@v1`` bytes) of step ``step`` of run
        ``run_id``: checked offline, with no data folder, by
        :func:`memseal.replay.evidence.read_proof.verify_read` (docs/auditing.md).

        The proof is not verified here (``memseal prove-read`` and the read-proof route
        do verify before handing one out): pass it to ``verify_read`` first. A read
        recorded on PostgreSQL is re-ranked with ``ts_rank`` as the server computed it."""
        proof = await read_proof.prove_read(
            self.ledger,
            run_id,
            step,
            embedders=await self.engine.embedders(),
            disclose=disclose,
        )
        return read_proof.encode_read_proof(proof)

    async def __aenter__(self) -> Memory:
        return self

    def __del__(self) -> None:
        # A memory dropped open holds its runs' leases until they expire (another process
        # waits out the lease before resuming them): say so where the host can see it.
        if not getattr(self, "_closed", True):
            warnings.warn(
                f"memseal memory at {self.location} was never closed: its run leases are "
                "held until they expire; use `async with memseal.open(...)` or `await "
                "memory.close()`",
                ResourceWarning,
                stacklevel=2,
            )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _choose_store(path: str | Path, store: object) -> LogLocation:
    """Where the log of ``path`` lives: ``store``, else ``MEMSEAL_STORE`` (the edge reads
    the environment; see the module docstring)."""
    field = "store"
    if store == FOLDER_STORE:
        # The folder's own SQLite file, whatever the environment names (the migrate's source).
        store = None
    elif store is None and not is_database_url(path):
        from_env = os.environ.get(STORE_ENV, "")
        if from_env and not is_database_url(from_env):
            raise InvalidRequest(f"{STORE_ENV} must be a postgresql:// URL (or unset)")
        if from_env:
            store, field = from_env, STORE_ENV
    return choose_location(
        path,
        store,
        data=os.environ.get(DATA_ENV, ""),
        store_field=field,
        data_hint=f"set {DATA_ENV} to the folder",
    )


def _schema(store: SqlStore) -> None:
    """The tables of the layers above the ledger: the engine's and the memo table."""
    Engine.register_schema(store)
    store.add_schema(memo_ddl_for(store.dialect))
    # The as-of views' forget watermark (the latest redaction) is read on every as-of read.
    store.add_schema(AS_OF_DDL)


async def _open(
    path: str | Path,
    *,
    store: str | None = None,
    key_name: str | None = None,
    create: bool = True,
    clock: Clock = _utcnow,
    origin: str | None = None,
    checkpoint_every: int | None = 1000,
    checkpoint_interval: float | None = 60.0,
    embedder: Embedder | Literal["default"] | None = "default",
    zone: tzinfo = UTC,
    answerer: Answerer | None = None,
    progress: Callable[[int, int], None] | None = None,
    ann: int | None = ANN_MIN,
    ranks_as: str | None = None,  # a re-recording on SQLite of reads PostgreSQL ranked
    currency: bool = True,
) -> Memory:
    if not isinstance(path, str | Path):
        raise InvalidRequest(f"`path` must be a folder path, not {type(path).__name__}")
    where = _choose_store(path, store)
    if origin is not None and (not isinstance(origin, str) or not origin.strip()):
        raise InvalidRequest("`origin` must be non-empty text")
    # Every option is checked before anything is created: a refused open writes nothing.
    CheckpointPolicy(
        origin=origin or "memseal", every=checkpoint_every, interval=checkpoint_interval
    )
    if not callable(clock):
        raise InvalidRequest("`clock` must be a callable returning an aware datetime")
    if progress is not None and not callable(progress):
        raise InvalidRequest("`progress` must be a callable taking (done, total) or None")
    if ann is not None and (isinstance(ann, bool) or not isinstance(ann, int) or ann < 0):
        raise InvalidRequest("`ann` must be a count of memories (0 or more) or None")
    if key_name is not None and not isinstance(key_name, str):
        raise InvalidRequest("`key_name` must be text")
    check_currency(currency)
    if not isinstance(zone, tzinfo):
        raise InvalidRequest("`zone` must be a tzinfo (e.g. zoneinfo.ZoneInfo('Europe/Paris'))")
    # Checked, and the default model loaded (it takes a moment), before anything is made.
    wanted, answerer = check_embedder(embedder), check_answerer(answerer)
    chosen = (await asyncio.to_thread(_shared_default_embedder)) if wanted == "default" else wanted
    opened = await open_log(
        where, key_name=key_name, create=create, clock=clock, origin=origin, schema=_schema
    )
    db = opened.store
    try:
        policy = CheckpointPolicy(
            origin=opened.origin, every=checkpoint_every, interval=checkpoint_interval
        )
    except BaseException:
        await db.close()
        raise
    ledger = Ledger(db, opened.history[0], policy)
    try:
        engine = await Engine.open(
            ledger,
            db,
            opened.keys.secret,
            clock=clock,
            embedder=chosen,
            zone=zone,
            answerer=answerer,
            progress=progress,
            ann=ann,
            ranks_as=ranks_as,
            currency=currency,
        )
    except BaseException:
        await ledger.close()
        raise
    try:
        await record_location(where, db)
    except BaseException:
        await engine.close()
        await ledger.close()
        raise
    ledger.start()
    views = ViewCache(db, opened.keys.secret, embedder=chosen, zone=zone, answerer=answerer)
    return Memory(where, opened.keys, ledger, engine, opened.history, views=views)


class _Opening(Awaitable[Memory]):
    """What :func:`open` returns: ``async with`` it, or ``await`` it and close yourself."""

    def __init__(self, coro: Callable[[], Coroutine[Any, Any, Memory]]) -> None:
        self._coro = coro
        self._memory: Memory | None = None

    def __await__(self) -> Generator[Any, None, Memory]:
        return self._coro().__await__()

    async def __aenter__(self) -> Memory:
        self._memory = await self._coro()
        return self._memory

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._memory is not None:
            await self._memory.close()


def open(
    path: str | Path,
    *,
    store: str | None = None,
    key_name: str | None = None,
    create: bool = True,
    clock: Clock = _utcnow,
    origin: str | None = None,
    checkpoint_every: int | None = 1000,
    checkpoint_interval: float | None = 60.0,
    embedder: Embedder | Literal["default"] | None = "default",
    zone: tzinfo = UTC,
    answerer: Answerer | None = None,
    progress: Callable[[int, int], None] | None = None,
    ann: int | None = ANN_MIN,
    currency: bool = True,
) -> _Opening:
    """Open (creating on first use) the data folder at ``path``.

    ``store`` puts the log in PostgreSQL (``postgresql://user@host/db?schema=name``;
    default: the ``MEMSEAL_STORE`` environment variable, else the folder's SQLite
    file; ``"sqlite"``: that file, whatever the variable says); the keys stay in the
    folder either way.

    ``origin`` names the log in its checkpoints (default: the key name; fixed
    when the ledger is made). A checkpoint is cut every ``checkpoint_every``
    entries and every ``checkpoint_interval`` seconds when the log has grown
    (None turns either off), and on demand. ``embedder`` serves semantic and
    hybrid search (default: the offline MiniLM model when installed; None
    serves exact search only); ``zone`` is the host's time zone, in which
    dates in memories and ``refers_to`` are read. ``progress(done, total)`` is
    called as the projections are rebuilt, when the open has to (a new or
    migrated log, an older layout), and as the HNSW index is built. Past ``ann``
    live memories (default 20,000), semantic search on the SQLite store goes
    through an HNSW index that proposes candidates, each then checked against the
    call's scope and scored exactly (None: always the exact scan). ``currency=False``
    turns off the currency rule: reads no longer put a newer memory above an older one
    about the same subject, nor mark hits (docs/engine.md, "What is current").
    """
    return _Opening(
        lambda: _open(
            path,
            store=store,
            key_name=key_name,
            create=create,
            clock=clock,
            origin=origin,
            checkpoint_every=checkpoint_every,
            checkpoint_interval=checkpoint_interval,
            embedder=embedder,
            zone=zone,
            answerer=answerer,
            progress=progress,
            ann=ann,
            currency=currency,
        )
    )


@contextlib.asynccontextmanager
async def open_audit(path: str | Path, *, store: str | None = None) -> AsyncIterator[Ledger]:
    """A ledger, read-only and without any private key (for auditors).

    ``path`` is a data folder (its SQLite file, or the store ``store`` or
    ``MEMSEAL_STORE`` names) or a PostgreSQL URL itself: an audit needs no keys.
    """
    if is_database_url(path):
        if store is not None:
            raise InvalidRequest("give the PostgreSQL URL once: as `path` or as `store`")
        where = LogLocation(folder=Path("."), url=parse_database_url(str(path), "path"))
    else:
        where = _choose_store(path, store)
        if where.url is None and not where.folder.is_dir():
            raise StorageError(f"no memseal data folder at {where.folder}")
    opened = log_store(where)
    await opened.open()
    try:
        yield Ledger(opened, None)
    finally:
        await opened.close()
