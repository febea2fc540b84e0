"""A bundle's ``reads`` section: what lets ``memseal prove-read BUNDLE`` prove a read offline.

A read proof (:mod:`memseal.replay.evidence.read_proof`) holds every entry of the log
before the read, so an entry left out changes the root; the payloads of those
in the read's reach; a checkpoint signed at exactly the read's observed size
N and the consistency proof from it to a later checkpoint. A bundle made with
``export --with-read-proofs`` carries that once for all the run's reads:

- ``prefix``: every entry below P (the largest size a read of the run
  observed) that ``entries`` lacks, each with its stored bytes and signature,
  and its payload only when it lies in the run's recorded reach and is a
  ``memory_stored`` or ``trust_changed`` entry (what a re-derived read uses:
  a ``memory_forgotten`` entry's effect is its signed body and ``redacts``,
  and its payload, who forgot and why, is an admin's and never travels);
- ``checkpoints``: for each size N a read of the run observed, a checkpoint
  signed at exactly N and the consistency proof from N to the bundle's
  checkpoint (whose audit paths the call entries and key rotations carry).

:func:`collect_reads` writes the section at export; :func:`check_reads` is
the part of :func:`memseal.replay.evidence.bundle.verify_bundle` that checks it (every
leaf below P present, each root at N the signed one, each consistency proof,
each payload where the reach says and nowhere else); :func:`prove_read_from_bundle`
makes the read proof of one step from a verified bundle, the same proof
:func:`memseal.replay.evidence.read_proof.prove_read` makes from the ledger.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from memseal.engine import ranked_by, sqlite_ranked_below
from memseal.ledger.checkpoint import parse_checkpoint
from memseal.ledger.entry import Entry
from memseal.ledger.errors import InvalidRequest, NotFound, VerificationError
from memseal.ledger.log import KEY_ROTATED, Ledger
from memseal.ledger.merkle import (
    EMPTY_ROOT,
    MemoryHashStore,
    inclusion_proof,
    verify_consistency,
)
from memseal.ledger.note import VerifierKey, open_note, split_note
from memseal.replay.runs.calls import RUN_STARTED, TOOL_CALL, RunStarted, decode_tool_call
from memseal.tools.catalog import READ_TOOLS

from ._bundle_format import (
    Bundle,
    BundleCall,
    BundleReads,
    Manifest,
    PrefixEntry,
    ReadCheckpoint,
    ReadsStated,
    VerifiedBundle,
    cut,
    eraser_of,
    fail,
)
from ._read_proof_format import (
    FORMAT,
    REDERIVED_KINDS,
    ProofEntry,
    ReadProof,
    check_provable,
    in_reach,
    scope_of,
)
from ._read_proof_make import checkpoint_at

__all__ = ["check_reads", "collect_reads", "prove_read_from_bundle"]


async def collect_reads(
    ledger: Ledger,
    size: int,
    seqs: set[int],
    sizes: set[int],
    started: RunStarted | None,
    close: Callable[[set[int]], Awaitable[None]],
) -> BundleReads:
    """The ``reads`` section of a bundle against the checkpoint of ``size`` entries.

    ``seqs`` are the bundle's entries; the signed entry that erased an in-reach payload
    after P is added to them (and ``close`` adds what erased its own), so the verifier
    sees why the text is gone. ``sizes`` are the sizes the run's reads observed.
    """
    if started is None:
        raise InvalidRequest(
            "the run has no run_started entry: its reach is unknown, so no read of it can "
            "be proven (export it without --with-read-proofs)"
        )
    below = await sqlite_ranked_below(ledger.store)
    rankers = {ranked_by(ledger.store.dialect, below, at) for at in sizes}
    if len(rankers) > 1:
        raise InvalidRequest(
            f"the run's reads span the ledger's move from SQLite to PostgreSQL at size {below}: "
            "SQLite ranked the reads before it and PostgreSQL the ones after, and a reads "
            "section names one ranking; prove each read from the data folder instead "
            "(memseal prove-read DIR --run R --step S)"
        )
    top = max(sizes, default=0)
    records = [record async for record in ledger.scan(0, top)]
    entries = [record.entry() for record in records]
    reach = in_reach(scope_of(started).reach, entries)
    erasers: set[int] = set()
    # The payloads the reads' re-derivation uses: items and verdicts in reach. A forget in
    # reach travels as its signed bytes alone (its payload is an admin's actor and reason).
    carried = {e.seq for e in entries if e.seq in reach and e.kind in REDERIVED_KINDS}
    for record, entry in zip(records, entries, strict=True):
        if record.seq in carried and cut(record.payload, record.salt, entry):
            by = await eraser_of(ledger, record.seq, size)
            if by is not None and by >= top:
                erasers.add(by)
    if erasers - seqs:
        seqs |= erasers
        await close(seqs)
    prefix = tuple(
        PrefixEntry(
            seq=record.seq,
            leaf=record.leaf,
            sig=record.signature,
            salt=record.salt if record.seq in carried and record.payload is not None else None,
            payload=record.payload if record.seq in carried else None,
        )
        for record in records
        if record.seq not in seqs
    )
    checkpoints = []
    for at in sorted(sizes):
        consistency = (await ledger.consistency_proof(at, size)).hashes if at > 0 else ()
        checkpoints.append(
            ReadCheckpoint(note=await checkpoint_at(ledger, at), consistency=tuple(consistency))
        )
    return BundleReads(
        ranked_by=rankers.pop() if rankers else ledger.store.dialect,
        checkpoints=tuple(checkpoints),
        prefix=prefix,
    )


def _read_sizes(entries: Mapping[int, Entry]) -> list[int]:
    """The sizes the run's reads (not failed) observed, ascending, once each."""
    sizes: set[int] = set()
    for entry in entries.values():
        if entry.kind != TOOL_CALL:
            continue
        call = decode_tool_call(bytes(entry.body))  # decoded already by the run check
        if call.tool in READ_TOOLS and not call.error:
            sizes.add(call.observed_size)
    return sorted(sizes)


