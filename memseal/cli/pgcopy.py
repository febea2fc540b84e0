"""The copy behind ``memseal migrate``: a folder's SQLite ledger into an empty PostgreSQL store.

What is copied, and why that and no more:
* the ledger's own tables (entries, payloads, mentions, tree, checkpoints,
  redactions, and the meta rows but ``schema``, which the target's store
  writes itself), byte for byte: signatures and the Merkle tree cover those
  bytes, so nothing is re-encoded or re-signed;
* one meta row more, ``sqlite_ranked_below``: the size copied, below which
  the reads were ranked by SQLite's BM25 (see :mod:`memseal.engine._ranked_by`);
* the replay layer's ``memos`` and ``runs``, so a run resumes on the target
  from its memos. A run's lease is not carried over: it was held against the
  source by a process that is not writing to the target. The unsigned
  ``memo_hits`` counts come along too, so the console's figures stay;
* the vector cache (``engine_vectors``) of the live items, so nothing has to
  be embedded again.

The projections are not copied: opening the target rebuilds them from the
log, and the state hash the rebuild reaches must equal the source's. The keys
are not copied either: they stay in the data folder, which every host of the
PostgreSQL store keeps a copy of.

The source is read inside one read transaction of a read-only SQLite
connection, a consistent snapshot, so a server may keep appending to the
folder meanwhile; every row copied belongs to an entry up to the head that
snapshot saw. The target is written in one transaction that holds the
ledger's advisory writer lock (no memseal process appends meanwhile), so a
failed migration leaves no partial ledger: at most the empty tables the
target's store makes when it first opens.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec
import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from memseal.engine import SQLITE_RANKED_BELOW, Engine, state_hash
from memseal.ledger.errors import InvalidRequest, StorageError
from memseal.ledger.folder import DATABASE
from memseal.ledger.keys import load_keys
from memseal.ledger.location import DatabaseUrl, parse_database_url
from memseal.ledger.merkle import stored_hash_count
from memseal.ledger.note import NoteSigner
from memseal.ledger.opening import LogLocation, log_store
from memseal.ledger.postgres import PostgresLogStore
from memseal.replay.runs.memo import ddl_for as memo_ddl_for

__all__ = ["Copied", "Progress", "check_target", "copy_into", "migrate"]

#: Called with (done, total) rows as the copy goes.
Progress = Callable[[int, int], None]
Conn = psycopg.Connection[TupleRow]

_BATCH: Final = 2_000
_SOURCE_SCHEMA: Final = "1"


class _Table(msgspec.Struct, frozen=True, kw_only=True):
    """One table to copy: the target's columns and the source's SELECT that fills them."""

    name: str
    columns: tuple[str, ...]
    select: str  # the source's expressions, one per column
    where: str  # which source rows; its ``?``, if any, stands for ``bound``
    bound: str | None  # "size" (entries copied) or "hashes" (tree hashes copied)
    order: str
    required: bool  # a memseal ledger always has it; the others may be missing from old ones


# Rows of the ledger's own tables are tied to entries by seq; only the prefix seen is copied.
_TABLES: Final = (
    _Table(
        name="entries",
        columns=("seq", "leaf", "hash", "sig"),
        select="seq, leaf, hash, sig",
        where="seq < ?",
        bound="size",
        order="seq",
        required=True,
    ),
    _Table(
        name="tree",
        columns=("idx", "hash"),
        select="idx, hash",
        where="idx < ?",
        bound="hashes",
        order="idx",
        required=True,
    ),
    _Table(
        name="payloads",
        columns=("seq", "salt", "data"),
        select="seq, salt, data",
        where="seq < ?",
        bound="size",
        order="seq",
        required=True,
    ),
    _Table(
        name="mentions",
        columns=("ref", "seq"),
        select="ref, seq",
        where="seq < ?",
        bound="size",
        order="ref, seq",
        required=True,
    ),
    _Table(
        # A redaction belongs to the signed forget that made it.
        name="redactions",
        columns=("seq", "by_seq"),
        select="seq, by_seq",
        where="by_seq < ?",
        bound="size",
        order="seq",
        required=True,
    ),
    _Table(
        name="checkpoints",
        columns=("size", "root", "note", "at"),
        select="size, root, note, at",
        where="size <= ?",
        bound="size",
        order="size",
        required=True,
    ),
    _Table(
        # The target's store wrote its own schema row when it made the tables.
        name="meta",
        columns=("key", "value"),
        select="key, value",
        where=f"key NOT IN ('schema', 'moved_to', '{SQLITE_RANKED_BELOW}')",
        bound=None,
        order="key",
        required=True,
    ),
    _Table(
        name="memos",
        columns=("run_id", "step", "memo_key", "seq"),
        select="run_id, step, memo_key, seq",
        where="seq < ?",
        bound="size",
        order="run_id, step",
        required=False,
    ),
    _Table(
        # Leases start free on the target (see the module docstring).
        name="runs",
        columns=("run_id", "holder", "pid", "host", "lease_until", "started_seq"),
        select="run_id, NULL, NULL, NULL, 0.0, started_seq",
        where="started_seq < ?",
        bound="size",
        order="run_id",
        required=False,
    ),
    _Table(
        name="memo_hits",
        columns=("run_id", "seq", "step", "hits", "last_at"),
        select="run_id, seq, step, hits, last_at",
        where="seq < ?",
        bound="size",
        order="run_id, seq",
        required=False,
    ),
    _Table(
        # Only the vectors of items live at the snapshot: the cache of a forgotten text goes.
        name="engine_vectors",
        columns=("embedder", "content", "vec"),
        select="embedder, content, vec",
        where="content IN (SELECT content FROM engine_items)",
        bound=None,
        order="embedder, content",
        required=False,
    ),
)


class Copied(msgspec.Struct, frozen=True, kw_only=True):
    """What one migration copied, and the source's state at the snapshot it read."""

    size: int
    """Entries copied: the source's size at the snapshot."""
    rows: dict[str, int]
    """Rows copied, by table."""
    state_hash: str | None
    """The source's projection state hash at the snapshot (None: it had no projection)."""


