"""Verifying a session bundle offline, with the rigour of a full ledger audit.

:func:`verify_bundle` checks a bundle against one trusted vkey: its form,
its extent against the signed manifest, every entry (signature, payload,
inclusion in the checkpoint), the key chain, the checkpoint and manifest
signatures, and then the run itself, whose calls it decodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from memseal.ledger.checkpoint import parse_checkpoint
from memseal.ledger.entry import RESIDUE_SALT, Entry, decode_residue, leaf_hash
from memseal.ledger.entry_check import KeyChain, check_entry
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.merkle import verify_inclusion
from memseal.ledger.note import Note, VerifierKey, open_note, parse_vkey, split_note
from memseal.ledger.verify import check_payload
from memseal.replay.runs._sent import MAX_KEY_CHARS
from memseal.replay.runs.calls import (
    RUN_STARTED,
    TOOL_CALL,
    RunStarted,
    decode_tool_call,
    decode_tool_call_payload,
)
from memseal.replay.runs.results import restore, result_hash

from ._bundle_format import (
    FORMAT,
    READABLE_FORMATS,
    RUN_KINDS,
    Bundle,
    BundleCall,
    BundleEntry,
    Manifest,
    PrefixEntry,
    VerifiedBundle,
    body_of,
    decode_bundle,
    items_of,
    manifest_of,
)
from ._bundle_format import fail as _fail
from ._bundle_reads import check_reads

__all__ = ["verify_bundle"]


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
    if bundle.format not in READABLE_FORMATS:
        raise _fail(f"bundle format {bundle.format!r}; this memseal reads {FORMAT}", "format")
    if bundle.reads is not None and bundle.format != FORMAT:
        raise _fail(f"a {bundle.format} bundle has no `reads` section", "format")
    manifest = manifest_of(bundle.manifest)
    # 2. completeness of the extent, before any entry is read: the seqs held are those listed.
    _check_extent([e.seq for e in bundle.entries], [e.seq for e in manifest.entries])
    # 3. checkpoint form: its size and root are what every entry is checked against.
    size, root = _checkpoint_of(bundle)
    # 4. each entry: format, unknown key, signature, payload hash, inclusion; key chain.
    chain = KeyChain(trusted)
    entries, prefix, missing, redacted = _check_entries(bundle, chain, size, root)
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
    # 8. reads: every entry before the last read, its roots and payloads (_bundle_reads).
    if bundle.reads is not None or manifest.reads is not None:
        check_reads(bundle, manifest, entries, prefix, started, chain.known, size, root, redacted)
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
        prefix=prefix,
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


def _walk_order(bundle: Bundle) -> list[BundleEntry | PrefixEntry]:
    """The bundle's entries and its reads section's prefix entries, merged by seq (the key
    chain is walked in log order; an entry before a prefix entry of the same seq)."""
    walk: list[BundleEntry | PrefixEntry] = list(bundle.entries)
    if bundle.reads is None:
        return walk
    previous = -1
    for item in bundle.reads.prefix:
        if item.seq <= previous:
            raise _fail(
                "prefix entries must be listed by ascending seq, once each",
                "completeness",
                item.seq,
            )
        previous = item.seq
    walk += bundle.reads.prefix
    return sorted(walk, key=lambda e: (e.seq, isinstance(e, PrefixEntry)))


def _check_entries(
    bundle: Bundle, chain: KeyChain, size: int, root: bytes
) -> tuple[dict[int, Entry], dict[int, Entry], list[int], set[int]]:
    """Check every entry in seq order, walking the key chain: (entries, prefix entries,
    missing, redacted)."""
    entries: dict[int, Entry] = {}
    prefix: dict[int, Entry] = {}
    missing: list[int] = []
    redacted: set[int] = set()
    previous = -1
    last_entry = -1
    for item in _walk_order(bundle):
        seq = item.seq
        if isinstance(item, PrefixEntry):
            if seq == previous:
                raise _fail(
                    "the entry is both in the bundle's entries and its prefix", "completeness", seq
                )
            entry = _check_prefix_entry(item, chain)
            redacted.update(entry.redacts)
            prefix[seq] = entry
            previous = seq
            continue
        if seq <= last_entry:
            raise _fail("entries must be listed by ascending seq, once each", "completeness", seq)
        if seq >= size:
            raise _fail(f"entry lies outside the checkpoint of {size} entries", "inclusion", seq)
        previous = last_entry = seq
        # The ledger's own checks, as its audit makes them: the one entry check (format,
        # unknown key, signature), then the payload hash (ledger/verify.py).
        entry = check_entry(item.leaf, item.sig, chain, seq=seq)
        digest = leaf_hash(item.leaf)
        if item.payload is None and item.salt is not None:
            raise _fail("a salt without a payload", "payload hash", seq)
        if check_payload(entry, item.payload, item.salt) and entry.kind != "memory_forgotten":
            # A forget travels without its payload (who forgot and why): its effect is its
            # signed body and header.
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
    return entries, prefix, missing, redacted


def _check_prefix_entry(item: PrefixEntry, chain: KeyChain) -> Entry:
    """A prefix entry's form, key, signature and any payload given; its inclusion is the
    root its checkpoints sign, recomputed from every leaf (``check_reads``)."""
    entry = check_entry(item.leaf, item.sig, chain, seq=item.seq)
    if item.payload is None and item.salt is not None:
        raise _fail("a salt without a payload", "payload hash", item.seq)
    check_payload(entry, item.payload, item.salt)
    chain.hand_over(entry)
    return entry


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
    # A v2 manifest states no format; from v3 on it does, so the name is signed too.
    if (manifest.format or "memseal/bundle@v2") != bundle.format:
        raise _fail(
            f"the bundle says format {bundle.format!r}; the signed manifest "
            f"{'states ' + repr(manifest.format) if manifest.format else 'is of a v2 bundle'}",
            "manifest",
        )
    for field in ("run_id", "origin", "keys", "embedders"):
        if getattr(bundle, field) != getattr(manifest, field):
            raise _fail(f"`{field}` is not what the signed manifest states", "manifest")
    if manifest.ranked_by not in (None, "postgresql"):
        raise _fail(
            f"the signed manifest states ranked_by {manifest.ranked_by!r}; a run's reads are "
            "ranked by postgresql, or by sqlite when the field is absent",
            "manifest",
        )
    reads = manifest.reads
    if reads is not None and reads.ranked_by not in ("sqlite", "postgresql"):
        raise _fail(
            f"the signed manifest states a reads section ranked by {reads.ranked_by!r}; reads "
            "are ranked by sqlite or postgresql",
            "manifest",
        )
    if manifest.ranked_by is not None and reads is not None and reads.ranked_by != "postgresql":
        raise _fail(
            f"the signed manifest states ranked_by {manifest.ranked_by!r} and a reads "
            f"section ranked by {reads.ranked_by!r}",
            "manifest",
        )


def _run_of(
    bundle: Bundle, entries: Mapping[int, Entry]
) -> tuple[tuple[BundleCall, ...], tuple[int, ...], RunStarted | None]:
    """The run's effective call of each step, the seqs superseded, and its start."""
    payloads = {e.seq: e.payload for e in bundle.entries}
    residues = {e.seq for e in bundle.entries if e.salt == RESIDUE_SALT}
    stored_items: set[str] = set()
    for entry in entries.values():
        if entry.kind == "memory_stored":
            stored_items.update(items_of(entry.kind, body_of(entry)))
    by_step: dict[int, BundleCall] = {}
    superseded: list[int] = []
    started: RunStarted | None = None
    seen_run = False
    for seq, entry in sorted(entries.items()):
        if entry.kind not in RUN_KINDS:
            continue
        body = body_of(entry)
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
        found = _call_of(seq, entry, payloads.get(seq), seq in residues)
        for item in found.call.cites:
            if item not in stored_items:
                raise _fail(
                    f"step {found.call.step} cites item {item}, whose memory_stored entry is "
                    "not in the bundle",
                    "completeness",
                    seq,
                )
        previous = by_step.get(found.call.step)
        if previous is not None:
            superseded.append(previous.seq)
        by_step[found.call.step] = found
    if not seen_run:
        raise _fail(f"the bundle holds no entry of run {bundle.run_id!r}", "run")
    steps = sorted(by_step)
    if steps != list(range(len(steps))):
        gap = next(i for i, s in enumerate(steps) if s != i)
        raise _fail(f"step {gap} of the run is missing from the bundle", "completeness")
    _check_keys(by_step)
    return tuple(by_step[s] for s in steps), tuple(superseded), started