def _open_checkpoint(note: str, known: Sequence[VerifierKey], origin: str, at: int) -> bytes:
    """The root a read checkpoint signs, every signature by a key of the chain."""
    try:
        opened = open_note(note, known)
        if opened.unverified:
            name, ident = opened.unverified[0]
            raise VerificationError(f"signed by {name}+{ident.hex()}, not a key of the chain")
        checkpoint = parse_checkpoint(split_note(note)[0])
    except (VerificationError, InvalidRequest) as exc:
        raise fail(f"the checkpoint at size {at} does not verify: {exc}", "reads") from None
    if checkpoint.origin != origin or checkpoint.size != at:
        raise fail(
            f"the checkpoint listed for size {at} is of {checkpoint.origin!r} at size "
            f"{checkpoint.size}",
            "reads",
        )
    return checkpoint.root


def check_reads(
    bundle: Bundle,
    manifest: Manifest,
    entries: Mapping[int, Entry],
    prefix: Mapping[int, Entry],
    started: RunStarted | None,
    known: Sequence[VerifierKey],
    size: int,
    root: bytes,
    redacted: set[int],
) -> None:
    """Check the ``reads`` section (module docstring); the walk has checked every prefix
    entry's form, key and signature, and any payload given against its hash."""
    reads = bundle.reads
    if reads is None:
        if manifest.reads is not None:
            raise fail(
                "the signed manifest states a reads section, but the bundle has none",
                "completeness",
            )
        return
    # 1. extent: the section the signed manifest states, a checkpoint for each read's size.
    sizes = _read_sizes(entries)
    started = _check_extent(reads, manifest, sizes, started)
    top = sizes[-1] if sizes else 0
    # 2. completeness: every leaf below the last read, the bundle's entry or the prefix's.
    tree = _prefix_tree(bundle, reads, top)
    # 3. tree root and consistency: each read's tree is signed, a prefix of the checkpoint's.
    for at, listed in zip(sizes, reads.checkpoints, strict=True):
        _check_read_checkpoint(listed, at, tree, known, bundle.origin, size, root)
    # 4. redaction: payloads in the run's reach only, each missing one erased by a signed entry.
    below = {**{s: e for s, e in entries.items() if s < top}, **prefix}
    reach = in_reach(scope_of(started).reach, [below[s] for s in range(top)])
    _check_prefix_payloads(reads, prefix, reach, redacted)


