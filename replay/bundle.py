"""Session bundles (format ``memseal/bundle@v1``): one run, exported and verified offline.

A bundle is one JSON document (see docs/formats.md for every byte): the
run's own entries (``run_started``, ``memory_tool_call``, ``run_forked``),
the memory entries its results cite and its writes made (``memory_stored``,
``trust_changed``, ``memory_forgotten``), every ``key_rotated`` entry, each
with its stored bytes, signature, payload (unless a signed forget erased it)
and an RFC 6962 inclusion proof against the signed checkpoint it carries.

:func:`export_bundle` cuts a checkpoint and collects all of that from a
ledger; :func:`verify_bundle` checks a bundle against one trusted vkey with
the rigour of a full ledger audit, then decodes the run's calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from memseal.ledger.checkpoint import parse_checkpoint
from memseal.ledger.entry import (
    SALT_SIZE,
    Entry,
    leaf_hash,
    payload_hash,
    signing_message,
)
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.ledger import KEY_ROTATED, Ledger
from memseal.ledger.merkle import verify_inclusion
from memseal.ledger.note import VerifierKey, open_note, parse_vkey, split_note
from memseal.ledger.verify import _decode as decode_checked_entry

from .calls import (
    RUN_FORKED,
    RUN_STARTED,
    TOOL_CALL,
    RunStarted,
    ToolCall,
    decode_tool_call,
    decode_tool_call_payload,
)
from .results import restore, result_hash

__all__ = [
    "FORMAT",
    "MEMORY_KINDS",
    "Bundle",
    "BundleCall",
    "BundleEntry",
    "VerifiedBundle",
    "decode_bundle",
    "encode_bundle",
    "export_bundle",
    "verify_bundle",
]

FORMAT: Final = "memseal/bundle@v1"
RUN_KINDS: Final = frozenset({RUN_STARTED, TOOL_CALL, RUN_FORKED})
MEMORY_KINDS: Final = frozenset({"memory_stored", "trust_changed", "memory_forgotten"})
#: A bundle larger than this is refused before it is parsed.
MAX_BUNDLE_BYTES: Final = 256 * 1024 * 1024
_FORMAT_PREFIX = re.compile(rb'\{"format":"([^"]{1,64})"')


class BundleEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ledger entry as the log stored it, with its inclusion proof."""

    seq: int
    leaf: bytes
    sig: bytes
    salt: bytes | None
    payload: bytes | None
    proof: tuple[bytes, ...]


class Bundle(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A session bundle, field order as encoded (``format`` first)."""

    format: str
    run_id: str
    origin: str
    keys: tuple[str, ...]
    checkpoint: str
    embedders: tuple[str, ...]
    entries: tuple[BundleEntry, ...]


class BundleCall(msgspec.Struct, frozen=True, kw_only=True):
    """One verified recorded call of the run."""

    seq: int
    at: str
    call: ToolCall
    arguments: Any  # None when a forget erased them, or the call failed (see withheld)
    result: Any  # texts restored; {"forgotten": true} where erased
    withheld: list[str] | None = None  # a failed call's salted digest of its arguments


class VerifiedBundle(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`verify_bundle` returns: the bundle, its checked entries and calls."""

    bundle: Bundle
    size: int
    root: bytes
    entries: dict[int, Entry]
    calls: tuple[BundleCall, ...]  # the effective call of each step, by step
    superseded: tuple[int, ...]
    started: RunStarted | None
    keys: tuple[str, ...]  # signing keys seen

    @property
    def run_id(self) -> str:
        return self.bundle.run_id

    def line(self) -> str:
        return (
            f"ok: bundle of run {self.run_id!r}: {len(self.entries)} entries verified against "
            f"checkpoint {self.size} (root {self.root.hex()[:16]}), {len(self.calls)} call(s), "
            f"{len(self.keys)} signing key(s)"
        )


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Bundle)


def encode_bundle(bundle: Bundle) -> bytes:
    """The bundle's bytes: compact JSON in field order, then one newline."""
    return _encoder.encode(bundle) + b"\n"


