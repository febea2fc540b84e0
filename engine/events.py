"""The engine's ledger events and the keyed ids of items.

Three kinds of entries carry memory, each a tagged msgspec Struct for its
signed body and, where a person typed something, a payload:

========================  ==========================================  ====================
entry kind                body (structure, signed)                    payload (redactable)
========================  ==========================================  ====================
``memory_stored``         item id, kind, namespace, observed_at,      text, title, turns,
                          trust, confidence, source item ids          evidence, tags, meta
``trust_changed``         item id, new and previous trust             actor, reason
``memory_forgotten``      the item ids it forgets                     actor, reason (since
                                                                      the forget reason; an
                                                                      older entry has none)
========================  ==========================================  ====================

A ``memory_forgotten`` entry also lists, in the entry's own ``redacts``
header, every earlier seq whose payload mentions one of its items; the
ledger erases those payloads in the same transaction.

Item ids are keyed blake3 (the instance secret, derived for this purpose
alone) over namespace, kind and canonical content, so the same memory
stored twice in one place has one id, and an id reveals nothing about a
short text to anyone without the secret. Content hashes, which key the
vector cache, are keyed the same way for the same reason.
"""

from __future__ import annotations

from typing import Final

import blake3
import msgspec

from memseal.ledger.errors import InvalidRequest

from .items import Content, Conversation, Document, ItemKind, Meta, Turn
from .trust import Trust

__all__ = [
    "ENGINE_KINDS",
    "MAX_ACTOR_CHARS",
    "MAX_REASON_CHARS",
    "Event",
    "ForgetPayload",
    "Keyring",
    "MemoryForgotten",
    "MemoryStored",
    "StoredPayload",
    "TrustChanged",
    "TrustPayload",
    "decode_event",
    "decode_forget_payload",
    "decode_stored_payload",
    "decode_trust_payload",
    "event_body",
    "payload_value",
]


class MemoryStored(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag="memory_stored",
    tag_field="event",
):
    """The signed body of a ``memory_stored`` entry: an item's identity and metadata."""

    item: str
    kind: ItemKind
    namespace: str
    observed_at: str
    trust: Trust
    confidence: float | None = None
    sources: tuple[str, ...] = ()


class TrustChanged(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="trust_changed",
    tag_field="event",
):
    """The signed body of a ``trust_changed`` entry: an item's new trust level."""

    item: str
    trust: Trust
    previous: Trust


class MemoryForgotten(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag="memory_forgotten",
    tag_field="event",
):
    """The signed body of a ``memory_forgotten`` entry: which items to erase."""

    items: tuple[str, ...]


Event = MemoryStored | TrustChanged | MemoryForgotten
ENGINE_KINDS: Final = frozenset({"memory_stored", "trust_changed", "memory_forgotten"})


class StoredPayload(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """What a person typed for one item: never in a signed body."""

    text: str | None = None
    title: str | None = None
    turns: tuple[Turn, ...] | None = None
    evidence: str | None = None
    tags: tuple[str, ...] = ()
    meta: Meta = Meta()

    @classmethod
    def of(cls, content: Content, tags: tuple[str, ...], meta: Meta) -> StoredPayload:
        """The redactable payload of a stored item: its text or turns, tags and meta."""
        if isinstance(content, Conversation):
            return cls(turns=content.turns, tags=tags, meta=meta)
        if isinstance(content, Document):
            return cls(text=content.text, title=content.title, tags=tags, meta=meta)
        return cls(text=content.text, evidence=content.evidence, tags=tags, meta=meta)

    def searchable_text(self) -> str:
        """The text the full-text and vector indexes see for this item."""
        if self.turns is not None:
            return "\n".join(f"{turn.role}: {turn.text}" for turn in self.turns)
        return self.text or ""


class TrustPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The redactable part of a trust change: who changed it and why."""

    actor: str
    reason: str


class ForgetPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Who asked for a forget and why.

    A payload, not the signed body, so the body (and every older entry, which has no
    payload at all) keeps its format: an old ledger and its golden vectors verify as
    before, and a reader takes a forget entry without a payload as one of unknown actor
    and reason.

    Unlike a stored item's text, this payload is never erased: it mentions no item, so
    no later forget redacts it, and it is the record of the erasure itself. A reason
    that quotes the forgotten text keeps that text in the log; the admin route and the
    console say so where the reason is typed.
    """

    actor: str
    reason: str


#: The longest ``actor`` a trust change or forget signs (a token id and its label).
MAX_ACTOR_CHARS: Final = 200
#: The longest ``reason`` a trust change or forget signs.
MAX_REASON_CHARS: Final = 2_000


_event_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)
_stored_decoder = msgspec.json.Decoder(StoredPayload)
_trust_decoder = msgspec.json.Decoder(TrustPayload)
_forget_decoder = msgspec.json.Decoder(ForgetPayload)


