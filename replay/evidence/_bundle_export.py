"""Writing a session bundle: a run's entries, collected from a ledger against a fresh checkpoint.

:func:`export_bundle` cuts a checkpoint, gathers the entries a bundle of the
run holds (see :mod:`memseal.replay.evidence.bundle`), each with its inclusion proof,
and signs the manifest stating the bundle's extent. With ``with_read_proofs``
it adds the ``reads`` section (:mod:`memseal.replay.evidence._bundle_reads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from memseal.engine import ranked_at
from memseal.ledger.checkpoint import Checkpoint, parse_checkpoint
from memseal.ledger.entry import leaf_hash
from memseal.ledger.errors import Conflict, InvalidRequest, VerificationError
from memseal.ledger.log import KEY_ROTATED, Ledger
from memseal.ledger.note import NoteSigner, VerifierKey, open_note, sign_note, split_note
from memseal.replay.runs.calls import RUN_STARTED, TOOL_CALL, RunStarted, decode_tool_call
from memseal.tools.catalog import READ_TOOLS

from ._bundle_format import (
    FORMAT,
    MEMORY_KINDS,
    RUN_KINDS,
    Bundle,
    BundleEntry,
    ExportRaced,
    Listed,
    Manifest,
    ReadsStated,
    body_of,
    cut,
    eraser_of,
    items_of,
    manifest_text,
)
from ._bundle_reads import collect_reads

__all__ = ["export_bundle"]

FORGOTTEN: Final = "memory_forgotten"


async def export_bundle(
    ledger: Ledger,
    keys: Sequence[VerifierKey],
    run_id: str,
    *,
    embedders: Sequence[str] = (),
    with_read_proofs: bool = False,
    ranked_by: str | None = None,
) -> Bundle:
    """Collect run ``run_id`` from ``ledger`` into a bundle against a checkpoint cut now.

    ``ranked_by`` names the store whose full-text ranking the run's reads had when it is
    not the ledger's own (a run re-recorded on SQLite ranking as PostgreSQL did).

    ``keys`` is the ledger's key history, oldest first. ``with_read_proofs`` adds what
    ``memseal prove-read BUNDLE`` needs (the ``reads`` section: every entry before the
    run's last read, the texts of those in its reach, a checkpoint at each size a read
    observed): it grows with the log before the run, not with the run. The manifest is
    signed by the ledger's signer, the key that signed the checkpoint (so
    the key in force at its size). Raises :class:`InvalidRequest` when the
    log holds no entry of the run, :class:`Conflict` when the key rotated
    between the checkpoint and the manifest, or a forget erased a payload of the
    bundle after its checkpoint twice running (export again).
    """
    if ranked_by not in (None, "sqlite", "postgresql"):
        raise InvalidRequest(f"`ranked_by` must be sqlite or postgresql, not {ranked_by!r}")
    try:
        return await _export(ledger, keys, run_id, embedders, with_read_proofs, ranked_by)
    except ExportRaced:
        # A forget committed between the checkpoint and the scans: its eraser lies past the
        # checkpoint. Once more against a new checkpoint, which holds that forget.
        return await _export(ledger, keys, run_id, embedders, with_read_proofs, ranked_by)


async def _export(
    ledger: Ledger,
    keys: Sequence[VerifierKey],
    run_id: str,
    embedders: Sequence[str],
    with_read_proofs: bool,
    ranked_by_stated: str | None,
) -> Bundle:
    note, checkpoint, signer = await _checkpoint_now(ledger)
    size = checkpoint.size
    found = await _bundled_seqs(ledger, run_id, size)
    reads = None
    if with_read_proofs:

        async def close(more: set[int]) -> None:
            await _close_erasers(ledger, more, size)

        reads = await collect_reads(ledger, size, found.seqs, found.sizes, found.started, close)
    # Replay ranks full text as the store that ranked the run's reads did; of a run whose
    # reads straddle a move from SQLite, as the store its last read ran on.
    if reads is not None and ranked_by_stated is not None:
        reads = msgspec.structs.replace(reads, ranked_by=ranked_by_stated)
    ranking = ranked_by_stated or await ranked_at(ledger.store, max(found.sizes, default=size))
    entries = await _bundle_entries(ledger, found.seqs, size)
    manifest = Manifest(
        run_id=run_id,
        origin=ledger.origin,
        size=size,
        root=checkpoint.root,
        keys=tuple(k.text for k in keys),
        embedders=tuple(embedders),
        last_step=max(found.steps) if found.steps else None,
        calls=len(found.steps),
        entries=tuple(
            Listed(seq=e.seq, leaf_hash=leaf_hash(e.leaf), payload=e.payload is not None)
            for e in entries
        ),
        format=FORMAT,
        reads=None
        if reads is None
        else ReadsStated(
            ranked_by=reads.ranked_by,
            sizes=tuple(sorted(found.sizes)),
            prefix=len(reads.prefix),
        ),
        ranked_by=None if ranking == "sqlite" else ranking,
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
        reads=reads,
    )


async def _checkpoint_now(ledger: Ledger) -> tuple[str, Checkpoint, NoteSigner]:
    """A checkpoint cut now (its note and its parse) and the signer that signed it, which
    signs the manifest too."""
    note = await ledger.checkpoint()
    text, _ = split_note(note)
    checkpoint = parse_checkpoint(text)
    signer = ledger.signer
    try:
        open_note(note, [signer.verifier])
    except VerificationError:
        raise Conflict(
            "the ledger's key rotated while the bundle was exported; export it again"
        ) from None
    return note, checkpoint, signer


async def _bundle_entries(ledger: Ledger, seqs: set[int], size: int) -> list[BundleEntry]:
    """The entries of ``seqs``, ascending, each with its audit path in the tree of ``size``."""
    entries: list[BundleEntry] = []
    for seq in sorted(seqs):
        record = await ledger.read(seq)
        entry = record.entry()
        # A forget travels as its signed bytes: what it erased is in its body and header, and
        # its payload (who forgot and why) is an admin's, never the run's to carry.
        payload = None if entry.kind == FORGOTTEN else record.payload
        if cut(record.payload, record.salt, entry):
            await eraser_of(ledger, seq, size)
        proof = await ledger.inclusion_proof(seq, size)
        entries.append(
            BundleEntry(
                seq=seq,
                leaf=record.leaf,
                sig=record.signature,
                salt=record.salt if payload is not None else None,
                payload=payload,
                proof=proof.hashes,
            )
        )
    return entries


class _Found(msgspec.Struct, kw_only=True):
    seqs: set[int]
    steps: list[int]  # of the run's calls
    sizes: set[int]  # the tree sizes its reads (not failed) observed
    started: RunStarted | None


async def _bundled_seqs(ledger: Ledger, run_id: str, size: int) -> _Found:
    """The seqs a bundle of the run holds (module docstring), the steps of its calls, the
    sizes its reads observed and its ``run_started`` body."""
    steps: list[int] = []
    sizes: set[int] = set()
    started: RunStarted | None = None
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
            for item in items_of(kind, body_of(entry)):
                by_item.setdefault(item, []).append(record.seq)
        elif kind in RUN_KINDS:
            body = body_of(entry)
            if not isinstance(body, dict) or body.get("run_id") != run_id:
                continue
            run_seqs.append(record.seq)
            if kind == RUN_STARTED and started is None:
                started = msgspec.convert(body, RunStarted)
            if kind == TOOL_CALL:
                call = decode_tool_call(bytes(entry.body))
                wanted.update(call.cites)
                wrote.extend(call.wrote)
                steps.append(call.step)
                if call.tool in READ_TOOLS and not call.error:
                    sizes.add(call.observed_size)
    if not run_seqs:
        raise InvalidRequest(f"no run {run_id!r} in this ledger")
    for seq in wrote:
        # What the run's own writes made (a store's item, a trust change's item, a forget's items).
        entry = (await ledger.read(seq)).entry()
        wanted.update(items_of(entry.kind, body_of(entry)))
    seqs = set(run_seqs) | set(rotations)
    for item in wanted:
        seqs.update(by_item.get(item, ()))
    await _close_erasers(ledger, seqs, size)
    return _Found(seqs=seqs, steps=steps, sizes=sizes, started=started)


async def _close_erasers(ledger: Ledger, seqs: set[int], size: int) -> None:
    """Add to ``seqs`` the signed entry that erased each missing payload, transitively."""
    pending = sorted(seqs)
    while pending:
        seq = pending.pop()
        record = await ledger.read(seq)
        if cut(record.payload, record.salt, record.entry()):
            by = await eraser_of(ledger, seq, size)
            if by is not None and by not in seqs:
                seqs.add(by)
                pending.append(by)
