"""Verifying a read proof offline: the entries check out, none is missing, and the read re-derives.

:func:`verify_read` needs the proof and one trusted vkey, no data folder. It
returns a :class:`VerifiedRead` or raises :class:`ReadProofError` (a
:class:`VerificationError`) naming the step, and the seq and field where
one is at fault. The steps, in order, as the code numbers them:

1. ``signature`` / ``unknown key`` / ``chain`` / ``completeness``: every entry
   is canonical v1 bytes at its seq, the prefix holds every seq from 0 with
   each ``prev`` the hash of the entry before, each signature verifies by the
   key in force (walked from the trusted key through ``key_rotated``
   entries), and both checkpoints are signed by keys of that chain (the later
   one by the key in force at its size), of the proof's origin.
2. ``tree root``: the RFC 6962 root of all prefix leaves is the checkpoint's
   root at exactly the call's observed size.
3. ``inclusion``: each entry in the call's reach, and each later entry, has
   an audit path to its checkpoint's root.
4. ``consistency``: the tree at the observed size is a prefix of the later
   checkpoint's tree.
5. ``payload hash``: every payload given matches its salted hash; every entry
   in reach has its payload, unless a signed entry of the prefix erased it
   (a ``memory_forgotten`` entry needs none: its effect is its signed body);
   the call's result matches its signed result hash.
6. ``read``: the call is a read of this run and step that observed exactly
   the prefix; a temporary log is rebuilt from the entries (in-reach entries
   with their payloads, the rest as inert gaps, so seqs stay put) and the
   recorded call runs again through the tools layer, in the run's scope,
   ranking full text as the proof's ``ranked_by`` store did (SQLite's BM25,
   or PostgreSQL's ``ts_rank`` re-computed by ``engine/_tsrank.py``).
7. ``result``: the new result is compared byte for byte (canonical JSON) with
   the recorded one; where that cannot hold for a reason the proof shows (a
   cursor's keyed ref, withheld texts for SQLite's BM25 scores, another
   embedder), only as much is left out as that reason needs, and the result
   says what (:mod:`._read_proof_compare`).

The reach of step 3 and 5 comes from the call's recorded scope, so the call
(step 6's first half) is decoded before step 5.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import msgspec

from memseal.engine.currency import following
from memseal.engine.embedders import Embedder
from memseal.ledger.checkpoint import Checkpoint, parse_checkpoint
from memseal.ledger.entry import GENESIS_PREV, RESIDUE_SALT, Entry, leaf_hash
from memseal.ledger.entry_check import KeyChain, check_entry
from memseal.ledger.errors import InvalidRequest, MemsealError, VerificationError
from memseal.ledger.log import TrustArg, trusted_keys
from memseal.ledger.merkle import (
    EMPTY_ROOT,
    MemoryHashStore,
    verify_consistency,
    verify_inclusion,
)
from memseal.ledger.note import VerifierKey, open_note, split_note
from memseal.ledger.verify import check_payload
from memseal.replay.runs.calls import (
    RUN_STARTED,
    TOOL_CALL,
    RunStarted,
    ToolCall,
    decode_tool_call,
    decode_tool_call_payload,
)
from memseal.replay.runs.results import restore, result_hash
from memseal.tools import MemoryTools
from memseal.tools.catalog import READ_TOOLS

from ._bundle_format import BundleCall
from ._compare import DEFAULT_TOLERANCE
from ._read_proof_compare import EmbedderChoice, Matched, choose_embedder, compare
from ._read_proof_format import (
    FORMAT,
    REDERIVED_KINDS,
    ProofEntry,
    ReadProof,
    ReadProofError,
    check_hints,
    decode_read_proof,
    fail,
    in_reach,
    ranks_text,
    scope_of,
    searches_vectors,
)
from ._temp_log import Source, clock_for, parse_time, source_of, temp_log

__all__ = ["EmbedderChoice", "VerifiedRead", "choose_embedder", "verify_read"]

_canonical = msgspec.json.Encoder(order="deterministic")


class VerifiedRead(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`verify_read` returns: the proven read and how it was re-derived."""

    run_id: str
    step: int
    tool: str
    seq: int  # the call entry's
    size: int  # the tree size the call observed (the prefix re-derived from)
    latest: int  # the later checkpoint's size
    root: bytes  # the root at ``size``
    arguments: Any
    result: Any  # the recorded result, texts restored (what the agent saw)
    derived: Any  # the result the re-executed call returned
    how: Matched
    why: str  # empty byte for byte; else why scores could differ
    reach: int  # prefix entries in the call's reach (their payloads disclosed)
    embedder: str | None
    keys: tuple[str, ...]  # the key chain walked from the trusted key (name+id)
    ranked_by: str = "sqlite"  # whose full-text ranking re-derived it (the proof's hint)

    def line(self) -> str:
        """The one line ``memseal verify-read`` prints on success."""
        how = self.how if self.how == "byte for byte" else f"as far as it can ({self.why})"
        # Only what the re-derivation used: a list ranks nothing and a semantic fetch
        # ranks no text, whatever the proof's unsigned ranked_by says.
        ranked = self.ranked_by == "postgresql" and ranks_text(self.tool, self.arguments)
        return (
            f"ok: step {self.step} of run {self.run_id!r} ({self.tool}, entry {self.seq}) "
            f"re-derived from the {self.size} entries it observed ({self.reach} in its reach, "
            f"root {self.root.hex()[:16]}, consistent with checkpoint {self.latest}): "
            f"result matches {how}"
            # The embedder is the proof's unsigned hint: another that gives the same bytes
            # passes too, so the line says what re-derived the result, not what the read used.
            + (
                f", re-derived with embedder {self.embedder} (the proof's hint)"
                if self.embedder
                else ""
            )
            + (", ranked as PostgreSQL ranks (ts_rank, re-computed)" if ranked else "")
        )


