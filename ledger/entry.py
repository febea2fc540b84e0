"""Ledger entries (format v1): what is stored, hashed and signed.

An entry is canonical JSON with its fields in this order::

    {"v":1,"seq":0,"at":"2026-11-30T00:00:00.000000Z","kind":"memory_stored",
     "prev":"<64 hex>","key":"<8 hex>","redacts":[],"payload_hash":"<64 hex>"|null,
     "body":{...}}

``prev`` is the leaf hash of entry ``seq-1`` (64 zeros for seq 0), ``key`` the
signer's C2SP key id, ``redacts`` the earlier seqs whose payloads this entry
authorises to erase, ``payload_hash`` blake3 over a 16-byte random salt and
the payload bytes. The body is structure only (ids, kinds, hashes); text a
person typed goes into the payload, which is stored beside the entry and
can be erased without breaking a signature.

A forget may erase a payload only in part: the stored payload is then a
*residue* (stored with an empty salt), ``{"texts":{ref:[salt hex, text]}}``,
the texts that were not forgotten. It is checked text by text: each ``ref``
is blake3 over the 16-byte salt and the text, and the signed body carries it
as ``{"$t":"<ref>"}``, so every byte of a residue is committed by the
entry's signature even though the whole-payload hash no longer applies.

The leaf hash is RFC 6962's ``SHA-256(0x00 || entry bytes)``: the same value
chains entries, is a leaf of the Merkle tree and, domain separated, is what
the signature covers, so an entry signature can never pass for a checkpoint
signature.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import blake3
import msgspec

from .canonical import MAX_BODY_BYTES, MAX_PAYLOAD_BYTES, canonical_json
from .errors import InvalidRequest

__all__ = [
    "FORMAT_VERSION",
    "GENESIS_PREV",
    "MAX_ENTRY_BYTES",
    "MAX_MENTIONS",
    "RESIDUE_SALT",
    "SALT_SIZE",
    "SIGNATURE_CONTEXT",
    "Draft",
    "Entry",
    "check_entry_size",
    "check_mention",
    "check_residue",
    "decode_entry",
    "decode_residue",
    "encode_entry",
    "encode_residue",
    "format_time",
    "leaf_hash",
    "make_draft",
    "payload_hash",
    "signing_message",
    "text_owners",
]

FORMAT_VERSION = 1
SALT_SIZE = 16
GENESIS_PREV = "0" * 64
SIGNATURE_CONTEXT = b"memseal/entry/v1\x00"
MAX_MENTIONS = 10_000
#: The most bytes a signed entry may have: a C2SP tlog-tiles entry bundle frames each
#: entry behind a uint16 length, so a larger one could never be served as tiles.
MAX_ENTRY_BYTES = 0xFFFF
#: The salt a residue is stored with: no 16-byte salt, so it can never pass as a whole payload.
RESIDUE_SALT = b""

_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}")
# The widest values the writer may give an entry's seq, time, prev and key: a draft is
# sized with these, before it has a seq, so it is refused before anything is written.
_WIDEST_SEQ = 2**63 - 1
_WIDEST_AT = "9999-12-31T23:59:59.999999Z"
_WIDEST_KEY = "0" * 8
_MENTION = re.compile(r"[\x21-\x7e]{1,256}")


class Entry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ledger entry, as decoded from its stored bytes."""

    v: int
    seq: int
    at: str
    kind: str
    prev: str
    key: str
    redacts: tuple[int, ...]
    payload_hash: str | None
    body: msgspec.Raw


class Draft(msgspec.Struct, frozen=True, kw_only=True):
    """An entry before the writer gives it a seq, a time and a signature.

    Everything expensive and pure (encoding, salting, hashing the payload)
    is done here, outside the write transaction.
    """

    kind: str
    body: bytes
    payload: bytes | None = None
    salt: bytes | None = None
    payload_hash: str | None = None
    mentions: tuple[str, ...] = ()
    redacts: tuple[int, ...] = ()
    # Of the redacted seqs, those whose payload is replaced by a residue: (seq, residue
    # bytes, what the residue still mentions). The rest are erased whole.
    kept: tuple[tuple[int, bytes, tuple[str, ...]], ...] = ()


