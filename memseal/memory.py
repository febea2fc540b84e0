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
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from datetime import UTC, tzinfo
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from memseal.apps._as_of_build import AS_OF_DDL
from memseal.apps.as_of import ViewCache
from memseal.engine import ANN_MIN, Answerer, Embedder, Engine, default_embedder
from memseal.ledger.choice import DATA_ENV as DATA_ENV
from memseal.ledger.choice import FOLDER_STORE as FOLDER_STORE
from memseal.ledger.choice import STORE_ENV, choose_store
from memseal.ledger.errors import InvalidRequest, StorageError
from memseal.ledger.folder import DATABASE, LOCATION
from memseal.ledger.log import Ledger
from memseal.ledger.opening import (
    Location,
    LogLocation,
    log_store,
    open_log,
    read_location,
    record_location,
    write_location,
)
from memseal.ledger.store import SqlStore
from memseal.ledger.transparency import CheckpointPolicy
from memseal.replay.runs.memo import ddl_for as memo_ddl_for

from ._memory import Memory
from ._options import Clock, OpenOptions, _utcnow
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


# One model per process: it is read-only after loading, and loading takes a moment.
_shared_default_embedder = functools.cache(default_embedder)


def _choose_store(path: str | Path, store: object, *, keys: bool = True) -> LogLocation:
    """Where the log of ``path`` lives (the edge hands :func:`choose_store` the
    environment; see the module docstring)."""
    return choose_store(path, store, env=os.environ, keys=keys).location


def _schema(store: SqlStore) -> None:
    """The tables of the layers above the ledger: the engine's and the memo table."""
    Engine.register_schema(store)
    store.add_schema(memo_ddl_for(store.dialect))
    # The as-of views' forget watermark (the latest redaction) is read on every as-of read.
    store.add_schema(AS_OF_DDL)


async def _open(path: str | Path, options: OpenOptions) -> Memory:
    if not isinstance(path, str | Path):
        raise InvalidRequest(f"`path` must be a folder path, not {type(path).__name__}")
    where = _choose_store(path, options.store)
    # Every option is checked before anything is created: a refused open writes nothing.
    options.check()
    # The default model is loaded (it takes a moment) before anything is made.
    o, wanted = options, options.embedder
    chosen = (await asyncio.to_thread(_shared_default_embedder)) if wanted == "default" else wanted
    opened = await open_log(
        where, key_name=o.key_name, create=o.create, clock=o.clock, origin=o.origin, schema=_schema
    )
    db = opened.store
    try:
        every, interval = o.checkpoint_every, o.checkpoint_interval
        policy = CheckpointPolicy(origin=opened.origin, every=every, interval=interval)
    except BaseException:
        await db.close()
        raise
    ledger = Ledger(db, opened.history[0], policy)
    try:
        engine = await Engine.open(
            ledger,
            db,
            opened.keys.secret,
            clock=o.clock,
            embedder=chosen,
            zone=o.zone,
            answerer=o.answerer,
            progress=o.progress,
            ann=o.ann,
            ranks_as=o.ranks_as,
            currency=o.currency,
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
    views = ViewCache(db, opened.keys.secret, embedder=chosen, zone=o.zone, answerer=o.answerer)
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
    options = OpenOptions(
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
    return _Opening(lambda: _open(path, options))


@contextlib.asynccontextmanager
async def open_audit(path: str | Path, *, store: str | None = None) -> AsyncIterator[Ledger]:
    """A ledger, read-only and without any private key (for auditors).

    ``path`` is a data folder (its SQLite file, or the store ``store`` or
    ``MEMSEAL_STORE`` names) or a PostgreSQL URL itself: an audit needs no keys.
    """
    where = _choose_store(path, store, keys=False)
    if where.url is None and not where.folder.is_dir():
        raise StorageError(f"no memseal data folder at {where.folder}")
    opened = log_store(where)
    await opened.open()
    try:
        yield Ledger(opened, None)
    finally:
        await opened.close()
