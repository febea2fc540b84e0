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
import inspect
import os
import secrets
import sqlite3
import threading
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Sequence
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar, cast

import msgspec

from memseal.engine import Answerer, Embedder, Engine, default_embedder
from memseal.ledger.errors import (
    InvalidRequest,
    KeyFileError,
    MemsealError,
    StorageError,
    VerificationError,
)
from memseal.ledger.folder import DATABASE
from memseal.ledger.keys import (
    Keys,
    begin_rotation,
    complete_rotation,
    create_keys,
    discard_rotation,
    key_files_exist,
    key_history,
    load_keys,
    pending_rotation,
    secure_folder,
    signers_on_disk,
)
from memseal.ledger.ledger import KEY_ROTATED, Ledger
from memseal.ledger.location import (
    DatabaseUrl,
    hide_password,
    is_database_url,
    parse_database_url,
)
from memseal.ledger.note import NoteSigner, VerifierKey
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.store import SqlStore, WriteTxn
from memseal.ledger.transparency import CheckpointPolicy
from memseal.replay._mentions import check_facet_mentions
from memseal.replay.identity import ScopeIdentity
from memseal.replay.memo import ddl_for as memo_ddl_for
from memseal.replay.provenance import verify_derived
from memseal.replay.run import Run, new_run_id
from memseal.tools import MemoryTools, ToolScope, runner_for

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
    "SyncMemory",
    "open",
    "open_audit",
    "open_sync",
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
#: The file in a data folder naming where its ledger lives ("sqlite", or the store URL
#: with its password hidden), so its key never signs two ledgers.
LOCATION = "ledger.location"
Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@functools.cache
def _shared_default_embedder() -> Embedder | None:
    # One model per process: it is read-only after loading, and loading takes a moment.
    return default_embedder()


class Memory:
    """An open memseal instance: its ledger, its memory engine, tools and durable runs."""

    def __init__(
        self,
        folder: Path,
        keys: Keys,
        ledger: Ledger,
        engine: Engine,
        history: list[VerifierKey],
        location: str | None = None,
    ) -> None:
        self.folder = folder
        #: Where the log lives, fit to print: the database file, or the store URL
        #: with its password hidden.
        self.location = location if location is not None else str(folder / DATABASE)
        self._url: DatabaseUrl | None = None
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
        await _check_first_key(self.ledger.store, history[0], self.folder)
        await _check_key_chain(self.ledger.store, history, self.folder)
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
            # A ledger begun by this open may have its first entry now: record its identity.
            with contextlib.suppress(StorageError):
                await _record_location(self.folder, self._url, self.ledger.store)
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
        return RecordedTools(self, tools, self._run(run_id, tools, mode=mode, fork=fork))

    def run(
        self,
        run_id: str | None = None,
        scope: ToolScope | None = None,
        *,
        mode: str = "resume",
        fork: bool = False,
        lease_ttl: float = 15.0,
        oneshot: bool = False,
    ) -> Run:
        """A durable run: every call recorded as a signed entry, replayed from its memo.

        ``run_id`` names the run (a fresh one when None: see ``run.run_id``);
        ``mode`` is ``record``, ``resume`` (default), ``strict`` or
        ``revalidate``; ``fork=True`` lets a resumed run that diverges go live
        from there (recorded as a signed ``run_forked`` entry) instead of failing.
        A run belongs to the whole scope that opened it: opening it with a scope
        that differs in any field raises :class:`Conflict`.
        """
        return self._run(
            run_id,
            MemoryTools(self.engine, scope),
            mode=mode,
            fork=fork,
            lease_ttl=lease_ttl,
            oneshot=oneshot,
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

    async def verify(
        self, trust: str | None = None, *, checkpoints: Sequence[str] = (), deep: bool = False
    ) -> None:
        """What ``memseal verify`` checks: the ledger (against ``trust``, default the
        first key), the memo table against the signed calls and, with ``deep``, the
        projections against a rebuild from the log. Returns None or raises
        :class:`VerificationError`."""
        summary = await self.ledger.verify(trust, checkpoints=checkpoints)
        await verify_derived(self.ledger.store, summary.size)
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


def _sqlite_genesis(db: Path) -> bytes | None:
    """The leaf hash of the file's first entry (the ledger's identity), None if it has none."""
    if not db.exists():
        return None
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            row = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entries'"
            ).fetchone()
            if row is None:
                return None
            first = conn.execute("SELECT hash FROM entries WHERE seq = 0").fetchone()
            return None if first is None else bytes(first[0])
    except sqlite3.Error as exc:
        raise StorageError(f"cannot read {db}: {exc}") from exc


