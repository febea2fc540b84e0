"""Writing a read proof: one recorded read, with everything needed to re-derive it offline.

:func:`prove_read` finds the effective call of a run's step, checks it is a
read that can be proven, and collects the proof :mod:`memseal.replay.evidence.read_proof`
describes from the ledger: a checkpoint signed at exactly the call's observed
size (the stored one when the log cut it, else signed now from the stored
tree hashes), a checkpoint cut now and the consistency proof between them,
every entry of the prefix, and the later entries a verifier needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Literal

import msgspec

from memseal.engine import ranked_at
from memseal.ledger.checkpoint import Checkpoint, format_checkpoint, parse_checkpoint
from memseal.ledger.entry import Entry
from memseal.ledger.errors import InvalidRequest, NotFound
from memseal.ledger.log import KEY_ROTATED, Ledger
from memseal.ledger.merkle import inclusion_proof
from memseal.ledger.note import sign_note, split_note
from memseal.ledger.store import Record
from memseal.replay.runs.calls import (
    RUN_STARTED,
    TOOL_CALL,
    RunStarted,
    ToolCall,
    decode_tool_call,
)
from memseal.tools.catalog import READ_TOOLS

from ._read_proof_format import (
    FORMAT,
    REDERIVED_KINDS,
    ProofEntry,
    ReadProof,
    check_provable,
    in_reach,
    scope_of,
)

__all__ = ["DISCLOSE", "Disclose", "checkpoint_at", "prove_read"]

Disclose = Literal["reach", "all"]
DISCLOSE: Final[tuple[Disclose, ...]] = ("reach", "all")


class _Found(msgspec.Struct, kw_only=True):
    call_seq: int | None = None
    call: ToolCall | None = None
    started_seq: int | None = None
    started: RunStarted | None = None


async def _find(ledger: Ledger, run_id: str, step: int, size: int) -> _Found:
    """The run's ``run_started`` entry and the effective (last recorded) call of ``step``."""
    found = _Found()
    async for record in ledger.scan(0, size):
        entry = record.entry()
        if entry.kind not in (RUN_STARTED, TOOL_CALL):
            continue
        try:
            body = msgspec.json.decode(entry.body)
        except msgspec.DecodeError:
            continue
        if not isinstance(body, dict) or body.get("run_id") != run_id:
            continue
        if entry.kind == RUN_STARTED:
            if found.started is None:
                found.started = msgspec.convert(body, RunStarted)
                found.started_seq = record.seq
            continue
        call = decode_tool_call(bytes(entry.body))
        if call.step == step:
            # A later entry for the same step supersedes the earlier (a revalidated call).
            found.call, found.call_seq = call, record.seq
    return found


def _check_call(run_id: str, step: int, found: _Found) -> tuple[int, ToolCall]:
    call, seq = found.call, found.call_seq
    if call is None or seq is None:
        raise NotFound(f"run {run_id!r} has no recorded step {step}")
    if call.tool not in READ_TOOLS:
        raise InvalidRequest(
            f"`step` {step} of run {run_id!r} is a {call.tool} call: a read proof proves "
            f"what a read returned ({', '.join(READ_TOOLS)}), not a write"
        )
    if call.error:
        raise InvalidRequest(
            f"`step` {step} of run {run_id!r} is a {call.tool} call that failed: it read no "
            "memory, so there is nothing to prove"
        )
    if found.started is None:
        raise InvalidRequest(f"run {run_id!r} has no run_started entry: its scope is unknown")
    return seq, call


def _entry(record: Record, *, disclose: bool, proof: Sequence[bytes] | None) -> ProofEntry:
    payload = record.payload if disclose else None
    return ProofEntry(
        seq=record.seq,
        leaf=record.leaf,
        sig=record.signature,
        salt=record.salt if payload is not None else None,
        payload=payload,
        proof=None if proof is None else tuple(proof),
    )


async def _paths(ledger: Ledger, seqs: Sequence[int], size: int) -> dict[int, tuple[bytes, ...]]:
    """The RFC 6962 audit path of each of ``seqs`` in the tree of ``size`` entries."""

    def work(read: Callable[[Sequence[int]], list[bytes]]) -> dict[int, tuple[bytes, ...]]:
        return {seq: tuple(inclusion_proof(seq, size, read)) for seq in seqs}

    return await ledger.store.tree_read(work)


async def checkpoint_at(ledger: Ledger, size: int) -> str:
    """A signed checkpoint of exactly ``size`` entries: the one the log stored, else one
    signed now by the ledger's key over the root its stored tree hashes give."""
    for stored in await ledger.checkpoints():
        if stored.size == size:
            return stored.note
    # The root of a prefix is consistent with every later tree, so signing it can never
    # make two checkpoints that disagree.
    body = format_checkpoint(
        Checkpoint(origin=ledger.origin, size=size, root=await ledger.root(size))
    )
    return sign_note(body, [ledger.signer])