def decode_bundle(data: bytes) -> Bundle:
    """Parse a bundle (syntax only); raise VerificationError step ``format``."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise VerificationError(
            f"the bundle is larger than {MAX_BUNDLE_BYTES} bytes", step="format"
        )
    found = _FORMAT_PREFIX.match(data)
    if found is None:
        raise VerificationError(
            f'not a memseal bundle: it must start with {{"format":"{FORMAT}"', step="format"
        )
    if found.group(1) != FORMAT.encode():
        raise VerificationError(
            f"bundle format {found.group(1).decode(errors='replace')!r}; "
            f"this memseal reads {FORMAT}",
            step="format",
        )
    try:
        bundle = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc).lower():
            raise VerificationError(
                f"the bundle is truncated ({len(data)} bytes): {exc}", step="truncated"
            ) from None
        raise VerificationError(f"the bundle is malformed: {exc}", step="format") from None
    except msgspec.ValidationError as exc:
        raise VerificationError(f"the bundle is malformed: {exc}", step="format") from None
    return bundle


# -- export ------------------------------------------------------------------------------------


def _body(entry: Entry) -> Any:
    try:
        return msgspec.json.decode(entry.body)
    except msgspec.DecodeError:
        return None


def _items_of(kind: str, body: Any) -> list[str]:
    if not isinstance(body, dict):
        return []
    if kind == "memory_forgotten":
        items = body.get("items")
        return [i for i in items if isinstance(i, str)] if isinstance(items, list) else []
    item = body.get("item")
    return [item] if isinstance(item, str) else []


async def export_bundle(
    ledger: Ledger,
    keys: Sequence[VerifierKey],
    run_id: str,
    *,
    embedders: Sequence[str] = (),
) -> Bundle:
    """Collect run ``run_id`` from ``ledger`` into a bundle against a checkpoint cut now.

    ``keys`` is the ledger's key history, oldest first. Raises
    :class:`InvalidRequest` when the log holds no entry of the run.
    """
    note = await ledger.checkpoint()
    text, _ = split_note(note)
    size = parse_checkpoint(text).size
    run_seqs: list[int] = []
    rotations: list[int] = []
    by_item: dict[str, list[int]] = {}
    wanted: set[str] = set()
    wrote: list[int] = []
    async for record in ledger.scan(0, size):
        entry = record.entry()
        kind = entry.kind
        if kind == KEY_ROTATED:
            rotations.append(record.seq)
        elif kind in MEMORY_KINDS:
            for item in _items_of(kind, _body(entry)):
                by_item.setdefault(item, []).append(record.seq)
        elif kind in RUN_KINDS:
            body = _body(entry)
            if not isinstance(body, dict) or body.get("run_id") != run_id:
                continue
            run_seqs.append(record.seq)
            if kind == TOOL_CALL:
                call = decode_tool_call(bytes(entry.body))
                wanted.update(call.cites)
                wrote.extend(call.wrote)
    if not run_seqs:
        raise InvalidRequest(f"no run {run_id!r} in this ledger")
    for seq in wrote:
        # What the run's own writes made (a store's item, a trust change's item, a forget's items).
        entry = (await ledger.read(seq)).entry()
        wanted.update(_items_of(entry.kind, _body(entry)))
    seqs = set(run_seqs) | set(rotations)
    for item in wanted:
        seqs.update(by_item.get(item, ()))
    # A payload missing from an included entry was erased by a signed entry: include it too.
    pending = sorted(seqs)
    while pending:
        seq = pending.pop()
        record = await ledger.read(seq)
        if record.payload is None and record.entry().payload_hash is not None:
            by = await ledger.store.redacted_by(seq)
            if by is not None and by < size and by not in seqs:
                seqs.add(by)
                pending.append(by)
    entries: list[BundleEntry] = []
    for seq in sorted(seqs):
        record = await ledger.read(seq)
        proof = await ledger.inclusion_proof(seq, size)
        entries.append(
            BundleEntry(
                seq=seq,
                leaf=record.leaf,
                sig=record.signature,
                salt=record.salt if record.payload is not None else None,
                payload=record.payload,
                proof=proof.hashes,
            )
        )
    return Bundle(
        format=FORMAT,
        run_id=run_id,
        origin=ledger.origin,
        keys=tuple(k.text for k in keys),
        checkpoint=note,
        embedders=tuple(embedders),
        entries=tuple(entries),
    )


# -- verification ------------------------------------------------------------------------------


def _fail(message: str, step: str, seq: int | None = None) -> VerificationError:
    return VerificationError(message, seq=seq, step=step)


def verify_bundle(data: bytes | Bundle, trust: Sequence[VerifierKey] | str) -> VerifiedBundle:
    """Check a bundle offline against the trusted key(s); raise VerificationError naming the step.

    In order: the document's ``format`` (``truncated`` for a cut-off file);
    the checkpoint's form; per entry, ascending: ``format`` (canonical v1
    bytes carrying their seq), ``unknown key`` (signed by a key reachable
    from the trusted one through ``key_rotated`` entries), ``signature``,
    ``payload hash``, ``inclusion`` (the audit path leads to the
    checkpoint's root); then ``checkpoint`` (signed by the key in force at
    its size), ``redaction`` (a missing payload was erased by an included
    signed entry), and the run itself: ``run`` (its calls' skeletons match
    their signed result hashes, texts match their references) and
    ``completeness`` (every item a result cites has its signed entry here).
    """
    if isinstance(trust, str):
        try:
            trusted = [parse_vkey(trust.strip())]
        except InvalidRequest as exc:
            raise InvalidRequest(f"`trust`: {exc}") from exc
    else:
        trusted = list(trust)
    if not trusted:
        raise InvalidRequest("`trust` names no key")
    bundle = data if isinstance(data, Bundle) else decode_bundle(data)
    if bundle.format != FORMAT:
        raise _fail(f"bundle format {bundle.format!r}; this memseal reads {FORMAT}", "format")
    try:
        text, _ = split_note(bundle.checkpoint)
        checkpoint = parse_checkpoint(text)
    except InvalidRequest as exc:
        raise _fail(f"the bundle's checkpoint is malformed: {exc}", "checkpoint") from None
    if checkpoint.origin != bundle.origin:
        raise _fail(
            f"the checkpoint's origin {checkpoint.origin!r} is not the bundle's {bundle.origin!r}",
            "checkpoint",
        )
    size, root = checkpoint.size, checkpoint.root
    active: dict[str, VerifyKey] = {k.key_id.hex(): VerifyKey(k.public_key) for k in trusted}
    names = {k.key_id.hex(): k for k in trusted}
    retired: set[str] = set()
    used: dict[str, None] = {}
    entries: dict[int, Entry] = {}
    missing: list[int] = []
    redacted: set[int] = set()
    previous = -1
    for item in bundle.entries:
        seq = item.seq
        if seq <= previous:
            raise _fail("entries must be listed by ascending seq, once each", "format", seq)
        if seq >= size:
            raise _fail(f"entry lies outside the checkpoint of {size} entries", "inclusion", seq)
        previous = seq
        entry = decode_checked_entry(item.leaf, seq)  # format: canonical v1, right seq
        key = active.get(entry.key)
        if key is None:
            raise _fail(
                f"signed by key {entry.key}, which is not reachable from the trusted key",
                "unknown key",
                seq,
            )
        digest = leaf_hash(item.leaf)
        try:
            key.verify(signing_message(digest), item.sig)
        except (BadSignatureError, ValueError, TypeError):
            raise _fail("Ed25519 signature does not verify", "signature", seq) from None
        used[entry.key] = None
        if item.payload is not None:
            if entry.payload_hash is None:
                raise _fail("a payload is given but the entry commits to none", "payload hash", seq)
            if item.salt is None or len(item.salt) != SALT_SIZE:
                raise _fail("the payload salt is not 16 bytes", "payload hash", seq)
            if payload_hash(item.salt, item.payload) != entry.payload_hash:
                raise _fail("payload does not match its hash", "payload hash", seq)
        elif item.salt is not None:
            raise _fail("a salt without a payload", "payload hash", seq)
        elif entry.payload_hash is not None:
            missing.append(seq)
        redacted.update(entry.redacts)
        try:
            verify_inclusion(seq, size, digest, item.proof, root)
        except VerificationError as exc:
            raise _fail(
                f"the inclusion proof does not lead to the checkpoint's root: {exc}",
                "inclusion",
                seq,
            ) from None
        if entry.kind == KEY_ROTATED:
            try:
                new = parse_vkey(msgspec.json.decode(entry.body)["vkey"])
            except (msgspec.DecodeError, KeyError, TypeError, InvalidRequest) as exc:
                raise _fail(f"key_rotated names no valid vkey: {exc}", "format", seq) from None
            new_id = new.key_id.hex()
            if new_id == entry.key or new_id in retired:
                raise _fail("key_rotated must hand over to a new key", "unknown key", seq)
            active.pop(entry.key, None)
            retired.add(entry.key)
            active[new_id] = VerifyKey(new.public_key)
            names[new_id] = new
        entries[seq] = entry
    try:
        open_note(bundle.checkpoint, [names[k] for k in active])
    except (VerificationError, InvalidRequest) as exc:
        raise _fail(
            f"the checkpoint is not signed by the key in force at size {size}: {exc}",
            "checkpoint",
            size - 1 if size else None,
        ) from None
    for seq in missing:
        if seq not in redacted:
            raise _fail(
                "payload is missing and no signed entry in the bundle erased it", "redaction", seq
            )
    calls, superseded, started = _run_of(bundle, entries)
    return VerifiedBundle(
        bundle=bundle,
        size=size,
        root=root,
        entries=entries,
        calls=calls,
        superseded=superseded,
        started=started,
        keys=tuple(f"{names[k].name}+{k}" for k in used),
    )


def _run_of(
    bundle: Bundle, entries: Mapping[int, Entry]
) -> tuple[tuple[BundleCall, ...], tuple[int, ...], RunStarted | None]:
    payloads = {e.seq: e.payload for e in bundle.entries}
    stored_items: set[str] = set()
    for entry in entries.values():
        if entry.kind == "memory_stored":
            stored_items.update(_items_of(entry.kind, _body(entry)))
    by_step: dict[int, BundleCall] = {}
    superseded: list[int] = []
    started: RunStarted | None = None
    seen_run = False
    for seq, entry in sorted(entries.items()):
        if entry.kind not in RUN_KINDS:
            continue
        body = _body(entry)
        if not isinstance(body, dict) or body.get("run_id") != bundle.run_id:
            raise _fail(f"a {entry.kind} entry of another run", "run", seq)
        seen_run = True
        if entry.kind == RUN_STARTED:
            if started is None:
                try:
                    started = msgspec.convert(body, RunStarted)
                except msgspec.ValidationError as exc:
                    raise _fail(f"run_started body: {exc}", "run", seq) from None
            continue
        if entry.kind != TOOL_CALL:
            continue
        try:
            call = decode_tool_call(bytes(entry.body))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _fail(f"not a tool call body: {exc}", "run", seq) from None
        if result_hash(call.result) != call.result_hash:
            raise _fail("the result does not match the signed result hash", "run", seq)
        arguments: Any = None
        withheld: list[str] | None = None
        texts: dict[str, list[str]] | None = None
        payload = payloads.get(seq)
        if payload is not None:
            try:
                decoded = decode_tool_call_payload(payload)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise _fail(f"the payload is malformed: {exc}", "run", seq) from None
            arguments, texts = decoded.arguments, decoded.texts
            if decoded.withheld is not msgspec.UNSET:
                withheld = decoded.withheld
        try:
            result = restore(call.result, texts, None)
        except ValueError as exc:
            raise _fail(str(exc), "run", seq) from None
        if texts is None:
            result = _mark_forgotten(result)
        for item in call.cites:
            if item not in stored_items:
                raise _fail(
                    f"step {call.step} cites item {item}, whose memory_stored entry is not "
                    "in the bundle",
                    "completeness",
                    seq,
                )
        previous = by_step.get(call.step)
        if previous is not None:
            superseded.append(previous.seq)
        by_step[call.step] = BundleCall(
            seq=seq, at=entry.at, call=call, arguments=arguments, result=result, withheld=withheld
        )
    if not seen_run:
        raise _fail(f"the bundle holds no entry of run {bundle.run_id!r}", "run")
    steps = sorted(by_step)
    if steps != list(range(len(steps))):
        gap = next(i for i, s in enumerate(steps) if s != i)
        raise _fail(f"step {gap} of the run is missing from the bundle", "completeness")
    return tuple(by_step[s] for s in steps), tuple(superseded), started


def _mark_forgotten(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"forgotten_at"}:
            return {"forgotten": True}
        return {k: _mark_forgotten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_forgotten(v) for v in value]
    return value