def _postgres_genesis(url: DatabaseUrl) -> bytes | None:
    """The leaf hash of the store's first entry, None if it has none (or no tables)."""
    import psycopg
    from psycopg import sql

    try:
        with psycopg.connect(url.dsn, autocommit=True, connect_timeout=30) as conn:
            table = (
                sql.Identifier("entries")
                if url.schema is None
                else sql.Identifier(url.schema, "entries")
            )
            found = conn.execute(
                "SELECT to_regclass(%s)",
                ("entries" if url.schema is None else f'"{url.schema}".entries',),
            ).fetchone()
            if found is None or found[0] is None:
                return None
            first = conn.execute(
                sql.SQL("SELECT hash FROM {} WHERE seq = 0").format(table)
            ).fetchone()
            return None if first is None else bytes(first[0])
    except psycopg.Error as exc:
        said = hide_password(str(exc), url.dsn)
        raise StorageError(f"cannot reach the store {url.display}: {said}") from None


def _choose_store(path: str | Path, store: object) -> tuple[Path, DatabaseUrl | None]:
    """The data folder and, for PostgreSQL, the parsed store URL (see the module docstring)."""
    if store is not None and not isinstance(store, str):
        raise InvalidRequest(f"`store` must be a postgresql:// URL, not {type(store).__name__}")
    if is_database_url(path):
        if store is not None:
            raise InvalidRequest("give the PostgreSQL URL once: as `path` or as `store`")
        data = os.environ.get(DATA_ENV, "")
        if not data:
            raise InvalidRequest(
                "`path` is a PostgreSQL URL; the signing key stays in a local data folder: "
                f"open(FOLDER, store=URL), or set {DATA_ENV} to the folder"
            )
        return Path(data), parse_database_url(str(path), "path")
    if store == FOLDER_STORE:
        return Path(path), None
    if store is None:
        from_env = os.environ.get(STORE_ENV, "")
        if not from_env:
            return Path(path), None
        if not is_database_url(from_env):
            raise InvalidRequest(f"{STORE_ENV} must be a postgresql:// URL (or unset)")
        return Path(path), parse_database_url(from_env, STORE_ENV)
    return Path(path), parse_database_url(store)


def _new_store(
    folder: Path, url: DatabaseUrl | None, signer: NoteSigner | None, clock: Clock
) -> SqlStore:
    if url is None:
        return SqliteLogStore(folder / DATABASE, signer, clock=clock)
    try:
        from memseal.ledger.postgres import PostgresLogStore
    except ImportError as exc:  # pragma: no cover - psycopg is a dependency
        raise StorageError(f"the PostgreSQL store needs psycopg: {exc}") from exc
    return PostgresLogStore(url.dsn, signer, schema=url.schema, clock=clock)