def _open_source(db: Path) -> sqlite3.Connection:
    """A read-only connection inside an open read transaction: one snapshot for the copy."""
    if not db.is_file():
        raise StorageError(f"no ledger database at {db}")
    try:
        conn = sqlite3.connect(
            f"{db.resolve().as_uri()}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,  # the copy reads it on the target's writer thread
        )
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open {db} read-only: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("BEGIN")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"meta", "entries"} <= tables:
            raise StorageError(f"{db} is not a memseal ledger (no entries table)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] != _SOURCE_SCHEMA:
            found = "none" if row is None else row[0]
            raise StorageError(f"{db} has ledger schema {found}; this migrates {_SOURCE_SCHEMA}")
    except sqlite3.Error as exc:
        conn.close()
        raise StorageError(f"cannot read {db}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _source_tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _source_state(conn: sqlite3.Connection, tables: set[str]) -> str | None:
    """The source projection's state hash as the snapshot holds it (kept incrementally)."""
    if "engine_meta" not in tables:
        return None
    keys = "('projection', 'position', 'state_sum')"
    found = dict(conn.execute(f"SELECT key, value FROM engine_meta WHERE key IN {keys}").fetchall())
    if "projection" not in found:
        return None
    return state_hash(int(found.get("position", "-1")), int(found.get("state_sum", "0"), 16))


def _target_columns(conn: Conn, table: str) -> dict[str, int] | None:
    """The target table's column types (oids), or None when it has no such table."""
    rows = conn.execute(
        "SELECT a.attname, a.atttypid FROM pg_attribute a "
        "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped",
        (table,),
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows} or None


def _refuse_filled(conn: Conn, display: str, present: Sequence[str]) -> None:
    """Refuse a target that holds a ledger, or rows of one, before anything is written."""
    row = conn.execute("SELECT max(seq) FROM entries").fetchone()
    if row is not None and row[0] is not None:
        raise InvalidRequest(
            f"`--to` {display} already holds a ledger of {row[0] + 1:,} entries; "
            "memseal migrate copies into an empty one only (nothing was written)"
        )
    for table in present:
        if table == "meta":
            continue  # an empty ledger's own rows (its origin), replaced below
        query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(table))
        found = conn.execute(query).fetchone()
        if found is not None and found[0]:
            raise InvalidRequest(
                f"`--to` {display}: table {table} holds rows although the ledger has no "
                "entries; migrate into an empty schema (nothing was written)"
            )


def _copy_table(
    source: sqlite3.Connection,
    target: Conn,
    table: _Table,
    params: tuple[int, ...],
    types: dict[str, int],
    advance: Callable[[int], None],
) -> int:
    missing = [c for c in table.columns if c not in types]
    if missing:
        raise StorageError(f"the target's table {table.name} has no column {missing[0]}")
    rows = source.execute(
        f"SELECT {table.select} FROM {table.name} WHERE {table.where} ORDER BY {table.order}",
        params,
    )
    statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(table.name), sql.SQL(", ").join(map(sql.Identifier, table.columns))
    )
    count = 0
    # Binary COPY: bytea goes as it is stored, not as hex text twice its size.
    with target.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types([types[c] for c in table.columns])
        while batch := rows.fetchmany(_BATCH):
            for row in batch:
                copy.write_row(row)
            count += len(batch)
            advance(len(batch))
    return count