def event_body(event: Event) -> dict[str, object]:
    """The body mapping handed to ``make_draft`` (canonical JSON happens there)."""
    body: dict[str, object] = msgspec.to_builtins(event)
    return body


def payload_value(payload: StoredPayload | TrustPayload | ForgetPayload) -> dict[str, object]:
    """The payload as plain JSON values, ready for the entry's canonical encoding."""
    value: dict[str, object] = msgspec.to_builtins(payload)
    return value


def decode_event(kind: str, body: bytes) -> Event:
    """Decode an entry body strictly; its tag must match the entry's kind."""
    event = _event_decoder.decode(body)
    if type(event).__struct_config__.tag != kind:
        raise msgspec.ValidationError(f"body is tagged for another kind than {kind}")
    return event


def decode_stored_payload(data: bytes) -> StoredPayload:
    """Decode a ``memory_stored`` payload strictly (unknown fields refused)."""
    return _stored_decoder.decode(data)


def decode_trust_payload(data: bytes) -> TrustPayload:
    """Decode a ``trust_changed`` payload strictly (unknown fields refused)."""
    return _trust_decoder.decode(data)


_ID_CONTEXT: Final = "memseal 2026-11 engine item id v1"
_CONTENT_CONTEXT: Final = "memseal 2026-11 engine content hash v1"
_FACET_CONTEXT: Final = "memseal 2026-11 engine facet ref v1"
_QUERY_CONTEXT: Final = "memseal 2026-12 engine query ref v1"
_encoder = msgspec.json.Encoder(order="deterministic")
ID_HEX: Final = 32


class Keyring:
    """Keyed hashes derived from the instance secret; never shows the secret."""

    __slots__ = ("_content_key", "_facet_key", "_id_key", "_query_key")

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise InvalidRequest("`secret` must be the instance secret (at least 16 bytes)")
        self._id_key = blake3.blake3(secret, derive_key_context=_ID_CONTEXT).digest()
        self._content_key = blake3.blake3(secret, derive_key_context=_CONTENT_CONTEXT).digest()
        self._facet_key = blake3.blake3(secret, derive_key_context=_FACET_CONTEXT).digest()
        self._query_key = blake3.blake3(secret, derive_key_context=_QUERY_CONTEXT).digest()

    def item_id(self, namespace: str, kind: str, content: Content) -> str:
        """The keyed, deterministic id of an item: same namespace, kind and content, same id."""
        identity: object
        if isinstance(content, Conversation):
            identity = [[turn.role, turn.text] for turn in content.turns]
        elif isinstance(content, Document):
            identity = [content.title, content.text]
        else:
            identity = content.text
        data = _encoder.encode(["memseal/item/v1", namespace, kind, identity])
        return blake3.blake3(data, key=self._id_key).hexdigest(length=ID_HEX // 2)

    def facet_ref(self, facet: str, value: str) -> str:
        """What a payload that shows a facet value (an explore bucket) mentions, so
        that forgetting an item with that value erases it. Keyed: reveals no value."""
        data = _encoder.encode(["memseal/facet/v1", facet, value])
        return "facet:" + blake3.blake3(data, key=self._facet_key).hexdigest(length=16)

    def query_ref(self, *parts: object) -> str:
        """What a cursor keeps of the request it pages (8 bytes, hex), so it cannot be replayed
        against another. Keyed: a cursor seen in a recorded result cannot confirm a guessed
        query, or a filter value, after a forget erased them."""
        data = _encoder.encode(["memseal/query/v1", msgspec.to_builtins(parts)])
        return blake3.blake3(data, key=self._query_key).hexdigest(length=8)

    def content_hash(self, text: str) -> str:
        """Keys the vector cache: the same embedded text has one hash across items."""
        return blake3.blake3(text.encode("utf-8"), key=self._content_key).hexdigest()

    def __repr__(self) -> str:
        return "Keyring(<derived from the instance secret>)"


def decode_forget_payload(data: bytes) -> ForgetPayload:
    """Decode a ``memory_forgotten`` payload strictly (unknown fields refused)."""
    return _forget_decoder.decode(data)
