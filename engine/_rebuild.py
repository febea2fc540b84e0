"""Rebuild: drop the projections and replay the log into them, in one writer command.

:func:`check_projections` (``memseal verify --deep``) does the same replay
into a scratch store (an in-memory SQLite database) and compares it with the
live projection row by row, on one read snapshot, without writing anything.

The same :class:`Projection` methods that apply an event as it is appended
apply it here, read back from its stored bytes, so the state hash a
rebuild reaches is the one kept incrementally. The cached vectors and the
pending scrubs are not projections and stay. A rebuild raises
``engine_meta.generation``, which tells every engine on the store that what
it holds in memory about the old projections is stale (see ``_vectors``).
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from memseal.ledger.entry import decode_entry
from memseal.ledger.store import Execute, Snapshots, WriteTxn

from ._dialect import SQLITE, EngineSql, FtsWords, for_dialect
from ._fts_check import fts_difference
from ._projection import Projection, row_digest, state_hash
from ._schema import DDL, HASHED, PROJECTION_TABLES, PROJECTION_VERSION
from .events import (
    ENGINE_KINDS,
    Keyring,
    MemoryStored,
    TrustChanged,
    decode_event,
    decode_stored_payload,
    decode_trust_payload,
)
from .results import ProjectionCheck, RebuildReport

__all__ = ["check_projections", "check_projections_in", "rebuild_command"]

_CHUNK: Final = 2_048
_WINDOW: Final = 4_096
_MOD: Final = 1 << 256
_encoder = msgspec.json.Encoder(order="deterministic")


def _no_fts(execute: Execute, seq: int, text: str, title: str | None, tags: str) -> None:
    pass


def _no_fts_add(
    execute: Execute, seq: int, text: str, title: str | None, tags: str, words: FtsWords | None
) -> None:
    pass


# The scratch store keeps only what the state hash covers and what applying events looks
# up (items by id and by content, verdicts by item): no FTS index (it is not hashed, and
# filling it was half the time), no indexes that only queries use.
_SCRATCH_SQL: Final = EngineSql(
    "sqlite",
    item_select=SQLITE.item_select,
    fts_add=_no_fts_add,
    fts_remove=_no_fts,
    fts_clear="SELECT 1",
)
_QUERY_ONLY: Final = (
    "engine_fts",
    "engine_items_namespace",
    "engine_items_observed",
    "engine_items_scope",
    "engine_facets_value",
)
_SCRATCH_DDL: Final = tuple(
    statement
    for statement in DDL.split(";")
    if statement.strip() and not any(name in statement.split() for name in _QUERY_ONLY)
)


def rebuild_command(
    keyring: Keyring, report: Callable[[int, int], None], started: float
) -> Callable[[WriteTxn], RebuildReport]:
    """The writer command; ``report(done, total)`` is called as entries are replayed."""

    def command(txn: WriteTxn) -> RebuildReport:
        sql = for_dialect(txn.dialect)
        previous = Projection(txn.execute, keyring, sql).hash
        for table in PROJECTION_TABLES:
            txn.execute(f"DELETE FROM {table}")
        txn.execute(sql.fts_clear)
        txn.execute("DELETE FROM engine_meta WHERE key IN ('position', 'state_sum')")
        projection = Projection(txn.execute, keyring, sql)
        total = txn.size
        events = skipped = 0
        last = -1
        while True:
            rows = txn.execute(
                "SELECT e.seq, e.leaf, p.data FROM entries e LEFT JOIN payloads p "
                "ON p.seq = e.seq WHERE e.seq > ? ORDER BY e.seq LIMIT ?",
                (last, _CHUNK),
            )
            if not rows:
                break
            for seq, leaf, data in rows:
                applied = _replay(projection, seq, leaf, data)
                events += applied is True
                skipped += applied is None
            last = rows[-1][0]
            report(last + 1, total)
        projection.save()
        txn.execute(
            "INSERT INTO engine_meta (key, value) VALUES ('projection', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (PROJECTION_VERSION,),
        )
        # A new generation: every engine on this store (in any process) sets aside what
        # it holds in memory about the old projections (see ``_vectors``).
        found = txn.execute("SELECT value FROM engine_meta WHERE key = 'generation'")
        txn.execute(
            "INSERT INTO engine_meta (key, value) VALUES ('generation', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(int(found[0][0]) + 1 if found else 1),),
        )
        items = txn.execute("SELECT count(*) FROM engine_items")[0][0]
        report(total, total)
        return RebuildReport(
            state_hash=projection.hash,
            previous_hash=previous,
            entries=total,
            events=events,
            skipped=skipped,
            items=items,
            seconds=round(time.perf_counter() - started, 3),
        )

    return command


def _replay(projection: Projection, seq: int, leaf: bytes, data: bytes | None) -> bool | None:
    """Apply one logged entry: True if an engine event, False if another kind, None if bad.

    An engine entry whose body or payload does not decode cannot have come
    from this engine (it validates before appending); it is counted and
    left out rather than stopping the rebuild.
    """
    try:
        entry = decode_entry(leaf)
    except msgspec.DecodeError:
        return None
    if entry.kind not in ENGINE_KINDS:
        return False
    try:
        event = decode_event(entry.kind, bytes(entry.body))
        if isinstance(event, MemoryStored):
            stored = None if data is None else decode_stored_payload(data)
            projection.stored(seq, entry.at, event, stored)
        elif isinstance(event, TrustChanged):
            verdict = None if data is None else decode_trust_payload(data)
            projection.trust(seq, entry.at, event, verdict)
        else:
            projection.forgotten(seq, event)
    except msgspec.DecodeError:
        return None
    return True


async def check_projections(
    snapshots: Snapshots, keyring: Keyring, dialect: str = "sqlite"
) -> ProjectionCheck:
    """Rebuild the projections from the log into a scratch store and compare (one snapshot);
    then the full-text index with the items (``dialect``: the store's, see :mod:`._fts_check`).

    Returns the comparison (see :class:`ProjectionCheck`); writes nothing.
    """
    started = time.perf_counter()
    return await snapshots.run(
        lambda execute: check_projections_in(execute, keyring, started, dialect)
    )


def check_projections_in(
    execute: Execute, keyring: Keyring, started: float, dialect: str = "sqlite"
) -> ProjectionCheck:
    """:func:`check_projections` on one read transaction's ``execute``."""
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:

        def local(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            return scratch.execute(sql, params).fetchall()

        for statement in _SCRATCH_DDL:
            scratch.execute(statement)
        # 1. the log replayed into the scratch store, by the code that keeps the live one
        projection = Projection(local, keyring, _SCRATCH_SQL)
        last = -1
        entries = 0
        while True:
            rows = execute(
                "SELECT e.seq, e.leaf, p.data FROM entries e LEFT JOIN payloads p "
                "ON p.seq = e.seq WHERE e.seq > ? ORDER BY e.seq LIMIT ?",
                (last, _CHUNK),
            )
            if not rows:
                break
            for seq, leaf, data in rows:
                _replay(projection, seq, bytes(leaf), None if data is None else bytes(data))
            entries += len(rows)
            last = rows[-1][0]
        # 2. the live rows against the rebuilt ones, table by table, window by window
        found_total = 0
        first: tuple[int, str] | None = None
        for table, columns in HASHED.items():
            total, differs = _compare(table, columns, execute, local)
            found_total = (found_total + total) % _MOD
            if differs is not None and (first is None or differs < first[0]):
                first = (differs, table)
        # 3. the full-text index, which the state hash leaves out, against the live items
        # (themselves held to the log above): a row gone from it hides an item from search
        fts = fts_difference(execute, dialect)
        if fts is not None and (first is None or fts < first[0]):
            first = (fts, "engine_fts")
        meta: dict[str, str] = dict(
            execute("SELECT key, value FROM engine_meta WHERE key IN ('position', 'state_sum')", ())
        )
        position = int(meta.get("position", "-1"))
        incremental = state_hash(position, int(meta.get("state_sum", "0"), 16))
        item: tuple[str, str] | None = None
        if first is not None:
            item = _item_at(first[1], first[0], execute, local)
        items = local("SELECT count(*) FROM engine_items")[0][0]
        return ProjectionCheck(
            expected=projection.hash,
            found=state_hash(position, found_total),
            incremental=incremental,
            entries=entries,
            items=items,
            table=None if first is None else first[1],
            seq=None if first is None else first[0],
            item=None if item is None else item[0],
            namespace=None if item is None else item[1],
            seconds=round(time.perf_counter() - started, 3),
        )
    finally:
        scratch.close()


def _compare(
    table: str, columns: Sequence[str], live: Execute, rebuilt: Execute
) -> tuple[int, int | None]:
    """The live table's state sum, and the first seq whose rows differ (None if none)."""
    select = f"SELECT {', '.join(columns)} FROM {table} WHERE seq > ? AND seq <= ?"
    total = 0
    first: int | None = None
    low = -1
    while True:
        mine = live(select, (low, low + _WINDOW))
        theirs = rebuilt(select, (low, low + _WINDOW))
        for row in mine:
            total = (total + row_digest(table, row)) % _MOD
        if first is None and Counter(map(_key, mine)) != Counter(map(_key, theirs)):
            first = min(
                seq
                for seq in {r[0] for r in mine} | {r[0] for r in theirs}
                if sorted(_key(r) for r in mine if r[0] == seq)
                != sorted(_key(r) for r in theirs if r[0] == seq)
            )
        if not mine and not theirs:
            # Skip empty stretches of the log at once (seqs are sparse in a table).
            query = f"SELECT min(seq) FROM {table} WHERE seq > ?"
            found = (live(query, (low,))[0][0], rebuilt(query, (low,))[0][0])
            ahead = [x for x in found if x is not None]
            if not ahead:
                return total, first
            low = min(ahead) - 1
            continue
        low += _WINDOW


def _key(row: Sequence[Any]) -> bytes:
    return _encoder.encode(list(row))


def _item_at(table: str, seq: int, live: Execute, rebuilt: Execute) -> tuple[str, str] | None:
    """The id and namespace of the item a differing row belongs to, the log's side first
    (a row only the live side has is named by what it claims)."""
    for execute in (rebuilt, live):
        if table == "engine_verdicts":
            found = execute(
                "SELECT i.id, i.namespace FROM engine_verdicts v "
                "JOIN engine_items i ON i.seq = v.item WHERE v.seq = ?",
                (seq,),
            )
        else:
            found = execute("SELECT id, namespace FROM engine_items WHERE seq = ?", (seq,))
        if found:
            return str(found[0][0]), str(found[0][1])
    return None
