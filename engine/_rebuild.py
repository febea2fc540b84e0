"""Rebuild: drop the projections and replay the log into them, in one writer command.

The same :class:`Projection` methods that apply an event as it is appended
apply it here, read back from its stored bytes, so the state hash a
rebuild reaches is the one kept incrementally. The cached vectors and the
pending scrubs are not projections and stay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import msgspec

from memseal.ledger.entry import decode_entry
from memseal.ledger.store import WriteTxn

from ._dialect import for_dialect
from ._projection import Projection
from ._schema import PROJECTION_TABLES, PROJECTION_VERSION
from .events import (
    ENGINE_KINDS,
    Keyring,
    MemoryStored,
    TrustChanged,
    decode_event,
    decode_stored_payload,
    decode_trust_payload,
)
from .messages import RebuildReport

__all__ = ["rebuild_command"]

_CHUNK: Final = 2_048


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