def _prepare(
    folder: Path, key_name: str | None, create: bool, url: DatabaseUrl | None = None
) -> Keys:
    if folder.exists() and not folder.is_dir():
        raise InvalidRequest(f"`path` {folder} exists and is not a folder")
    if folder.is_dir():
        secure_folder(folder)  # 0700 before anything is read or made in it
    if folder.is_dir() and key_files_exist(folder):
        return load_keys(folder)
    # Asked before anything is made: an unreachable store leaves no folder behind.
    existing = _sqlite_genesis(folder / DATABASE) if url is None else _postgres_genesis(url)
    if existing:
        where = folder if url is None else url.display
        raise KeyFileError(
            f"{where} has a ledger but {folder} has no keys; restore keys/ from a backup "
            "(memseal never makes a new key for an existing ledger)"
        )
    if not folder.exists():
        if not create:
            raise StorageError(f"no memseal data folder at {folder}")
        try:
            folder.mkdir(mode=0o700, parents=True)
        except OSError as exc:
            raise StorageError(f"cannot create data folder {folder}: {exc.strerror}") from exc
    if not create:
        raise KeyFileError(f"{folder} has no keys")
    return create_keys(folder, key_name or f"memseal-{secrets.token_hex(4)}")


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
) -> Memory:
    if not isinstance(path, str | Path):
        raise InvalidRequest(f"`path` must be a folder path, not {type(path).__name__}")
    folder, url = _choose_store(path, store)
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
    if key_name is not None and not isinstance(key_name, str):
        raise InvalidRequest("`key_name` must be text")
    if not isinstance(zone, tzinfo):
        raise InvalidRequest("`zone` must be a tzinfo (e.g. zoneinfo.ZoneInfo('Europe/Paris'))")
    # Loading the default model takes a moment: do it before anything is created.
    chosen = (
        (await asyncio.to_thread(_shared_default_embedder)) if embedder == "default" else embedder
    )
    keys = await asyncio.to_thread(_prepare, folder, key_name, create, url)
    await asyncio.to_thread(_check_location, folder, url)
    db = _new_store(folder, url, keys.signer, clock)
    Engine.register_schema(db)
    db.add_schema(memo_ddl_for(db.dialect))
    await db.open()
    try:
        keys = await _finish_rotation(folder, db, keys)
        history = await asyncio.to_thread(key_history, folder)
        db.set_key_source(functools.partial(_folder_key, folder, history))
        await _check_first_key(db, history[0], folder)
        await _check_key_chain(db, history, folder)
        fixed = await _fix_origin(db, origin or keys.signer.name)
        policy = CheckpointPolicy(
            origin=fixed, every=checkpoint_every, interval=checkpoint_interval
        )
    except BaseException:
        await db.close()
        raise
    ledger = Ledger(db, history[0], policy)
    try:
        engine = await Engine.open(
            ledger,
            db,
            keys.secret,
            clock=clock,
            embedder=chosen,
            zone=zone,
            answerer=answerer,
            progress=progress,
        )
    except BaseException:
        await ledger.close()
        raise
    try:
        await _record_location(folder, url, db)
    except BaseException:
        await engine.close()
        await ledger.close()
        raise
    ledger.start()
    memory = Memory(
        folder, keys, ledger, engine, history, location=None if url is None else url.display
    )
    memory._url = url
    return memory


class Location(msgspec.Struct, frozen=True, kw_only=True):
    """What a folder's :data:`LOCATION` file says: where its ledger lives, and which it is."""

    store: str
    """``"sqlite"`` (the folder's file) or the store's URL, password hidden."""
    genesis: str | None = None
    """The hex leaf hash of the ledger's first entry: its identity, wherever it lives."""


def read_location(folder: Path) -> Location | None:
    marker = folder / LOCATION
    try:
        lines = marker.read_text(encoding="utf-8").split() if marker.exists() else None
    except OSError as exc:
        raise StorageError(f"cannot read {marker}: {exc.strerror}") from exc
    if not lines:
        return None
    return Location(store=lines[0], genesis=lines[1] if len(lines) > 1 else None)


def write_location(folder: Path, location: Location) -> None:
    """Record where the folder's ledger lives (after an open or a migration succeeded)."""
    marker = folder / LOCATION
    text = location.store + "\n" + (f"{location.genesis}\n" if location.genesis else "")
    try:
        marker.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StorageError(f"cannot write {marker}: {exc.strerror}") from exc


def _check_location(folder: Path, url: DatabaseUrl | None) -> None:
    """Refuse to let one folder's key sign a second ledger (see :data:`LOCATION`).

    A folder whose ledger moved to PostgreSQL (``memseal migrate``) keeps its old
    SQLite file; opened without the store, it would go on appending there. A
    folder opened on an empty store while its ledger lives elsewhere (its own
    file, or another store) would start a new ledger with the same key. Both
    would fork the history a verifier trusts; both are refused. Nothing is
    written here: the file is updated once the open has succeeded.
    """
    said = read_location(folder)
    if url is None:
        if said is not None and said.store != "sqlite":
            raise StorageError(
                f"the ledger of {folder} moved to {said.store}; open it with that store "
                f"(store=URL, --store or {STORE_ENV}); {DATABASE} here is a frozen copy"
            )
        return
    genesis = said.genesis if said is not None else None
    if said is None or (said.store == "sqlite" and genesis is None):
        first = _sqlite_genesis(folder / DATABASE)
        genesis = None if first is None else first.hex()
    if genesis is None:
        if said is not None and said.store not in ("sqlite", url.display):
            there = _postgres_genesis(url)
            if there is None:
                raise StorageError(
                    f"the ledger of {folder} lives in {said.store}; {url.display} is another "
                    "store: open the folder with the store it names"
                )
        return
    there = _postgres_genesis(url)
    if there is None:
        home = DATABASE if said is None or said.store == "sqlite" else said.store
        raise StorageError(
            f"the ledger of {folder} is in {home}; a new ledger in {url.display} would be "
            "signed by the same key"
            + (
                f": move it with memseal migrate --from {folder} --to URL"
                if home == DATABASE
                else ""
            )
        )
    if there.hex() != genesis:
        raise StorageError(
            f"{url.display} holds another ledger than the one of {folder} "
            f"(first entry {there.hex()[:16]}, the folder's {genesis[:16]})"
        )