class _Residue(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    texts: dict[str, tuple[str, str]]


_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(Entry)
_residue = msgspec.json.Decoder(_Residue)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX32 = re.compile(r"[0-9a-f]{32}")


def encode_residue(texts: Mapping[str, Sequence[str]]) -> bytes:
    """The canonical bytes of a residue keeping ``texts`` (ref -> [salt hex, text])."""
    return _encoder.encode({"texts": {ref: list(pair) for ref, pair in texts.items()}})


def decode_residue(data: bytes) -> dict[str, list[str]]:
    """A residue's texts (ref -> [salt hex, text]); check it first (:func:`check_residue`)."""
    return {ref: list(pair) for ref, pair in _residue.decode(data).texts.items()}


def text_owners(body: Any) -> dict[str, str | None]:
    """Each text ref (``{"$t": ref}``) in a decoded body, with the id of the innermost
    object around it that has a string ``id`` (None when no object does).

    A forget keeps the texts whose owner it did not forget, and indexes their owners in
    ``mentions``; verify recomputes the same owners to check that index."""
    owners: dict[str, str | None] = {}

    def walk(value: Any, owner: str | None) -> None:
        if isinstance(value, Mapping):
            ref = value.get("$t")
            if len(value) == 1 and isinstance(ref, str):
                owners[ref] = owner
                return
            named = value.get("id")
            inner = named if isinstance(named, str) else owner
            for v in value.values():
                walk(v, inner)
        elif isinstance(value, list):
            for v in value:
                walk(v, owner)

    walk(body, None)
    return owners


def check_residue(body: bytes, data: bytes) -> str | None:
    """What is wrong with ``data`` as a residue of the entry whose body is ``body``, or None.

    Canonical bytes only (one residue has one encoding); each text must hash, with
    its salt, to its ref, and the signed body must carry that ref as a text
    reference. A body is canonical JSON, where a quote inside a string is always
    escaped, so ``"$t":"<ref>"`` in its bytes is a reference, never string content.
    """
    try:
        residue = _residue.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return "the residue is not a JSON object of texts"
    if encode_residue(residue.texts) != data:
        return "the residue is not canonical"
    for ref, (salt, text) in residue.texts.items():
        if not _HEX64.fullmatch(ref) or not _HEX32.fullmatch(salt):
            return "a residue text's ref or salt is not hex of the right size"
        if blake3.blake3(bytes.fromhex(salt) + text.encode("utf-8")).hexdigest() != ref:
            return f"residue text {ref[:12]} does not match its ref"
        if b'{"$t":"' + ref.encode("ascii") + b'"}' not in body:
            return f"residue text {ref[:12]} is not referenced by the signed body"
    return None


def payload_hash(salt: bytes, payload: bytes) -> str:
    """The salted BLAKE3 hash an entry keeps of its payload, so a redaction keeps it."""
    return blake3.blake3(salt + payload).hexdigest()


def check_mention(ref: object, field: str = "ref") -> None:
    """What may be indexed as mentioned: 1 to 256 printable ASCII characters."""
    if not isinstance(ref, str) or not _MENTION.fullmatch(ref):
        raise InvalidRequest(f"`{field}` must be 1 to 256 printable ASCII characters")


def make_draft(
    kind: str,
    body: Mapping[str, Any],
    payload: Any = None,
    *,
    mentions: Sequence[str] = (),
    redacts: Sequence[int] = (),
    checked: bool = False,
    salt: bytes | None = None,
) -> Draft:
    """Validate and encode one entry's content; raise :class:`InvalidRequest` on bad input.

    ``checked=True``: ``body`` and ``payload`` are plain JSON by construction
    (decoded by msgspec), so only their size is checked. ``salt`` is the payload's
    16-byte salt when the caller drew it (unpredictable, never reused); default a fresh one.
    """
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise InvalidRequest(f"`kind` {kind!r} must be lowercase snake_case, at most 64 characters")
    if type(body) is not dict and not isinstance(body, Mapping):
        raise InvalidRequest(f"`body` must be a JSON object, not {type(body).__name__}")
    body_bytes = canonical_json(body, field="body", limit=MAX_BODY_BYTES, checked=checked)
    if salt is not None and (type(salt) is not bytes or len(salt) != SALT_SIZE):
        raise InvalidRequest(f"`salt` must be {SALT_SIZE} bytes")
    data: bytes | None = None
    digest: str | None = None
    if payload is None:
        salt = None
    else:
        data = canonical_json(payload, field="payload", limit=MAX_PAYLOAD_BYTES, checked=checked)
        if salt is None:
            salt = secrets.token_bytes(SALT_SIZE)
        digest = payload_hash(salt, data)
    if type(mentions) not in (tuple, list) and (
        isinstance(mentions, str | bytes) or not isinstance(mentions, Sequence)
    ):
        raise InvalidRequest("`mentions` must be a list of ids")
    if len(mentions) > MAX_MENTIONS:
        raise InvalidRequest(f"`mentions` lists {len(mentions)} ids; the limit is {MAX_MENTIONS}")
    for i, ref in enumerate(mentions):
        check_mention(ref, f"mentions[{i}]")
    if data is None and mentions:
        raise InvalidRequest("`mentions` needs a payload: it indexes what a payload mentions")
    if type(redacts) not in (tuple, list) and (
        isinstance(redacts, str | bytes) or not isinstance(redacts, Sequence)
    ):
        raise InvalidRequest("`redacts` must be a list of seqs")
    for i, seq in enumerate(redacts):
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise InvalidRequest(f"`redacts[{i}]` must be a seq (an integer >= 0)")
    draft = Draft(
        kind=kind,
        body=body_bytes,
        payload=data,
        salt=salt,
        payload_hash=digest,
        mentions=tuple(dict.fromkeys(mentions)),
        redacts=tuple(sorted(set(redacts))),
    )
    check_entry_size(draft, _widest_size(draft))
    return draft


def _widest_size(draft: Draft) -> int:
    # The header sized around a one-byte body, so a 64 KiB body is not copied again.
    header = Entry(
        v=FORMAT_VERSION,
        seq=_WIDEST_SEQ,
        at=_WIDEST_AT,
        kind=draft.kind,
        prev=GENESIS_PREV,
        key=_WIDEST_KEY,
        redacts=draft.redacts,
        payload_hash=draft.payload_hash,
        body=msgspec.Raw(b"0"),
    )
    return len(_encoder.encode(header)) - 1 + len(draft.body)


def check_entry_size(draft: Draft, size: int) -> None:
    """InvalidRequest, naming the body, when ``draft`` signed would be ``size`` bytes, over
    :data:`MAX_ENTRY_BYTES`."""
    if size > MAX_ENTRY_BYTES:
        raise InvalidRequest(
            f"`body` is {len(draft.body)} bytes encoded, which makes the {draft.kind} entry "
            f"(with {len(draft.redacts)} `redacts`) up to {size} bytes; the limit is "
            f"{MAX_ENTRY_BYTES} (what a tlog-tiles entry bundle frames)"
        )


def format_time(at: datetime) -> str:
    """RFC 3339 in UTC with microseconds: fixed width, so times sort as text."""
    if at.tzinfo is None:
        raise InvalidRequest("clock returned a naive datetime; memseal needs an aware one")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def encode_entry(draft: Draft, *, seq: int, at: str, prev: str, key: str) -> bytes:
    """The entry's canonical bytes at ``seq``: what its leaf hash and signature cover."""
    entry = Entry(
        v=FORMAT_VERSION,
        seq=seq,
        at=at,
        kind=draft.kind,
        prev=prev,
        key=key,
        redacts=draft.redacts,
        payload_hash=draft.payload_hash,
        body=msgspec.Raw(draft.body),
    )
    return _encoder.encode(entry)


def decode_entry(data: bytes) -> Entry:
    """Decode stored entry bytes strictly; raise ``msgspec.DecodeError`` or ``ValidationError``."""
    return _decoder.decode(data)


def leaf_hash(data: bytes) -> bytes:
    """The RFC 6962 leaf hash ``SHA-256(0x00 || data)`` of an entry's bytes."""
    return hashlib.sha256(b"\x00" + data).digest()


def signing_message(leaf: bytes) -> bytes:
    """What an entry signature covers: a context string, then the 32-byte leaf hash."""
    return SIGNATURE_CONTEXT + leaf