def _copy(source: sqlite3.Connection, target: Conn, display: str, progress: Progress) -> Copied:
    """Copy the snapshot ``source`` holds into ``target`` in one transaction (see above).

    Runs on the target store's writer connection, which holds the ledger's advisory lock.
    """
    tables = _source_tables(source)
    head = source.execute("SELECT max(seq) FROM entries").fetchone()
    size = 0 if head is None or head[0] is None else int(head[0]) + 1
    bounds = {"size": size, "hashes": stored_hash_count(size)}

    def params(table: _Table) -> tuple[int, ...]:
        return () if table.bound is None else (bounds[table.bound],)

    wanted = [t for t in _TABLES if t.name in tables]
    if "engine_items" not in tables:
        wanted = [t for t in wanted if t.name != "engine_vectors"]

    def count(table: _Table) -> int:
        query = f"SELECT count(*) FROM {table.name} WHERE {table.where}"
        return int(source.execute(query, params(table)).fetchone()[0])

    counts = {t.name: count(t) for t in wanted}
    total = sum(counts.values())
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        progress(done, total)

    target.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
    try:
        types = {t.name: _target_columns(target, t.name) for t in _TABLES}
        absent = [
            t.name for t in wanted if types[t.name] is None and (counts[t.name] or t.required)
        ]
        if absent:
            raise StorageError(f"`--to` {display} has no table {absent[0]}")
        present = [name for name, found in types.items() if found is not None]
        _refuse_filled(target, display, present)
        if types["meta"] is not None:
            target.execute("DELETE FROM meta WHERE key <> 'schema'")
        if _target_columns(target, "engine_meta") is not None:
            # Projection state of the empty log it held: cleared, so opening rebuilds.
            target.execute("DELETE FROM engine_meta")
        copied: dict[str, int] = {}
        for table in wanted:
            found = types[table.name]
            if found is None:
                continue
            copied[table.name] = _copy_table(source, target, table, params(table), found, advance)
        if size:
            # The reads recorded so far were ranked by SQLite's BM25: a proof of one, a
            # bundle's reads and a view as of a size below this re-rank as SQLite did.
            target.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s)", (SQLITE_RANKED_BELOW, str(size))
            )
        row = target.execute("SELECT count(*), coalesce(max(seq) + 1, 0) FROM entries").fetchone()
        if row is None or (row[0], row[1]) != (size, size):
            raise StorageError(f"the copy holds {row} entries, not the {size} read; rolled back")
        target.execute("COMMIT")
    except BaseException:
        if not target.broken:
            target.execute("ROLLBACK")
        raise
    progress(total, total)
    # Fresh planner statistics for the tables just filled: the rebuild reads them all next.
    target.execute(
        sql.SQL("ANALYZE {}").format(sql.SQL(", ").join(map(sql.Identifier, sorted(copied))))
    )
    return Copied(size=size, rows=copied, state_hash=_source_state(source, tables))


async def copy_into(
    folder: Path, store: PostgresLogStore, display: str, progress: Progress | None = None
) -> Copied:
    """Copy the ledger of data folder ``folder`` into the open, empty PostgreSQL ``store``."""
    report: Progress = progress if progress is not None else (lambda done, total: None)
    source = await asyncio.to_thread(_open_source, folder / DATABASE)

    def work(conn: Conn) -> Copied:
        try:
            return _copy(source, conn, display, report)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read {folder / DATABASE}: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageError(f"cannot write to {display}: {exc}") from exc

    try:
        return await store.exclusive(work)
    finally:
        source.close()


def check_target(where: DatabaseUrl) -> None:
    """Connect once before anything is made: refuse a filled target or a bad server early."""
    # A server that never answers is reported, not waited for forever (libpq's default).
    dsn = where.dsn
    if "connect_timeout" not in dsn:
        dsn += ("&" if "?" in dsn else "?") + "connect_timeout=30"
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise StorageError(f"cannot connect to {where.display}: {exc}") from exc
    try:
        with conn:
            if where.schema is not None:
                row = conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (where.schema,)
                ).fetchone()
                if row is None:
                    return  # made by the store when it opens
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(where.schema)))
            if _target_columns(conn, "entries") is not None:
                _refuse_filled(conn, where.display, [])
    except psycopg.Error as exc:
        raise StorageError(f"cannot read {where.display}: {exc}") from exc


def _target_store(folder: Path, where: DatabaseUrl, signer: NoteSigner) -> PostgresLogStore:
    """The target's store with every table memseal keeps there (as ``memseal.open`` makes it)."""
    store = log_store(LogLocation(folder=folder, url=where), signer)
    if not isinstance(store, PostgresLogStore):  # pragma: no cover - a URL names PostgreSQL
        raise StorageError(f"{where.display} is not a PostgreSQL store")
    Engine.register_schema(store)
    store.add_schema(memo_ddl_for(store.dialect))
    return store


async def migrate(folder: Path, url: str, progress: Progress | None = None) -> Copied:
    """Copy the ledger of data folder ``folder`` to the empty PostgreSQL store at ``url``.

    Raises InvalidRequest for a bad URL or a target that already holds a ledger (nothing
    is written then), StorageError when either side cannot be read or written.
    """
    where = parse_database_url(url, "--to")
    # The target's store needs a signer to open for writing; the copy signs nothing.
    keys = await asyncio.to_thread(load_keys, folder)
    await asyncio.to_thread(check_target, where)
    store = _target_store(folder, where, keys.signer)
    await store.open()
    try:
        return await copy_into(folder, store, where.display, progress)
    finally:
        await store.close()