class _Walked(msgspec.Struct, kw_only=True):
    entries: dict[int, Entry]
    size: int
    root: bytes
    latest: Checkpoint
    keys: tuple[str, ...]


def _walk(proof: ReadProof, trusted: Sequence[VerifierKey]) -> _Walked:
    """Step 1: every entry's form, chain and signature along the key chain; both notes."""
    chain = KeyChain(trusted)
    entries: dict[int, Entry] = {}
    prev = GENESIS_PREV
    for index, item in enumerate(proof.prefix):
        if item.seq != index:
            missing = index if item.seq > index else item.seq
            raise fail(
                f"the prefix must hold every entry from seq 0 in order, once each; entry "
                f"{missing} is missing or out of place (it may be one the read saw)",
                "completeness",
                missing,
                f"prefix[{index}]",
            )
        entry = _signed(item, chain, f"prefix[{index}]")
        if entry.prev != prev:
            raise fail("`prev` is not the leaf hash of the entry before", "chain", item.seq, "prev")
        prev = leaf_hash(item.leaf).hex()
        entries[item.seq] = entry
    size = len(proof.prefix)
    previous = size - 1
    for index, item in enumerate(proof.later):
        if item.seq <= previous:
            raise fail(
                "later entries must follow the prefix by ascending seq, once each",
                "completeness",
                item.seq,
                f"later[{index}]",
            )
        previous = item.seq
        entries[item.seq] = _signed(item, chain, f"later[{index}]")
    at_size = _checkpoint(proof.checkpoint, chain.known, chain.known, proof.origin, "checkpoint")
    latest = _checkpoint(proof.latest, chain.known, chain.in_force, proof.origin, "latest")
    if at_size.size != size:
        raise fail(
            f"the prefix holds {size} entries but the checkpoint is of size {at_size.size}: "
            "entries are missing from (or added to) the prefix",
            "completeness",
            min(size, at_size.size),
            "prefix",
        )
    if latest.size <= size or previous >= latest.size:
        raise fail(
            f"the later checkpoint (size {latest.size}) must hold the prefix of {size} "
            f"entries and every later entry (up to seq {previous})",
            "checkpoint",
            field="latest",
        )
    chained = tuple(f"{k.name}+{k.key_id.hex()}" for k in chain.known)
    return _Walked(entries=entries, size=size, root=at_size.root, latest=latest, keys=chained)


def _rewrap(exc: VerificationError, seq: int, field: str) -> ReadProofError:
    """The ledger check's error with the field of the proof added (its text said once)."""
    where = f"seq {exc.seq}: " if exc.seq is not None else ""
    message = str(exc).removeprefix(f"{where}{exc.step}: ")
    return fail(message, exc.step, seq, field)


def _signed(item: ProofEntry, chain: KeyChain, field: str) -> Entry:
    try:
        entry = check_entry(item.leaf, item.sig, chain, seq=item.seq)
    except VerificationError as exc:
        part = "sig" if exc.step == "signature" else "leaf"
        raise _rewrap(exc, item.seq, f"{field}.{part}") from None
    try:
        chain.hand_over(entry)
    except VerificationError as exc:
        raise _rewrap(exc, item.seq, f"{field}.leaf") from None
    return entry