def _check_extent(
    reads: BundleReads, manifest: Manifest, sizes: list[int], started: RunStarted | None
) -> RunStarted:
    """The run's ``run_started`` body, once the section is the one the manifest states
    and has a checkpoint for each of ``sizes``."""
    stated = ReadsStated(ranked_by=reads.ranked_by, sizes=tuple(sizes), prefix=len(reads.prefix))
    if manifest.reads != stated:
        raise fail(
            f"the reads section (sizes {sizes}, {len(reads.prefix)} prefix entries, ranked by "
            f"{reads.ranked_by}) is not what the signed manifest states",
            "completeness",
        )
    if started is None:
        raise fail("a reads section, but no run_started entry: the reach is unknown", "reads")
    if len(reads.checkpoints) != len(sizes):
        raise fail(
            f"the run's reads observed {len(sizes)} size(s); the reads section has "
            f"{len(reads.checkpoints)} checkpoint(s)",
            "completeness",
        )
    return started


def _prefix_tree(bundle: Bundle, reads: BundleReads, top: int) -> MemoryHashStore:
    """The tree of the ``top`` leaves below the last read, each from the bundle's entries
    or the prefix (never both, none missing)."""
    leaves = {item.seq: item.leaf for item in bundle.entries if item.seq < top}
    for item in reads.prefix:
        if item.seq in leaves or item.seq >= top:
            raise fail(
                "a prefix entry that the bundle's entries hold, or at or past the last read",
                "completeness",
                item.seq,
            )
        leaves[item.seq] = item.leaf
    tree = MemoryHashStore()
    for seq in range(top):
        leaf = leaves.get(seq)
        if leaf is None:
            raise fail(
                "the entry is missing from the bundle, though a read of the run saw it",
                "completeness",
                seq,
            )
        tree.append(leaf)
    return tree


def _check_read_checkpoint(
    listed: ReadCheckpoint,
    at: int,
    tree: MemoryHashStore,
    known: Sequence[VerifierKey],
    origin: str,
    size: int,
    root: bytes,
) -> None:
    """``listed`` signs the root of the first ``at`` leaves of ``tree``, and proves that
    tree a prefix of the bundle's checkpoint (``size`` entries, ``root``)."""
    signed = _open_checkpoint(listed.note, known, origin, at)
    if (tree.root(at) if at else EMPTY_ROOT) != signed:
        raise fail(
            f"the root of the {at} entries below the read is not the signed checkpoint's: "
            "an entry of the prefix was changed",
            "tree root",
        )
    if at == 0:
        if listed.consistency:
            raise fail("the empty tree needs no consistency proof", "consistency")
        return
    try:
        verify_consistency(at, size, signed, root, listed.consistency)
    except VerificationError as exc:
        raise fail(
            f"the tree of {at} entries is not proven a prefix of the checkpoint's: {exc}",
            "consistency",
        ) from None


def _check_prefix_payloads(
    reads: BundleReads, prefix: Mapping[int, Entry], reach: set[int], redacted: set[int]
) -> None:
    """Each prefix entry carries its payload only in ``reach``, and one missing there was
    erased by a signed entry of the bundle (its seq in ``redacted``)."""
    for item in reads.prefix:
        if item.seq not in reach:
            if item.payload is not None:
                raise fail("a payload outside the run's reach", "completeness", item.seq)
        elif (
            # A residue counts as a cut: one the bundle's maker made with no signed forget
            # behind it would otherwise pass, its dropped texts unaccounted for.
            cut(item.payload, item.salt, prefix[item.seq])
            and prefix[item.seq].kind in REDERIVED_KINDS  # a forget's effect is its body
            and item.seq not in redacted
        ):
            raise fail(
                "the entry lies in the run's reach, but its payload is missing and no "
                "signed entry in the bundle erased it",
                "redaction",
                item.seq,
            )


