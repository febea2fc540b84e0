"""Session bundles (format ``memseal/bundle@v2``): one run, exported and verified offline.

A bundle is one JSON document (see docs/formats.md for every byte): the
run's own entries (``run_started``, ``memory_tool_call``, ``run_forked``),
the memory entries its results cite and its writes made (``memory_stored``,
``trust_changed``, ``memory_forgotten``), every ``key_rotated`` entry, each
with its stored bytes, signature, payload (unless a signed forget erased it)
and an RFC 6962 inclusion proof against the signed checkpoint it carries;
and a signed *manifest*, a note made at export by the key that signed the
checkpoint, stating the bundle's extent (every entry's seq, leaf hash and
whether its payload is present; the run's last step and call count) and
every other field a verifier or a replay reads (run id, origin, keys,
embedders), bound to the checkpoint's size and root.

:func:`export_bundle` cuts a checkpoint and collects all of that from a
ledger; :func:`verify_bundle` checks a bundle against one trusted vkey with
the rigour of a full ledger audit, then decodes the run's calls. A bundle
is read only in its canonical bytes, so each bundle has one spelling and a
changed byte is always a changed value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from memseal.ledger.checkpoint import parse_checkpoint
from memseal.ledger.entry import (
    RESIDUE_SALT,
    Entry,
    decode_residue,
    leaf_hash,
)
from memseal.ledger.errors import Conflict, InvalidRequest, VerificationError
from memseal.ledger.log import KEY_ROTATED, Ledger
from memseal.ledger.merkle import verify_inclusion
from memseal.ledger.note import (
    Note,
    VerifierKey,
    open_note,
    parse_vkey,
    sign_note,
    split_note,
)
from memseal.ledger.verify import KeyChain, check_format, check_payload, signature_verifies

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
    "MANIFEST_HEADER",
    "MEMORY_KINDS",
    "Bundle",
    "BundleCall",
    "BundleEntry",
    "Listed",
    "Manifest",
    "VerifiedBundle",
    "decode_bundle",
    "encode_bundle",
    "export_bundle",
    "verify_bundle",
]

FORMAT: Final = "memseal/bundle@v2"
#: Formats this memseal knows but refuses: they carry no signed statement of their extent.
RETIRED_FORMATS: Final = frozenset({"memseal/bundle@v1"})
#: The first line of a manifest note's text (never a valid checkpoint's: its second line is
#: JSON, not a tree size, so neither signature can pass as the other).
MANIFEST_HEADER: Final = "memseal/bundle-manifest/v1"
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
    manifest: str
    embedders: tuple[str, ...]
    entries: tuple[BundleEntry, ...]


class Listed(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, array_like=True
):
    """One entry as the manifest lists it: ``[seq, leaf hash, payload present]``."""

    seq: int
    leaf_hash: bytes
    payload: bool


class Manifest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The signed statement of a bundle's extent and fields (the JSON line of its note)."""

    run_id: str
    origin: str
    size: int  # the checkpoint's tree size ...
    root: bytes  # ... and root: the manifest is made for that checkpoint only
    keys: tuple[str, ...]
    embedders: tuple[str, ...]
    last_step: int | None  # the run's highest recorded step (None: no call recorded)
    calls: int  # its memory_tool_call entries, superseded ones included
    entries: tuple[Listed, ...]


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
    manifest: Manifest

    @property
    def run_id(self) -> str:
        """The id of the run the bundle holds."""
        return self.bundle.run_id

    def line(self) -> str:
        """The one line ``memseal verify`` prints for a verified bundle."""
        return (
            f"ok: bundle of run {self.run_id!r}: {len(self.entries)} entries verified against "
            f"checkpoint {self.size} (root {self.root.hex()[:16]}), {len(self.calls)} call(s), "
            f"{len(self.keys)} signing key(s)"
        )


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Bundle)
_manifest_decoder = msgspec.json.Decoder(Manifest)


def encode_bundle(bundle: Bundle) -> bytes:
    """The bundle's bytes: compact JSON in field order, then one newline."""
    return _encoder.encode(bundle) + b"\n"