async def prove_read(
    ledger: Ledger,
    run_id: str,
    step: int,
    *,
    embedders: Sequence[str] = (),
    disclose: Disclose = "reach",
) -> ReadProof:
    """The read proof of step ``step`` of run ``run_id`` (module docstring).

    ``disclose`` is whose texts the proof carries: ``reach`` (the default) the texts
    the read could see and no other; ``all`` every memory text of the prefix too,
    which a verifier needs to re-derive exact (BM25) scores byte for byte when other
    namespaces hold memory, since BM25 statistics span the whole index.

    Raises :class:`NotFound` for an unknown run or step, :class:`InvalidRequest` for a
    write, a failed call, or a read whose memory was forgotten since (its text is erased
    everywhere, so no one can re-derive it).
    """
    if not isinstance(run_id, str) or not run_id:
        raise InvalidRequest("`run` must be a run id")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InvalidRequest(f"`step` must be a step number (0 or more), not {step!r}")
    if disclose not in DISCLOSE:
        raise InvalidRequest(f"`disclose` must be one of {', '.join(DISCLOSE)}, not {disclose!r}")
    found = await _find(ledger, run_id, step, await ledger.size())
    if found.call is None and found.started is None:
        raise NotFound(f"no run {run_id!r} in this ledger")
    call_seq, call = _check_call(run_id, step, found)
    assert found.started is not None and found.started_seq is not None
    call_record = await ledger.read(call_seq)
    check_provable(step, call_record.payload, call_record.salt)
    # Cut only once the step is known to be provable: a refused request signs nothing.
    latest = await ledger.checkpoint()
    latest_size = parse_checkpoint(split_note(latest)[0]).size
    size = call.observed_size
    prefix = await _prefix(ledger, found.started, disclose, size)
    later = await _later(ledger, call_seq, found.started_seq, size, latest_size)
    consistency = (await ledger.consistency_proof(size, latest_size)).hashes if size > 0 else ()
    return ReadProof(
        format=FORMAT,
        run_id=run_id,
        step=step,
        origin=ledger.origin,
        embedders=tuple(embedders),
        ranked_by=await ranked_at(ledger.store, size),
        checkpoint=await checkpoint_at(ledger, size),
        latest=latest,
        consistency=tuple(consistency),
        prefix=tuple(prefix),
        later=tuple(later),
    )


async def _prefix(
    ledger: Ledger, started: RunStarted, disclose: Disclose, size: int
) -> list[ProofEntry]:
    """Every entry of the first ``size``: texts and audit paths for those the read could
    see (every memory text with ``disclose`` all), the signed bytes alone for the rest."""
    records = [record async for record in ledger.scan(0, size)]
    entries: list[Entry] = [r.entry() for r in records]
    reach = in_reach(None if disclose == "all" else scope_of(started).reach, entries)
    prefix: list[ProofEntry] = []
    for record, entry in zip(records, entries, strict=True):
        if record.seq not in reach:
            prefix.append(_entry(record, disclose=False, proof=None))
            continue
        if record.payload is None and entry.payload_hash is not None:
            by = await ledger.store.redacted_by(record.seq)
            if by is not None and by >= size:
                raise InvalidRequest(
                    f"memory the read saw (entry {record.seq}) was forgotten since (at seq "
                    f"{by}): its text is erased everywhere, so the read cannot be re-derived"
                )
        # A forget's payload (who and why) is not the read's to re-derive: its body is.
        prefix.append(_entry(record, disclose=entry.kind in REDERIVED_KINDS, proof=()))
    # Every audit path in one read of the stored tree hashes, not one round trip each.
    paths = await _paths(ledger, sorted(reach), size)
    return [
        e if e.proof is None else msgspec.structs.replace(e, proof=paths[e.seq]) for e in prefix
    ]


async def _later(
    ledger: Ledger, call_seq: int, started_seq: int, size: int, latest_size: int
) -> list[ProofEntry]:
    """The entries from ``size`` on a verifier needs, each with its audit path in the tree
    of ``latest_size``: the call (with its text), the run's ``run_started`` entry when it
    lies past the prefix, and the key rotations."""
    later_seqs = {call_seq}
    if started_seq >= size:
        later_seqs.add(started_seq)
    async for record in ledger.scan(size, latest_size):
        if record.entry().kind == KEY_ROTATED:
            later_seqs.add(record.seq)  # the key chain from the prefix to the latest key
    later_paths = await _paths(ledger, sorted(later_seqs), latest_size)
    later: list[ProofEntry] = []
    for seq in sorted(later_seqs):
        record = await ledger.read(seq)
        later.append(_entry(record, disclose=seq == call_seq, proof=later_paths[seq]))
    return later