def prove_read_from_bundle(verified: VerifiedBundle, step: int) -> ReadProof:
    """The read proof of step ``step`` of the verified bundle's run, texts of its reach only.

    Raises :class:`InvalidRequest` for a bundle without a reads section, a write, a failed
    call, a page continued from a cursor, or a read whose memory was forgotten since;
    :class:`NotFound` for a step the run never recorded.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InvalidRequest(f"`step` must be a step number (0 or more), not {step!r}")
    bundle = verified.bundle
    reads = bundle.reads
    if reads is None:
        raise InvalidRequest(
            "the bundle holds no reads section, which a read proof needs (every entry before "
            "the read): export the run with `memseal export --with-read-proofs`, or prove the "
            "read from its data folder"
        )
    found, started = _provable_call(verified, step)
    at = found.call.observed_size
    listed = next(
        c for c in reads.checkpoints if parse_checkpoint(split_note(c.note)[0]).size == at
    )
    prefix = _proof_prefix(verified, reads, started, at)
    later = _proof_later(verified, found.seq, at)
    return ReadProof(
        format=FORMAT,
        run_id=verified.run_id,
        step=step,
        origin=bundle.origin,
        embedders=bundle.embedders,
        ranked_by=reads.ranked_by,
        checkpoint=listed.note,
        latest=bundle.checkpoint,
        consistency=listed.consistency,
        prefix=tuple(prefix),
        later=tuple(later),
    )


def _provable_call(verified: VerifiedBundle, step: int) -> tuple[BundleCall, RunStarted]:
    """The effective call of ``step`` and the run's ``run_started`` body, once the call
    is known to be a read that succeeded and can be proven."""
    found = next((c for c in verified.calls if c.call.step == step), None)
    if found is None:
        raise NotFound(f"run {verified.run_id!r} has no recorded step {step}")
    call = found.call
    if call.tool not in READ_TOOLS:
        raise InvalidRequest(
            f"`step` {step} of run {verified.run_id!r} is a {call.tool} call: a read proof "
            f"proves what a read returned ({', '.join(READ_TOOLS)}), not a write"
        )
    if call.error:
        raise InvalidRequest(
            f"`step` {step} of run {verified.run_id!r} is a {call.tool} call that failed: it "
            "read no memory, so there is nothing to prove"
        )
    assert verified.started is not None  # check_reads refused a reads section without it
    call_item = {item.seq: item for item in verified.bundle.entries}[found.seq]
    check_provable(step, call_item.payload, call_item.salt)
    return found, verified.started


def _proof_prefix(
    verified: VerifiedBundle, reads: BundleReads, started: RunStarted, at: int
) -> list[ProofEntry]:
    """Every entry below the read's observed size ``at``, texts and audit paths for those
    in the run's reach only."""
    held: dict[int, tuple[bytes, bytes, bytes | None, bytes | None]] = {
        item.seq: (item.leaf, item.sig, item.salt, item.payload) for item in verified.bundle.entries
    }
    held.update({p.seq: (p.leaf, p.sig, p.salt, p.payload) for p in reads.prefix})
    decoded = {**verified.entries, **verified.prefix}
    below = [decoded[seq] for seq in range(at)]
    reach = in_reach(scope_of(started).reach, below)
    erased = {seq for entry in below for seq in entry.redacts}
    tree = MemoryHashStore()
    for seq in range(at):
        tree.append(held[seq][0])
    prefix: list[ProofEntry] = []
    for seq in range(at):
        leaf, sig, salt, payload = held[seq]
        if seq not in reach:
            prefix.append(
                ProofEntry(seq=seq, leaf=leaf, sig=sig, salt=None, payload=None, proof=None)
            )
            continue
        if (
            payload is None
            and decoded[seq].kind in REDERIVED_KINDS  # a forget travels as its body alone
            and decoded[seq].payload_hash is not None
            and seq not in erased
        ):
            raise InvalidRequest(
                f"memory the read saw (entry {seq}) was forgotten since: its text is erased "
                "everywhere, so the read cannot be re-derived"
            )
        path = tuple(inclusion_proof(seq, at, tree.read))
        prefix.append(
            ProofEntry(seq=seq, leaf=leaf, sig=sig, salt=salt, payload=payload, proof=path)
        )
    return prefix


def _proof_later(verified: VerifiedBundle, call_seq: int, at: int) -> list[ProofEntry]:
    """The entries at or past ``at`` a verifier needs: the call's (with its text), the key
    rotations and the ``run_started`` entry, each with its path to the bundle's checkpoint."""
    later_seqs = {call_seq}
    for seq, entry in verified.entries.items():
        if seq >= at and (entry.kind == KEY_ROTATED or entry.kind == RUN_STARTED):
            # The key chain from the prefix to the bundle's key, and the run's scope.
            later_seqs.add(seq)
    items = {item.seq: item for item in verified.bundle.entries}
    return [
        ProofEntry(
            seq=seq,
            leaf=items[seq].leaf,
            sig=items[seq].sig,
            salt=items[seq].salt if seq == call_seq else None,
            payload=items[seq].payload if seq == call_seq else None,
            proof=items[seq].proof,
        )
        for seq in sorted(later_seqs)
    ]