async def _record_location(folder: Path, url: DatabaseUrl | None, store: SqlStore) -> None:
    genesis = None
    if (await store.head()).size > 0:
        genesis = (await store.read(0)).leaf_hash.hex()
    wanted = Location(store="sqlite" if url is None else url.display, genesis=genesis)
    if await asyncio.to_thread(read_location, folder) != wanted:
        await asyncio.to_thread(write_location, folder, wanted)


def _folder_key(folder: Path, history: list[VerifierKey], key_id: str) -> NoteSigner | None:
    """The signer of ``key_id`` if the folder holds it (a rotation by another process).

    Its public half joins ``history``, the list this instance's runs check memos
    against, so the entries it signs from now on verify there too.
    """
    signer = next((s for s in signers_on_disk(folder) if s.key_id.hex() == key_id), None)
    if signer is not None and signer.verifier not in history:
        history.append(signer.verifier)
    return signer


async def _check_first_key(store: SqlStore, first: VerifierKey, folder: Path) -> None:
    """Refuse a data folder whose keys are not the ledger's (another ledger's folder)."""
    if (await store.head()).size == 0:
        return
    signed_by = (await store.read(0)).entry().key
    if signed_by != first.key_id.hex():
        raise KeyFileError(
            f"the keys in {folder} are not this ledger's (its first entry is signed by key "
            f"{signed_by}, the folder's first key is {first.key_id.hex()}); "
            "open the ledger with its own data folder"
        )


def _holds(store: SqlStore) -> str:
    """Which entries' bytes hold a given byte string (one ``?``), in the store's dialect."""
    return "instr(leaf, ?) > 0" if store.dialect == "sqlite" else "position(? in leaf) > 0"


async def _check_key_chain(store: SqlStore, history: list[VerifierKey], folder: Path) -> None:
    """Refuse a ``keys/history`` that is not the ledger's signed chain of keys.

    Exports list the keys from it and a rotation appends to it: a history cut or
    edited would hand auditors too few keys and extend a list that no longer
    leads from the trust root to the current key.
    """
    said = await store.rows("SELECT value FROM meta WHERE key = 'signing_key'")
    if not said and len(history) == 1:
        return  # never rotated: the first key is the whole chain (checked above)
    rows = await store.rows(
        f"SELECT seq FROM entries WHERE {_holds(store)} ORDER BY seq", (b'"kind":"key_rotated"',)
    )
    chain = [history[0].text]
    for (seq,) in rows:
        entry = (await store.read(int(seq))).entry()
        if entry.kind != KEY_ROTATED:
            continue
        try:
            chain.append(str(msgspec.json.decode(entry.body)["vkey"]))
        except (msgspec.DecodeError, KeyError, TypeError) as exc:
            raise StorageError(
                f"the key_rotated entry at seq {seq} names no key; run memseal verify"
            ) from exc
    listed = [key.text for key in history]
    if listed == chain:
        return
    # One key more in the log than in the file is another process's rotation between its
    # commit and its history line, its new key still in the folder: not a cut file.
    rotating = await asyncio.to_thread(signers_on_disk, folder)
    if listed == chain[:-1] and chain[-1] in [s.verifier.text for s in rotating]:
        return
    raise KeyFileError(
        f"{folder / 'keys' / 'history'} lists {len(listed)} key(s) but the ledger's signed "
        f"chain of key_rotated entries has {len(chain)}: the file was cut or edited. "
        "Restore it from a backup, or write these lines back, oldest first: " + " | ".join(chain)
    )