def _checkpoint(
    note: str,
    known: Sequence[VerifierKey],
    in_force: Sequence[VerifierKey],
    origin: str,
    field: str,
) -> Checkpoint:
    """A checkpoint note whose every signature is by a key of the chain, one in force."""
    label = "the later checkpoint" if field == "latest" else "the checkpoint at the observed size"
    try:
        opened = open_note(note, known)
        if opened.unverified:
            # An unchecked signature line would be bytes that change without failing.
            name, ident = opened.unverified[0]
            raise VerificationError(f"signed by {name}+{ident.hex()}, not a key of the chain")
        if not any(k in in_force for k in opened.verified):
            raise VerificationError("no signature by the key in force")
        checkpoint = parse_checkpoint(split_note(note)[0])
    except (VerificationError, InvalidRequest) as exc:
        raise fail(f"{label} does not verify: {exc}", "checkpoint", field=field) from None
    if checkpoint.origin != origin:
        raise fail(
            f"{label} names origin {checkpoint.origin!r}, not {origin!r}",
            "checkpoint",
            field=field,
        )
    return checkpoint


def _check_tree(proof: ReadProof, walked: _Walked) -> None:
    """Steps 2 to 4: the root at N from all leaves, inclusion, consistency to the later one."""
    # 2. tree root: recomputed from every leaf of the prefix, so an omitted entry shows here.
    tree = MemoryHashStore()
    for item in proof.prefix:
        tree.append(item.leaf)
    root = tree.root() if walked.size else EMPTY_ROOT
    if root != walked.root:
        raise fail(
            f"the root of the {walked.size} prefix entries is not the signed checkpoint's",
            "tree root",
            field="checkpoint",
        )
    # 3. inclusion: each proof carried leads to its checkpoint's root.
    for where, items, size, top in (
        ("prefix", proof.prefix, walked.size, walked.root),
        ("later", proof.later, walked.latest.size, walked.latest.root),
    ):
        for index, item in enumerate(items):
            if item.proof is None:
                if where == "later":
                    raise fail(
                        "a later entry carries no inclusion proof",
                        "inclusion",
                        item.seq,
                        f"later[{index}].proof",
                    )
                continue
            try:
                verify_inclusion(item.seq, size, leaf_hash(item.leaf), item.proof, top)
            except VerificationError as exc:
                raise fail(
                    f"the inclusion proof does not lead to the checkpoint's root: {exc}",
                    "inclusion",
                    item.seq,
                    f"{where}[{index}].proof",
                ) from None
    # 4. consistency: the observed tree is a prefix of the later checkpoint's.
    if walked.size == 0:
        if proof.consistency:
            raise fail(
                "the empty tree needs no consistency proof", "consistency", field="consistency"
            )
        return
    try:
        verify_consistency(
            walked.size, walked.latest.size, walked.root, walked.latest.root, proof.consistency
        )
    except VerificationError as exc:
        raise fail(
            f"the tree of {walked.size} entries is not proven a prefix of the later "
            f"checkpoint's ({walked.latest.size}): {exc}",
            "consistency",
            field="consistency",
        ) from None


class _Call(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    entry: Entry
    call: ToolCall
    arguments: Any
    result: Any
    scope_started: RunStarted


def _the_call(proof: ReadProof, walked: _Walked) -> _Call:
    """Step 6 (first half): the call entry is a read of this run and step that observed
    exactly the prefix; its payload is whole; its result matches the signed hash."""
    calls = [
        (index, item)
        for index, item in enumerate(proof.later)
        if walked.entries[item.seq].kind == TOOL_CALL
    ]
    if len(calls) != 1:
        raise fail(
            f"the proof must hold exactly one call entry after the prefix, not {len(calls)}",
            "read",
            field="later",
        )
    index, item = calls[0]
    field = f"later[{index}]"
    entry = walked.entries[item.seq]
    try:
        call = decode_tool_call(bytes(entry.body))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise fail(f"not a tool call body: {exc}", "read", item.seq, f"{field}.leaf") from None
    if (call.run_id, call.step) != (proof.run_id, proof.step):
        raise fail(
            f"the call entry is step {call.step} of run {call.run_id!r}, not step "
            f"{proof.step} of {proof.run_id!r}",
            "read",
            item.seq,
            "run_id/step",
        )
    if call.tool not in READ_TOOLS or call.error:
        raise fail(
            f"the call is a {'failed ' if call.error else ''}{call.tool} call, not a read",
            "read",
            item.seq,
            "tool",
        )
    if call.observed_size != walked.size:
        raise fail(
            f"the call observed {call.observed_size} entries; the proof's prefix and "
            f"checkpoint hold {walked.size}",
            "completeness",
            item.seq,
            "observed_size",
        )
    if item.payload is None or item.salt == RESIDUE_SALT:
        raise fail(
            "the call's payload (arguments and result texts) is missing",
            "payload hash",
            item.seq,
            f"{field}.payload",
        )
    if result_hash(call.result) != call.result_hash:
        raise fail(
            "the result does not match the signed result hash", "payload hash", item.seq, "result"
        )
    try:
        decoded = decode_tool_call_payload(item.payload)
        result = restore(call.result, decoded.texts, None)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError) as exc:
        raise fail(
            f"the call's payload does not decode or match the result: {exc}",
            "payload hash",
            item.seq,
            f"{field}.payload",
        ) from None
    started = _started(proof, walked, item.seq)
    return _Call(
        seq=item.seq,
        entry=entry,
        call=call,
        arguments=decoded.arguments,
        result=result,
        scope_started=started,
    )


