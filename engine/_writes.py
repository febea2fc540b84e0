"""The store and trust-change commands, as run in the writer.

Each is a unit of work (see :mod:`memseal.ledger.store`): the checks that
depend on current state (the content-id dedupe, the item's current trust
and place) run here, on the write transaction, then the signed entry is
appended and its projection rows written in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from memseal.ledger.entry import make_draft
from memseal.ledger.errors import NotFound
from memseal.ledger.store import WriteTxn

from ._dialect import for_dialect
from ._pgvector import PgVector
from ._projection import Derived, Projection
from ._vectors import insert_vectors
from .events import (
    Keyring,
    MemoryStored,
    StoredPayload,
    TrustChanged,
    TrustPayload,
    event_body,
    payload_value,
)
from .namespaces import Reach
from .results import Stored, TrustChange
from .trust import Trust

__all__ = ["Prepared", "store_command", "trust_command"]


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    """A store, validated, encoded, derived and embedded before the writer."""

    event: MemoryStored
    payload: StoredPayload
    draft: Any
    derived: Derived
    vector: bytes | None

    @property
    def content(self) -> str:
        return self.derived.content


def store_command(
    prepared: Prepared, keyring: Keyring, embedder_id: str | None, pg: PgVector | None = None
) -> Callable[[WriteTxn], Stored]:
    def command(txn: WriteTxn) -> Stored:
        item = prepared.event.item
        found = txn.execute("SELECT seq FROM engine_items WHERE id = ?", (item,))
        if found:  # the same live memory: a replay, nothing appended
            return Stored(id=item, replayed=True, seq=found[0][0])
        appended = txn.append(prepared.draft)
        projection = Projection(txn.execute, keyring, for_dialect(txn.dialect))
        projection.stored(
            appended.seq,
            appended.at,
            prepared.event,
            prepared.payload,
            prepared.derived,
            absent=True,
        )
        projection.save()
        if prepared.vector is not None and embedder_id is not None:
            insert_vectors(txn, embedder_id, [(prepared.content, prepared.vector)], pg)
        return Stored(id=item, replayed=False, seq=appended.seq)

    return command


def trust_command(
    target: str, level: Trust, payload: TrustPayload, scope: Reach | None, keyring: Keyring
) -> Callable[[WriteTxn], TrustChange]:
    def command(txn: WriteTxn) -> TrustChange:
        found = txn.execute("SELECT trust, namespace FROM engine_items WHERE id = ?", (target,))
        if not found or (scope is not None and not scope.admits(found[0][1])):
            raise NotFound(f"no item {target} in reach")
        previous: Trust = found[0][0]
        if previous == level:  # already so: nothing to sign
            return TrustChange(id=target, trust=level, previous=previous, seq=None)
        event = TrustChanged(item=target, trust=level, previous=previous)
        draft = make_draft(
            "trust_changed", event_body(event), payload_value(payload), mentions=[target]
        )
        appended = txn.append(draft)
        projection = Projection(txn.execute, keyring, for_dialect(txn.dialect))
        projection.trust(appended.seq, appended.at, event, payload)
        projection.save()
        return TrustChange(id=target, trust=level, previous=previous, seq=appended.seq)

    return command
