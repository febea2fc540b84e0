"""Writing a session bundle: a run's entries, collected from a ledger against a fresh checkpoint.

:func:`export_bundle` cuts a checkpoint, gathers the entries a bundle of the
run holds (see :mod:`memseal.replay.bundle`), each with its inclusion proof,
and signs the manifest stating the bundle's extent.
"""

from __future__ import annotations

from collections.abc import Sequence

from memseal.ledger.checkpoint import parse_checkpoint
from memseal.ledger.entry import leaf_hash
from memseal.ledger.errors import Conflict, InvalidRequest, VerificationError
from memseal.ledger.log import KEY_ROTATED, Ledger
from memseal.ledger.note import VerifierKey, open_note, sign_note, split_note

from ._bundle_format import (
    FORMAT,
    MEMORY_KINDS,
    RUN_KINDS,
    Bundle,
    BundleEntry,
    Listed,
    Manifest,
    body_of,
    items_of,
    manifest_text,
)
from .calls import TOOL_CALL, decode_tool_call

__all__ = ["export_bundle"]


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
            for item in items_of(kind, body_of(entry)):
                by_item.setdefault(item, []).append(record.seq)
        elif kind in RUN_KINDS:
            body = body_of(entry)
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
        wanted.update(items_of(entry.kind, body_of(entry)))
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