def _started(proof: ReadProof, walked: _Walked, call_seq: int) -> RunStarted:
    for seq, entry in sorted(walked.entries.items()):
        if entry.kind != RUN_STARTED or seq > call_seq:
            continue
        try:
            body = msgspec.json.decode(entry.body)
            if isinstance(body, dict) and body.get("run_id") == proof.run_id:
                return msgspec.convert(body, RunStarted)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise fail(f"run_started body: {exc}", "read", seq, "run_started") from None
    raise fail(
        f"the proof holds no run_started entry of run {proof.run_id!r}: its scope is unknown",
        "read",
        field="later",
    )


def _check_payloads(proof: ReadProof, walked: _Walked, reach: set[int]) -> None:
    """Step 5: payloads given match their hashes; every entry in reach has its payload,
    unless a signed entry of the prefix erased it."""
    erased: set[int] = set()
    for item in proof.prefix:
        erased.update(walked.entries[item.seq].redacts)
    for where, items in (("prefix", proof.prefix), ("later", proof.later)):
        for index, item in enumerate(items):
            entry = walked.entries[item.seq]
            field = f"{where}[{index}].payload"
            if item.payload is None and item.salt is not None:
                raise fail("a salt without a payload", "payload hash", item.seq, field)
            try:
                absent = check_payload(entry, item.payload, item.salt)
            except VerificationError as exc:
                raise _rewrap(exc, item.seq, field) from None
            if where == "prefix" and item.seq in reach:
                if item.proof is None:
                    raise fail(
                        "the entry is in the read's reach but carries no inclusion proof",
                        "inclusion",
                        item.seq,
                        f"prefix[{index}].proof",
                    )
                if absent and item.seq not in erased and entry.kind in REDERIVED_KINDS:
                    raise fail(
                        "the entry is in the read's reach but its payload is missing, and no "
                        "signed entry before the read erased it",
                        "payload hash",
                        item.seq,
                        field,
                    )


async def _rederive(
    proof: ReadProof, walked: _Walked, reach: set[int], found: _Call, embedder: Embedder | None
) -> Any:
    """Step 6 (second half): rebuild the prefix in a temporary log and run the call again."""
    sources: list[Source | int] = []
    for item in proof.prefix:
        if item.seq not in reach:
            sources.append(item.seq)  # an inert gap: its seq stays taken, nothing is projected
            continue
        whole = item.payload is not None and item.salt != RESIDUE_SALT
        sources.append(
            source_of(item.seq, walked.entries[item.seq], item.payload if whole else None)
        )
    scope = scope_of(found.scope_started)
    # Reads make no item ids, so the instance secret is not needed: any will do.
    if proof.ranked_by not in ("sqlite", "postgresql"):
        raise fail(
            f"ranked_by {proof.ranked_by!r}: a read is ranked by sqlite or postgresql",
            "format",
            field="ranked_by",
        )
    # A PostgreSQL read re-ranks with ts_rank's arithmetic in Python (engine/_tsrank.py).
    async with temp_log(os.urandom(32), embedder, ranks_as=proof.ranked_by) as log:
        if sources:
            await log.append(sources)
        assert log.engine is not None
        recorded = BundleCall(
            seq=found.seq,
            at=found.entry.at,
            call=found.call,
            arguments=found.arguments,
            result=found.result,
        )
        log.now = parse_time(clock_for(recorded, []))
        tools = MemoryTools(log.engine, scope)
        # The currency rule the read followed, signed in its call (none before the rule).
        rule = found.call.currency if isinstance(found.call.currency, int) else None
        try:
            with following(rule):
                new = await tools.call(found.call.tool, found.arguments)
        except MemsealError as exc:
            vectors = searches_vectors(found.call.tool, found.arguments, proof.embedders)
            missing = vectors and (embedder is None or embedder.id not in proof.embedders)
            hint = (
                f" (the recorded embedder {', '.join(proof.embedders)} is not available here)"
                if missing
                else ""
            )
            raise fail(
                f"the recorded read fails when re-derived: {type(exc).__name__}: {exc}{hint}",
                "result",
                found.seq,
                "result",
            ) from None
    return msgspec.json.decode(_canonical.encode(new))


