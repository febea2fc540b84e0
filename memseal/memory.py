"""``memseal.open``: one data folder (keys, database) as a :class:`Memory`."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from memseal.ledger.errors import InvalidRequest, KeyFileError, StorageError
from memseal.ledger.keys import Keys, create_keys, key_files_exist, load_keys
from memseal.ledger.ledger import Ledger
from memseal.ledger.sqlite import SqliteLogStore

__all__ = ["DATABASE", "Memory", "SyncMemory", "open", "open_audit", "open_sync"]

T = TypeVar("T")

DATABASE = "ledger.db"
Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Memory:
    """An open memseal instance: its ledger, its keys' public half, and (later) its tools."""

    def __init__(self, folder: Path, keys: Keys, ledger: Ledger) -> None:
        self.folder = folder
        self._keys = keys
        self.ledger = ledger

    @property
    def vkey(self) -> str:
        """The ledger's public key as a C2SP vkey line: what an auditor trusts."""
        return self._keys.vkey

    async def close(self) -> None:
        await self.ledger.store.close()

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _ledger_has_entries(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            row = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entries'"
            ).fetchone()
            return (
                row is not None
                and conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is not None
            )
    except sqlite3.Error as exc:
        raise StorageError(f"cannot read {db}: {exc}") from exc


def _prepare(folder: Path, key_name: str | None, create: bool) -> Keys:
    if folder.exists() and not folder.is_dir():
        raise InvalidRequest(f"`path` {folder} exists and is not a folder")
    if not folder.exists():
        if not create:
            raise StorageError(f"no memseal data folder at {folder}")
        try:
            folder.mkdir(mode=0o700, parents=True)
        except OSError as exc:
            raise StorageError(f"cannot create data folder {folder}: {exc.strerror}") from exc
    if key_files_exist(folder):
        return load_keys(folder)
    if _ledger_has_entries(folder / DATABASE):
        raise KeyFileError(
            f"{folder} has a ledger but no keys; restore keys/ from a backup "
            "(memseal never makes a new key for an existing ledger)"
        )
    if not create:
        raise KeyFileError(f"{folder} has no keys")
    return create_keys(folder, key_name or f"memseal-{secrets.token_hex(4)}")


async def _open(path: str | Path, *, key_name: str | None, create: bool, clock: Clock) -> Memory:
    if not isinstance(path, str | Path):
        raise InvalidRequest(f"`path` must be a folder path, not {type(path).__name__}")
    if isinstance(path, str) and path.startswith(("postgresql://", "postgres://")):
        raise InvalidRequest("`path`: the PostgreSQL store is not available yet")
    folder = Path(path)
    keys = await asyncio.to_thread(_prepare, folder, key_name, create)
    store = SqliteLogStore(folder / DATABASE, keys.signer, clock=clock)
    await store.open()
    return Memory(folder, keys, Ledger(store, keys))


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
    key_name: str | None = None,
    create: bool = True,
    clock: Clock = _utcnow,
) -> _Opening:
    """Open (creating on first use) the data folder at ``path``."""
    return _Opening(lambda: _open(path, key_name=key_name, create=create, clock=clock))


@contextlib.asynccontextmanager
async def open_audit(path: str | Path) -> AsyncIterator[Ledger]:
    """The ledger of a data folder, read-only and without its private key (for auditors)."""
    folder = Path(path)
    if not folder.is_dir():
        raise StorageError(f"no memseal data folder at {folder}")
    store = SqliteLogStore(folder / DATABASE, None)
    await store.open()
    try:
        yield Ledger(store, None)
    finally:
        await store.close()


class _SyncLedger:
    def __init__(self, owner: SyncMemory) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._owner._memory.ledger, name)
        if not callable(method) or name == "scan":
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._owner._call(method(*args, **kwargs))

        return call


class SyncMemory:
    """The blocking facade for hosts without an event loop (a private loop thread)."""

    def __init__(self, path: str | Path, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memseal-sync", daemon=True
        )
        self._thread.start()
        try:
            self._memory: Memory = self._call(_open(path, **options))
        except BaseException:
            self._stop()
            raise
        self.ledger = _SyncLedger(self)

    @property
    def vkey(self) -> str:
        return self._memory.vkey

    @property
    def folder(self) -> Path:
        return self._memory.folder

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._memory.close())
        finally:
            self._stop()

    def __enter__(self) -> SyncMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_sync(
    path: str | Path,
    *,
    key_name: str | None = None,
    create: bool = True,
    clock: Clock = _utcnow,
) -> SyncMemory:
    """Like :func:`open`, for code without an event loop."""
    return SyncMemory(path, key_name=key_name, create=create, clock=clock)