def _check_keys(by_step: Mapping[int, BundleCall]) -> None:
    """A call key (signed in its call's body) names one step of the run, and is a valid key."""
    seen: dict[str, int] = {}
    for step, found in sorted(by_step.items()):
        key = found.call.key
        if key is msgspec.UNSET:
            continue
        if not 1 <= len(key) <= MAX_KEY_CHARS:
            raise _fail(
                f"step {step}'s call key is not 1 to {MAX_KEY_CHARS} characters", "run", found.seq
            )
        if key in seen:
            raise _fail(
                f"call key {key!r:.80} is at steps {seen[key]} and {step}: one logical call "
                "recorded twice",
                "run",
                found.seq,
            )
        seen[key] = step


def _call_of(seq: int, entry: Entry, payload: bytes | None, residue: bool) -> BundleCall:
    """One ``memory_tool_call`` entry decoded and checked: its body, result and payload."""
    try:
        call = decode_tool_call(bytes(entry.body))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _fail(f"not a tool call body: {exc}", "run", seq) from None
    if result_hash(call.result) != call.result_hash:
        raise _fail("the result does not match the signed result hash", "run", seq)
    arguments: Any = None
    withheld: list[str] | None = None
    texts: dict[str, list[str]] | None = None
    partial = payload is not None and residue
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
    return BundleCall(
        seq=seq, at=entry.at, call=call, arguments=arguments, result=result, withheld=withheld
    )


def _mark_forgotten(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"forgotten_at"}:
            return {"forgotten": True}
        return {k: _mark_forgotten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_forgotten(v) for v in value]
    return value