def _withheld(proof: ReadProof, walked: _Walked, copied: set[int]) -> int:
    """How many items stored in the prefix (and not erased there) the proof withholds."""
    erased: set[int] = set()
    for item in proof.prefix:
        erased.update(walked.entries[item.seq].redacts)
    return sum(
        1
        for item in proof.prefix
        if walked.entries[item.seq].kind == "memory_stored"
        and item.seq not in copied
        and item.seq not in erased
    )


def _check_entries(
    proof: ReadProof, trusted: Sequence[VerifierKey]
) -> tuple[_Walked, _Call, set[int], set[int]]:
    """Steps 1 to 5; the walk, the call, the entries in reach and those to project."""
    # 1. signatures and the key chain (and the prefix whole, from seq 0), both checkpoints.
    walked = _walk(proof, trusted)
    # 2-4. the root at N from every leaf, inclusion proofs, consistency to the later one.
    _check_tree(proof, walked)
    # 6 (first half, needed for the reach): the call, its run and its recorded scope.
    found = _the_call(proof, walked)
    prefix_entries = [walked.entries[item.seq] for item in proof.prefix]
    reach = scope_of(found.scope_started).reach
    required = in_reach(reach, prefix_entries)
    # 5. payload hashes, and every payload in reach present.
    _check_payloads(proof, walked, required)
    # What the temporary log projects: the reach, and any memory disclosed beyond it.
    disclosed = {item.seq for item in proof.prefix if item.payload is not None}
    return walked, found, required, in_reach(reach, prefix_entries, disclosed)


async def verify_read(
    data: bytes | ReadProof,
    trust: TrustArg,
    *,
    embedder: EmbedderChoice | Embedder = "auto",
    tolerance: float = DEFAULT_TOLERANCE,
) -> VerifiedRead:
    """Check a read proof offline against the trusted vkey and re-derive the read
    (module docstring, steps 1 to 7); raise :class:`ReadProofError` naming what differs."""
    trusted = trusted_keys(trust, None)
    proof = data if isinstance(data, ReadProof) else decode_read_proof(data)
    if proof.format != FORMAT:
        raise fail(f"read proof format {proof.format!r}; this memseal reads {FORMAT}", "format")
    check_hints(proof)
    # Steps 1 to 5 walk every signature and hash of the prefix: on a worker thread, so a
    # service checking a proof before serving it keeps answering (libsodium and blake3
    # let go of the GIL).
    walked, found, required, copied = await asyncio.to_thread(_check_entries, proof, trusted)
    # 6. re-derive the read from the entries alone; with an embedder only if it searched
    # vectors (else the unsigned hint would be reported without having been used).
    vectors = searches_vectors(found.call.tool, found.arguments, proof.embedders)
    chosen = choose_embedder(proof.embedders, embedder) if vectors else None
    derived = await _rederive(proof, walked, copied, found, chosen)
    # 7. compare: byte for byte, else (for a stated reason) as closely as that reason allows.
    how, why = compare(
        proof,
        found.result,
        derived,
        seq=found.seq,
        # ts_rank reads no corpus statistics: a text withheld cannot change a score.
        withheld=_withheld(proof, walked, copied) if proof.ranked_by == "sqlite" else 0,
        embedder=chosen,
        tolerance=tolerance,
        bm25=ranks_text(found.call.tool, found.arguments),
        vectors=vectors,
    )
    return VerifiedRead(
        run_id=proof.run_id,
        step=proof.step,
        tool=found.call.tool,
        seq=found.seq,
        size=walked.size,
        latest=walked.latest.size,
        root=walked.root,
        arguments=found.arguments,
        result=found.result,
        derived=derived,
        how=how,
        why=why,
        reach=len(required),
        embedder=None if chosen is None else chosen.id,
        keys=walked.keys,
        ranked_by=proof.ranked_by,
    )