def decode_bundle(data: bytes) -> Bundle:
    """Parse a bundle (syntax only); raise VerificationError step ``format``.

    Only the canonical bytes (exactly what :func:`encode_bundle` makes of the
    decoded value) are accepted: a second spelling of the same values (other
    whitespace, escapes, base64 padding bits) would be an edit that verifies.
    """
    if len(data) > MAX_BUNDLE_BYTES:
        raise VerificationError(
            f"the bundle is larger than {MAX_BUNDLE_BYTES} bytes", step="format"
        )
    found = _FORMAT_PREFIX.match(data)
    if found is None:
        raise VerificationError(
            f'not a memseal bundle: it must start with {{"format":"{FORMAT}"', step="format"
        )
    name = found.group(1).decode(errors="replace")
    if name in RETIRED_FORMATS:
        raise VerificationError(
            f"bundle format {name!r} carries no signed statement of its extent, so a cut "
            f"copy would pass as whole: this memseal refuses it; re-export the run with "
            f"`memseal export` to get a {FORMAT} bundle",
            step="format",
        )
    if name != FORMAT:
        raise VerificationError(
            f"bundle format {name!r}; this memseal reads {FORMAT}", step="format"
        )
    try:
        bundle = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc).lower():
            raise VerificationError(
                f"the bundle is truncated ({len(data)} bytes): {exc}", step="truncated"
            ) from None
        raise VerificationError(
            f"the bundle is malformed: {_one_line(exc)}", step="format"
        ) from None
    except msgspec.ValidationError as exc:
        raise VerificationError(
            f"the bundle is malformed: {_one_line(exc)}", step="format"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        # msgspec raises these for invalid UTF-8 in a string, among others.
        raise VerificationError(
            f"the bundle is malformed: {_one_line(exc)}", step="format"
        ) from None
    if encode_bundle(bundle) != data:
        raise VerificationError(
            "the bundle is not in canonical form (compact JSON in field order, minimal "
            "escapes, canonical base64, one final newline): it was changed after export",
            step="format",
        )
    return bundle


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


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

    ``keys`` is the ledger's key history, oldest first. The manifest is
    signed by the ledger's signer, the key that signed the checkpoint (so
    the key in force at its size). Raises :class:`InvalidRequest` when the
    log holds no entry of the run, :class:`Conflict` when the key rotated
    between the checkpoint and the manifest (export again).
    """
    note = await ledger.checkpoint()
    text, _ = split_note(note)
    checkpoint = parse_checkpoint(text)
    size = checkpoint.size
    signer = ledger.signer
    try:
        open_note(note, [signer.verifier])
    except VerificationError:
        raise Conflict(
            "the ledger's key rotated while the bundle was exported; export it again"
        ) from None
    seqs, steps = await _bundled_seqs(ledger, run_id, size)
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
    manifest = Manifest(
        run_id=run_id,
        origin=ledger.origin,
        size=size,
        root=checkpoint.root,
        keys=tuple(k.text for k in keys),
        embedders=tuple(embedders),
        last_step=max(steps) if steps else None,
        calls=len(steps),
        entries=tuple(
            Listed(seq=e.seq, leaf_hash=leaf_hash(e.leaf), payload=e.payload is not None)
            for e in entries
        ),
    )
    return Bundle(
        format=FORMAT,
        run_id=manifest.run_id,
        origin=manifest.origin,
        keys=manifest.keys,
        checkpoint=note,
        manifest=sign_note(manifest_text(manifest), [signer]),
        embedders=manifest.embedders,
        entries=tuple(entries),
    )


async def _bundled_seqs(ledger: Ledger, run_id: str, size: int) -> tuple[set[int], list[int]]:
    """The seqs a bundle of the run holds (module docstring), and the steps of its calls."""
    steps: list[int] = []
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
                steps.append(call.step)
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
    return seqs, steps


def manifest_text(manifest: Manifest) -> str:
    """The text a manifest note signs: its header line, then the manifest as one JSON line."""
    return f"{MANIFEST_HEADER}\n{_encoder.encode(manifest).decode()}\n"


def _manifest_of(note: str) -> Manifest:
    """The manifest a note states, unverified (its signature is checked after the key walk)."""
    try:
        text, _ = split_note(note)
    except InvalidRequest as exc:
        raise _fail(f"the manifest note is malformed: {exc}", "manifest") from None
    header, _, rest = text.partition("\n")
    line, _, tail = rest.partition("\n")
    if header != MANIFEST_HEADER or tail:
        raise _fail(
            f"the manifest note's text is not {MANIFEST_HEADER!r} and one JSON line", "manifest"
        )
    try:
        manifest = _manifest_decoder.decode(line.encode())
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _fail(f"the manifest is malformed: {_one_line(exc)}", "manifest") from None
    if manifest_text(manifest) != text:
        # One spelling per manifest, as for the bundle itself.
        raise _fail("the manifest is not in canonical form", "manifest")
    return manifest


# -- verification ------------------------------------------------------------------------------


def _fail(message: str, step: str, seq: int | None = None) -> VerificationError:
    return VerificationError(message, seq=seq, step=step)


def verify_bundle(data: bytes | Bundle, trust: Sequence[VerifierKey] | str) -> VerifiedBundle:
    """Check a bundle offline against the trusted key(s); raise VerificationError naming the step.

    In order: the document's ``format`` (``truncated`` for a cut-off file,
    canonical bytes only, a retired format refused with a re-export hint);
    the manifest's form, and ``completeness`` of the seqs held against the
    seqs it lists (nothing cut, added, reordered or repeated); the
    checkpoint's form; per entry, ascending: ``format`` (canonical v1 bytes
    carrying their seq), ``unknown key`` (signed by a key reachable from the
    trusted one through ``key_rotated`` entries), ``signature``, ``payload
    hash``, ``inclusion`` (the audit path leads to the checkpoint's root);
    then ``checkpoint`` (signed by the key in force at its size, every
    signature checked), ``manifest`` (signed by that key too, made for this
    checkpoint, and stating exactly the bundle's run id, origin, keys and
    embedders), ``completeness`` (each entry's leaf hash and payload presence
    as listed), ``redaction`` (a missing payload was erased by an included
    signed entry), and the run itself: ``run`` (its calls' skeletons match
    their signed result hashes, texts match their references) and
    ``completeness`` (the stated last step and call count, no step missing,
    every item a result cites has its signed entry here).
    """
    trusted = _trusted(trust)
    # 1. format: the document, canonical; the manifest's statement, not yet trusted.
    bundle = data if isinstance(data, Bundle) else decode_bundle(data)
    if bundle.format != FORMAT:
        raise _fail(f"bundle format {bundle.format!r}; this memseal reads {FORMAT}", "format")
    manifest = _manifest_of(bundle.manifest)
    # 2. completeness of the extent, before any entry is read: the seqs held are those listed.
    _check_extent([e.seq for e in bundle.entries], [e.seq for e in manifest.entries])
    # 3. checkpoint form: its size and root are what every entry is checked against.
    size, root = _checkpoint_of(bundle)
    # 4. each entry: format, unknown key, signature, payload hash, inclusion; key chain.
    chain = KeyChain(trusted)
    entries, missing, redacted = _check_entries(bundle, chain, size, root)
    # 5. checkpoint and manifest: signed by the key in force at the checkpoint's size.
    _check_signed(bundle, manifest, chain, size, root)
    # 6. completeness and redaction: the entries are the ones the signed manifest lists.
    _check_listed(bundle, manifest)
    for seq in missing:
        if seq not in redacted:
            raise _fail(
                "payload is missing and no signed entry in the bundle erased it", "redaction", seq
            )
    # 7. run: its calls, then the extent the manifest states for it.
    calls, superseded, started = _run_of(bundle, entries)
    count = sum(1 for e in entries.values() if e.kind == TOOL_CALL)
    last = calls[-1].call.step if calls else None
    if (manifest.last_step, manifest.calls) != (last, count):
        raise _fail(
            f"the signed manifest states last step {manifest.last_step} and "
            f"{manifest.calls} call(s); the bundle holds last step {last} and {count}",
            "completeness",
        )
    return VerifiedBundle(
        bundle=bundle,
        size=size,
        root=root,
        entries=entries,
        calls=calls,
        superseded=superseded,
        started=started,
        keys=chain.used,
        manifest=manifest,
    )


def _trusted(trust: Sequence[VerifierKey] | str) -> list[VerifierKey]:
    """The trusted keys as given (a vkey line or keys); raise InvalidRequest naming ``trust``."""
    if isinstance(trust, str):
        try:
            trusted = [parse_vkey(trust.strip())]
        except InvalidRequest as exc:
            raise InvalidRequest(f"`trust`: {exc}") from exc
    else:
        trusted = list(trust)
    if not trusted:
        raise InvalidRequest("`trust` names no key")
    return trusted


def _checkpoint_of(bundle: Bundle) -> tuple[int, bytes]:
    """The checkpoint's size and root, unverified (its signature is checked after the walk)."""
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
    return checkpoint.size, checkpoint.root


def _check_entries(
    bundle: Bundle, chain: KeyChain, size: int, root: bytes
) -> tuple[dict[int, Entry], list[int], set[int]]:
    """Check every entry in seq order, walking the key chain: (entries, missing, redacted)."""
    entries: dict[int, Entry] = {}
    missing: list[int] = []
    redacted: set[int] = set()
    previous = -1
    for item in bundle.entries:
        seq = item.seq
        if seq <= previous:
            raise _fail("entries must be listed by ascending seq, once each", "completeness", seq)
        if seq >= size:
            raise _fail(f"entry lies outside the checkpoint of {size} entries", "inclusion", seq)
        previous = seq
        # The ledger's own checks, as its audit makes them: format, unknown key, signature,
        # payload hash (ledger/verify.py).
        entry = check_format(item.leaf, seq)
        key = chain.signer_of(entry)
        digest = leaf_hash(item.leaf)
        if not signature_verifies(key, digest, item.sig):
            raise _fail("Ed25519 signature does not verify", "signature", seq)
        if item.payload is None and item.salt is not None:
            raise _fail("a salt without a payload", "payload hash", seq)
        if check_payload(entry, item.payload, item.salt):
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
        chain.hand_over(entry)
        entries[seq] = entry
    return entries, missing, redacted


def _check_signed(
    bundle: Bundle, manifest: Manifest, chain: KeyChain, size: int, root: bytes
) -> None:
    """The checkpoint and the manifest are signed by the key in force at ``size``."""
    known, in_force = chain.known, chain.in_force
    try:
        _open_signed(bundle.checkpoint, known, in_force)
    except VerificationError as exc:
        raise _fail(
            f"the checkpoint is not signed by the key in force at size {size}: {exc}",
            "checkpoint",
            size - 1 if size else None,
        ) from None
    try:
        _open_signed(bundle.manifest, known, in_force)
    except VerificationError as exc:
        raise _fail(
            f"the manifest is not signed by the key in force at size {size}: {exc}", "manifest"
        ) from None
    _check_manifest(bundle, manifest, size, root)


def _check_listed(bundle: Bundle, manifest: Manifest) -> None:
    """What the signed manifest lists is what the bundle holds, byte for byte."""
    for item, listed in zip(bundle.entries, manifest.entries, strict=True):
        if leaf_hash(item.leaf) != listed.leaf_hash:
            raise _fail(
                "the entry is not the one the signed manifest lists", "completeness", item.seq
            )
        if (item.payload is not None) != listed.payload:
            raise _fail(
                "the payload is missing, but the signed manifest says the export held it"
                if listed.payload
                else "a payload is given, but the signed manifest says the export held none",
                "completeness",
                item.seq,
            )


def _check_extent(held: Sequence[int], listed: Sequence[int]) -> None:
    """Raise ``completeness`` naming the first seq cut, added, moved or repeated."""
    if list(held) == list(listed):
        return
    seen: set[int] = set()
    previous = -1
    for seq in held:
        if seq in seen:
            raise _fail("the entry appears twice in the bundle", "completeness", seq)
        if seq < previous:
            raise _fail(
                f"entries are out of order (seq {seq} follows seq {previous}): they must be "
                "listed by ascending seq, once each",
                "completeness",
                seq,
            )
        seen.add(seq)
        previous = seq
    wanted = set(listed)
    for seq in listed:
        if seq not in seen:
            cut = len(wanted - seen)
            raise _fail(
                f"the signed manifest lists this entry but the bundle lacks it "
                f"({cut} of {len(listed)} listed entries missing: the bundle is not the whole "
                "run as exported)",
                "completeness",
                seq,
            )
    extra = next(s for s in held if s not in wanted)
    raise _fail("the entry is not in the signed manifest", "completeness", extra)


def _open_signed(note: str, chain: Sequence[VerifierKey], in_force: Sequence[VerifierKey]) -> Note:
    """Open a note whose every signature is by a key of the chain, one of them in force."""
    opened = open_note(note, chain)
    if opened.unverified:
        # An unchecked signature line would be bytes that change without failing.
        name, ident = opened.unverified[0]
        raise VerificationError(
            f"signed by {name}+{ident.hex()}, which is not in the key chain", step="note"
        )
    if not any(k in in_force for k in opened.verified):
        raise VerificationError("no signature by the key in force", step="note")
    return opened


def _check_manifest(bundle: Bundle, manifest: Manifest, size: int, root: bytes) -> None:
    """Every field a verifier or replay reads must be what the signed manifest states."""
    if (manifest.size, manifest.root) != (size, root):
        raise _fail(
            f"the signed manifest was made for the checkpoint of size {manifest.size}, not "
            f"the bundle's ({size})",
            "manifest",
        )
    for field in ("run_id", "origin", "keys", "embedders"):
        if getattr(bundle, field) != getattr(manifest, field):
            raise _fail(f"`{field}` is not what the signed manifest states", "manifest")


def _run_of(
    bundle: Bundle, entries: Mapping[int, Entry]
) -> tuple[tuple[BundleCall, ...], tuple[int, ...], RunStarted | None]:
    payloads = {e.seq: e.payload for e in bundle.entries}
    residues = {e.seq for e in bundle.entries if e.salt == RESIDUE_SALT}
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
        partial = payload is not None and seq in residues
        if payload is not None and partial:
            texts = decode_residue(payload)  # checked in step 3
        elif payload is not None:
            try:
                decoded = decode_tool_call_payload(payload)
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
                # A string of invalid UTF-8 is msgspec's UnicodeDecodeError, not a DecodeError.
                raise _fail(f"the payload is malformed: {exc}", "run", seq) from None
            arguments, texts = decoded.arguments, decoded.texts
            if decoded.withheld is not msgspec.UNSET:
                withheld = decoded.withheld
        try:
            # A residue lacks the forgotten texts: restore marks them, as for an erased payload.
            result = restore(call.result, texts, seq if partial else None)
        except ValueError as exc:
            raise _fail(str(exc), "run", seq) from None
        if texts is None or partial:
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
