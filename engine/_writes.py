"""The store and trust-change commands: prepared before the writer, run in it.

A store is validated, encoded and derived (:func:`prepare`) and embedded
(:func:`embed`) first: pure, expensive work that holds no transaction.
Each command is a unit of work (see :mod:`memseal.ledger.store`): the checks that
depend on current state (the content-id dedupe, the item's current trust
and place) run here, on the write transaction, then the signed entry is
appended and its projection rows written in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from memseal.ledger.entry import format_time, make_draft
from memseal.ledger.errors import InvalidRequest, NotFound
from memseal.ledger.store import WriteTxn

from ._dialect import for_dialect
from ._pgvector import PgVector
from ._projection import Derived, Projection, derive, embed_text
from ._vectors import VectorCache, insert_vectors
from .events import (
    MAX_ACTOR_CHARS,
    MAX_REASON_CHARS,
    Keyring,
    MemoryStored,
    StoredPayload,
    TrustChanged,
    TrustPayload,
    event_body,
    payload_value,
)
from .filters import parse_time
from .items import check_ids, check_meta, check_tags, clean_text, content_kind, parse_content
from .namespaces import Namespace, check_reach
from .results import NewItem, Stored, TrustChange
from .trust import Trust, check_trust

__all__ = ["Prepared", "embed", "prepare", "prepare_many", "store_command", "trust_command"]

# What a store command keeps for the later ones of its group (WriteTxn.keep): the
# projection's saved position and state sum, and the items this group stored (id: seq).
_SAVED_STATE = "engine.saved_state"
_STORED_ITEMS = "engine.stored_items"


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    """A store, validated, encoded, derived and embedded before the writer."""

    event: MemoryStored
    payload: StoredPayload
    draft: Any
    derived: Derived
    vector: bytes | None

    @property
    def content(self) -> str:
        """The item's keyed content hash (the vector cache's key)."""
        return self.derived.content


def store_command(
    prepared: Prepared, keyring: Keyring, embedder_id: str | None, pg: PgVector | None = None
) -> Callable[[WriteTxn], Stored]:
    """The writer command of a prepared store: the content-id dedupe (a replay
    appends nothing), then the signed entry, its rows and its vector."""

    def command(txn: WriteTxn) -> Stored:
        item = prepared.event.item
        saved: tuple[str | None, str | None] | None = txn.known(_SAVED_STATE)
        stored: dict[str, int] = txn.known(_STORED_ITEMS) or {}
        if saved is None:
            # The dedupe and the projection's saved state in one statement (one round trip).
            ((found, position, total),) = txn.execute(
                f"SELECT (SELECT seq FROM engine_items WHERE id = ?), {Projection.SAVED}", (item,)
            )
            saved = (position, total)
        elif item in stored:
            found = stored[item]
        else:
            # The items held for this group's INSERT are in ``stored``: the read need not
            # write them first (and on PostgreSQL it is one read for the whole group).
            found = txn.lookup("engine_items", "id", item, "seq")
        if found is not None:  # the same live memory: a replay, nothing appended
            return Stored(id=item, replayed=True, seq=found)
        appended = txn.append(prepared.draft)
        projection = Projection(
            txn.execute, keyring, for_dialect(txn.dialect), saved=saved, defer=txn.defer
        )
        projection.stored(
            appended.seq,
            appended.at,
            prepared.event,
            prepared.payload,
            prepared.derived,
            absent=True,
        )
        # The state is written once a group: the last command's save stands.
        txn.hold_last("engine_meta", *projection.save_statement())
        txn.keep(_SAVED_STATE, projection.saved(), ("engine_meta",))
        stored[item] = appended.seq
        txn.keep(_STORED_ITEMS, stored, ("engine_items",))
        if prepared.vector is not None and embedder_id is not None:
            insert_vectors(txn, embedder_id, [(prepared.content, prepared.vector)], pg)
        return Stored(id=item, replayed=False, seq=appended.seq)

    return command


def trust_command(
    item_id: object, level: Trust, actor: object, reason: object, reach: object, keyring: Keyring
) -> Callable[[WriteTxn], TrustChange]:
    """The writer command of a trust change to ``level``, its arguments checked now
    (InvalidRequest naming the field): NotFound outside ``reach``, nothing signed when
    the trust is already that."""
    if not isinstance(item_id, str):
        raise InvalidRequest("`id` must be an item id (text)")
    (target,) = check_ids([item_id], "id")
    payload = TrustPayload(
        actor=clean_text(actor, "actor", MAX_ACTOR_CHARS),
        reason=clean_text(reason, "reason", MAX_REASON_CHARS),
    )
    scope = check_reach(reach)

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
        projection = Projection(txn.execute, keyring, for_dialect(txn.dialect), defer=txn.defer)
        projection.trust(appended.seq, appended.at, event, payload)
        projection.save()
        return TrustChange(id=target, trust=level, previous=previous, seq=appended.seq)

    return command


def prepare(
    keyring: Keyring,
    clock: Callable[[], datetime],
    raw_content: object,
    namespace: object,
    tags: object,
    raw_meta: object,
    observed_at: object,
    trust: object,
    sources: object,
) -> Prepared:
    """A store validated (raising :class:`InvalidRequest` naming the field), encoded and
    derived, ready for :func:`embed` and then :func:`store_command`."""
    content = parse_content(raw_content)
    if not isinstance(namespace, Namespace | str):
        raise InvalidRequest("`namespace` must be text like `team:acme/agent:writer`")
    ns = Namespace.parse(namespace).text
    clean_tags = check_tags(tags)
    meta = check_meta(raw_meta)
    level = check_trust(trust)
    if level == "rejected":
        raise InvalidRequest("`trust`: an item cannot be stored rejected")
    source_ids: list[str] = []
    if sources is not None:
        if isinstance(sources, str) or not isinstance(sources, Sequence):
            raise InvalidRequest("`sources` must be a list of item ids")
        if sources:
            source_ids = check_ids(sources, "sources")
    observed = (
        format_time(clock()) if observed_at is None else parse_time(observed_at, "observed_at")
    )
    kind = content_kind(content)
    item_id = keyring.item_id(ns, kind, content)
    event = MemoryStored(
        item=item_id,
        kind=kind,
        namespace=ns,
        observed_at=observed,
        trust=level,
        confidence=getattr(content, "confidence", None),
        sources=tuple(source_ids),
    )
    payload = StoredPayload.of(content, clean_tags, meta)
    draft = make_draft(
        "memory_stored", event_body(event), payload_value(payload), mentions=[item_id]
    )
    return Prepared(
        event=event,
        payload=payload,
        draft=draft,
        derived=derive(event, payload, keyring),
        vector=None,
    )


def prepare_many(keyring: Keyring, clock: Callable[[], datetime], items: object) -> list[Prepared]:
    """:func:`prepare` for each of a list of :class:`NewItem`; all valid, or the first error."""
    if not isinstance(items, Sequence):
        raise InvalidRequest("`items` must be a list of NewItem")
    prepared = []
    for i, item in enumerate(items):
        if not isinstance(item, NewItem):
            raise InvalidRequest(f"`items[{i}]` must be a NewItem")
        prepared.append(
            prepare(
                keyring,
                clock,
                item.content,
                item.namespace,
                item.tags,
                item.meta,
                item.observed_at,
                item.trust,
                item.sources,
            )
        )
    return prepared


async def embed(vectors: VectorCache | None, prepared: list[Prepared]) -> list[Prepared]:
    """Vectors for the contents not cached yet, made before the writer."""
    if vectors is None:
        return prepared
    uncached = await vectors.uncached([p.content for p in prepared])
    todo: dict[str, str] = {}
    for p in prepared:
        if p.content in uncached and p.content not in todo:
            todo[p.content] = embed_text(p.payload.title, p.payload.searchable_text())
    if not todo:
        return prepared
    blobs = dict(zip(todo, await vectors.embed(list(todo.values())), strict=True))
    return [msgspec.structs.replace(p, vector=blobs.get(p.content)) for p in prepared]