async def _finish_rotation(folder: Path, store: SqlStore, keys: Keys) -> Keys:
    """Complete or discard a key rotation a crash interrupted (see ledger.keys)."""
    pending = await asyncio.to_thread(pending_rotation, folder)
    if pending is None:
        return keys
    holds = _holds(store)
    named = await store.rows(
        f"SELECT seq FROM entries WHERE {holds} ORDER BY seq DESC LIMIT 1",
        (b'"kind":"key_rotated"',),
    )
    mention = await store.rows(
        f"SELECT seq FROM entries WHERE {holds} LIMIT 1",
        (pending.verifier.text.encode(),),
    )
    if named and mention:
        store.use_signer(pending)
        return await asyncio.to_thread(complete_rotation, folder, keys, pending)
    await asyncio.to_thread(discard_rotation, folder)
    return keys


async def _fix_origin(store: SqlStore, wanted: str) -> str:
    """The checkpoint origin is fixed when the ledger is made; later opens must agree."""
    rows = await store.rows("SELECT value FROM meta WHERE key = 'origin'")
    if rows:
        stored = str(rows[0][0])
        if stored != wanted and wanted != store.signer.name:
            raise InvalidRequest(f"`origin` {wanted!r}: this ledger's origin is {stored!r}")
        return stored
    CheckpointPolicy(origin=wanted)  # refuse a malformed origin before storing it

    def command(txn: WriteTxn) -> None:
        txn.execute(
            "INSERT INTO meta (key, value) VALUES ('origin', ?) ON CONFLICT DO NOTHING", (wanted,)
        )

    await store.run(command)
    return (await store.rows("SELECT value FROM meta WHERE key = 'origin'"))[0][0]  # type: ignore[no-any-return]


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
    migrated log, an older layout).
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
        url: DatabaseUrl | None = parse_database_url(str(path), "path")
        folder = Path(".")
    else:
        folder, url = _choose_store(path, store)
        if url is None and not folder.is_dir():
            raise StorageError(f"no memseal data folder at {folder}")
    opened = _new_store(folder, url, None, _utcnow)
    await opened.open()
    try:
        yield Ledger(opened, None)
    finally:
        await opened.close()


class _SyncLedger:
    def __init__(self, owner: SyncMemory) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._owner._memory.ledger, name)
        if name == "scan" or name.startswith("_"):
            raise AttributeError(f"{name} is not offered by the blocking facade")
        if not inspect.iscoroutinefunction(method):
            return method

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
        self._bound: list[RecordedTools] = []

    @property
    def vkey(self) -> str:
        return self._memory.vkey

    @property
    def trust_root(self) -> str:
        return self._memory.trust_root

    @property
    def folder(self) -> Path:
        return self._memory.folder

    def rotate_key(self, name: str | None = None) -> str:
        return self._call(self._memory.rotate_key(name))

    def toolset(
        self,
        scope: ToolScope | None = None,
        *,
        run_id: str | None = None,
        mode: str = "resume",
        fork: bool = False,
    ) -> RecordedToolset:
        """The memory tools for synchronous agent code (OpenAI, Anthropic, LangChain, MCP),
        every call recorded: in a fresh run each, or as the next step of ``run_id``
        (see :meth:`Memory.tools`). ``toolset.last_call`` names the run and step."""
        tools = self._memory.tools(scope, run_id=run_id, mode=mode, fork=fork)
        if run_id is not None:
            self._bound.append(tools)  # closed (strict: checked) with this facade
        return cast(RecordedToolset, RecordedToolset.of(tools, runner_for(self._loop)))

    def call(
        self, name: str, arguments: Any = None, *, scope: ToolScope | None = None
    ) -> tuple[str, Any]:
        """One recorded call in a fresh run: (the run id, the result)."""
        return self._call(self._memory.call(name, arguments, scope=scope))

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
            try:
                for tools in self._bound:
                    self._call(tools.close())
            finally:
                self._call(self._memory.close())
        finally:
            self._stop()

    def __enter__(self) -> SyncMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_sync(path: str | Path, **options: Any) -> SyncMemory:
    """Like :func:`open` (same options), for code without an event loop."""
    return SyncMemory(path, **options)
