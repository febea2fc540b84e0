"""Opening a ledger's log store from where it lives, with the checks of its identity.

A ledger lives in a data folder's SQLite file or in a PostgreSQL store; its
keys stay in the folder either way (:mod:`.folder`). :func:`choose_location`
turns what a caller names (a folder, a URL) into a :class:`LogLocation`,
:func:`log_store` builds the store there, and :func:`open_log` opens it for
signing: it loads (or, for a new ledger, makes) the folder's keys, refuses a
folder whose key would sign a second ledger, finishes a key rotation a crash
interrupted, checks ``keys/history`` against the signed chain of keys and fixes
the checkpoint origin. Environment variables are the callers' business: nothing
here reads them (:mod:`.choice` weighs the environment the edge hands it, then
calls :func:`choose_location`).
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from .errors import InvalidRequest, KeyFileError, StorageError
from .folder import DATABASE, DataFolder
from .keys import (
    Keys,
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
from .location import DatabaseUrl, hide_password, is_database_url, parse_database_url
from .log import KEY_ROTATED
from .note import NoteSigner, VerifierKey
from .sqlite import SqliteLogStore
from .store import SqlStore, WriteTxn
from .transparency import CheckpointPolicy

__all__ = [
    "Location",
    "LogLocation",
    "OpenedLog",
    "check_keys",
    "choose_location",
    "genesis",
    "log_store",
    "open_log",
    "read_location",
    "record_location",
    "write_location",
]

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LogLocation(msgspec.Struct, frozen=True, kw_only=True):
    """Where a ledger lives: its data folder and, for PostgreSQL, the store's URL."""

    folder: Path
    """The data folder: the keys, and the SQLite file unless ``url`` is given."""
    url: DatabaseUrl | None = None
    """The PostgreSQL store holding the log; None: the folder's SQLite file."""

    @property
    def display(self) -> str:
        """Where the log lives, fit to print (a URL's password hidden)."""
        return str(self.folder / DATABASE) if self.url is None else self.url.display


def choose_location(
    path: str | Path,
    store: object = None,
    *,
    data: str | None = None,
    store_field: str = "store",
    data_hint: str | None = None,
) -> LogLocation:
    """The location ``path`` (a data folder or a PostgreSQL URL) and ``store`` name.

    ``store`` (a PostgreSQL URL, named ``store_field`` in errors) puts the log
    of the folder ``path`` in PostgreSQL. A URL as ``path`` names the store
    alone; its keys then live in ``data``, and ``data_hint`` says how a caller
    gives that folder.
    """
    if store is not None and not isinstance(store, str):
        raise InvalidRequest(f"`store` must be a postgresql:// URL, not {type(store).__name__}")
    if is_database_url(path):
        if store is not None:
            raise InvalidRequest("give the PostgreSQL URL once: as `path` or as `store`")
        if not data:
            raise InvalidRequest(
                "`path` is a PostgreSQL URL; the signing key stays in a local data folder: "
                "open(FOLDER, store=URL)" + (f", or {data_hint}" if data_hint else "")
            )
        return LogLocation(folder=Path(data), url=parse_database_url(str(path), "path"))
    if store is None:
        return LogLocation(folder=Path(path))
    return LogLocation(folder=Path(path), url=parse_database_url(store, store_field))


def log_store(
    location: LogLocation, signer: NoteSigner | None = None, *, clock: Clock = _utcnow
) -> SqlStore:
    """The (unopened) log store at ``location``; ``signer`` None: read-only."""
    url = location.url
    if url is None:
        return SqliteLogStore(DataFolder(root=location.folder).database, signer, clock=clock)
    try:
        from .postgres import PostgresLogStore
    except ImportError as exc:  # pragma: no cover - psycopg is a dependency
        raise StorageError(f"the PostgreSQL store needs psycopg: {exc}") from exc
    return PostgresLogStore(url.dsn, signer, schema=url.schema, clock=clock)


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


def genesis(location: LogLocation) -> bytes | None:
    """The leaf hash of the first entry at ``location`` (the ledger's identity), read
    without opening a store; None where no ledger has begun."""
    if location.url is None:
        return _sqlite_genesis(DataFolder(root=location.folder).database)
    return _postgres_genesis(location.url)


class Location(msgspec.Struct, frozen=True, kw_only=True):
    """What a folder's location file says: where its ledger lives, and which it is."""

    store: str
    """``"sqlite"`` (the folder's file) or the store's URL, password hidden."""
    genesis: str | None = None
    """The hex leaf hash of the ledger's first entry: its identity, wherever it lives."""


def read_location(folder: Path) -> Location | None:
    """What the folder's location file says, or None where there is none (or it is empty)."""
    marker = DataFolder(root=folder).location
    try:
        lines = marker.read_text(encoding="utf-8").split() if marker.exists() else None
    except OSError as exc:
        raise StorageError(f"cannot read {marker}: {exc.strerror}") from exc
    if not lines:
        return None
    return Location(store=lines[0], genesis=lines[1] if len(lines) > 1 else None)


def write_location(folder: Path, location: Location) -> None:
    """Record where the folder's ledger lives (after an open or a migration succeeded)."""
    marker = DataFolder(root=folder).location
    text = location.store + "\n" + (f"{location.genesis}\n" if location.genesis else "")
    try:
        marker.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StorageError(f"cannot write {marker}: {exc.strerror}") from exc


def _check_location(folder: Path, url: DatabaseUrl | None) -> None:
    """Refuse to let one folder's key sign a second ledger (see :data:`.folder.LOCATION`).

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
                f"(store=URL, --store or MEMSEAL_STORE); {DATABASE} here is a frozen copy"
            )
        return
    known = said.genesis if said is not None else None
    if said is None or (said.store == "sqlite" and known is None):
        first = _sqlite_genesis(DataFolder(root=folder).database)
        known = None if first is None else first.hex()
    if known is None:
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
    if there.hex() != known:
        raise StorageError(
            f"{url.display} holds another ledger than the one of {folder} "
            f"(first entry {there.hex()[:16]}, the folder's {known[:16]})"
        )


async def record_location(location: LogLocation, store: SqlStore) -> None:
    """Write the folder's location file, if it changed: where the ledger lives and, once
    it has its first entry, which ledger it is."""
    first = None
    if (await store.head()).size > 0:
        first = (await store.read(0)).leaf_hash.hex()
    url = location.url
    wanted = Location(store="sqlite" if url is None else url.display, genesis=first)
    if await asyncio.to_thread(read_location, location.folder) != wanted:
        await asyncio.to_thread(write_location, location.folder, wanted)


def _prepare(location: LogLocation, key_name: str | None, create: bool) -> Keys:
    """The folder's keys, made for a new ledger; never a new key for an existing one."""
    folder = location.folder
    if folder.exists() and not folder.is_dir():
        raise InvalidRequest(f"`path` {folder} exists and is not a folder")
    if folder.is_dir():
        secure_folder(folder)  # 0700 before anything is read or made in it
    if folder.is_dir() and key_files_exist(folder):
        return load_keys(folder)
    # Asked before anything is made: an unreachable store leaves no folder behind.
    if genesis(location):
        where = folder if location.url is None else location.url.display
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
        f"{DataFolder(root=folder).key_history} lists {len(listed)} key(s) but the ledger's "
        f"signed chain of key_rotated entries has {len(chain)}: the file was cut or edited. "
        "Restore it from a backup, or write these lines back, oldest first: " + " | ".join(chain)
    )


async def check_keys(store: SqlStore, history: list[VerifierKey], folder: Path) -> None:
    """Refuse a folder's key ``history`` that is not the ledger's: its first key must
    have signed the first entry, and the list must be the signed chain of rotations."""
    await _check_first_key(store, history[0], folder)
    await _check_key_chain(store, history, folder)


async def _finish_rotation(folder: Path, store: SqlStore, keys: Keys) -> Keys:
    """Complete or discard a key rotation a crash interrupted (see :mod:`.keys`)."""
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


class OpenedLog(msgspec.Struct, frozen=True, kw_only=True):
    """A log store :func:`open_log` opened for signing, with what it settled."""

    store: SqlStore
    """The open store, signing with the folder's current key (the caller closes it)."""
    keys: Keys
    """The folder's keys, after any interrupted rotation was finished."""
    history: list[VerifierKey]
    """The ledger's keys, oldest first; a key another process rotates to joins it."""
    origin: str
    """The checkpoint origin fixed for this ledger."""


async def open_log(
    location: LogLocation,
    *,
    key_name: str | None = None,
    create: bool = True,
    clock: Clock = _utcnow,
    origin: str | None = None,
    schema: Callable[[SqlStore], None] | None = None,
) -> OpenedLog:
    """Open the ledger at ``location`` for signing with its folder's key.

    Makes the folder and its keys on first use (unless ``create`` is false;
    ``key_name`` names a new key), refusing a ledger without its keys and a key
    that would sign a second ledger; ``schema(store)`` adds the tables of the
    layers above before the store opens. Then finishes or discards a key
    rotation a crash interrupted, checks ``keys/history`` against the signed
    chain of keys and fixes the checkpoint ``origin`` (default: the key's name).
    """
    if not isinstance(create, bool):
        # A truthy "no" would make a folder and a key where none was meant to be.
        raise InvalidRequest(f"`create` must be True or False, not {create!r:.40}")
    keys = await asyncio.to_thread(_prepare, location, key_name, create)
    await asyncio.to_thread(_check_location, location.folder, location.url)
    store = log_store(location, keys.signer, clock=clock)
    if schema is not None:
        schema(store)
    await store.open()
    folder = location.folder
    try:
        keys = await _finish_rotation(folder, store, keys)
        history = await asyncio.to_thread(key_history, folder)
        store.set_key_source(functools.partial(_folder_key, folder, history))
        await check_keys(store, history, folder)
        fixed = await _fix_origin(store, origin or keys.signer.name)
    except BaseException:
        await store.close()
        raise
    return OpenedLog(store=store, keys=keys, history=history, origin=fixed)
