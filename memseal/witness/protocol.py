"""The add-checkpoint protocol of c2sp.org/tlog-witness, over a :class:`WitnessStore`.

A request is an old size line, zero to 63 consistency proof lines, an empty
line, then the signed checkpoint::

    old 20852014
    PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=

    example.com/behind-the-sofa
    20852163
    CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

    — example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/...

The answer is the witness's cosignature line (200), or a refusal with the
spec's status: 400 malformed or old size above the checkpoint's, 403 no
valid signature by the log's keys, 404 a log the witness does not follow,
409 an old size that is not the one the witness cosigned (the body is that
size), 422 a consistency proof or a root that does not hold.
"""

from __future__ import annotations

import base64
import sqlite3
import time
from collections.abc import Callable

import msgspec

from memseal.ledger.checkpoint import MAX_PROOF_HASHES, Checkpoint, parse_checkpoint
from memseal.ledger.cosignature import Cosigner
from memseal.ledger.errors import InvalidRequest, MemsealError, VerificationError
from memseal.ledger.merkle import EMPTY_ROOT, verify_consistency
from memseal.ledger.note import open_note, split_note

from .state import FollowedLog, WitnessStore

__all__ = [
    "MAX_REQUEST_BYTES",
    "AddCheckpoint",
    "Witness",
    "WitnessRefusal",
    "format_add_checkpoint",
    "parse_add_checkpoint",
]

#: 63 proof lines, a checkpoint and 100 signature lines fit well within this.
MAX_REQUEST_BYTES = 64 * 1024


class WitnessRefusal(MemsealError):
    """A refused add-checkpoint: the HTTP status, a one-line reason, and for 409 the
    size the witness cosigned last."""

    def __init__(self, status: int, message: str, *, known_size: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.known_size = known_size


class AddCheckpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed add-checkpoint request (nothing in it is trusted yet)."""

    old_size: int
    proof: tuple[bytes, ...]
    note: str


def _decimal(text: str) -> int | None:
    if text != "0" and (not text.isascii() or not text.isdigit() or text.startswith("0")):
        return None
    value = int(text)
    return value if value <= 2**63 - 1 else None


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """Parse the request body strictly; raises WitnessRefusal(400) naming the defect."""
    if len(body) > MAX_REQUEST_BYTES:
        raise WitnessRefusal(400, f"request is longer than {MAX_REQUEST_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise WitnessRefusal(400, "request is not valid UTF-8") from None
    split = text.find("\n\n")
    if split < 0:
        raise WitnessRefusal(400, "request has no empty line before the checkpoint")
    lines, note = text[:split].split("\n"), text[split + 2 :]
    if not lines[0].startswith("old "):
        raise WitnessRefusal(400, "request must start with an `old <size>` line")
    old = _decimal(lines[0][4:])
    if old is None:
        raise WitnessRefusal(400, "old size must be a decimal number without leading zeros")
    if len(lines) - 1 > MAX_PROOF_HASHES:
        raise WitnessRefusal(400, f"more than {MAX_PROOF_HASHES} consistency proof lines")
    proof: list[bytes] = []
    for number, line in enumerate(lines[1:], start=1):
        try:
            digest = base64.b64decode(line, validate=True)
        except ValueError:
            digest = b""
        if len(digest) != 32 or base64.b64encode(digest).decode() != line:
            raise WitnessRefusal(400, f"proof line {number} is not base64 of a 32-byte hash")
        proof.append(digest)
    return AddCheckpoint(old_size=old, proof=tuple(proof), note=note)


def format_add_checkpoint(old_size: int, proof: tuple[bytes, ...] | list[bytes], note: str) -> str:
    """The request body for ``note`` with a consistency proof from ``old_size``."""
    lines = [f"old {old_size}", *(base64.b64encode(h).decode() for h in proof)]
    return "".join(f"{line}\n" for line in lines) + "\n" + note


class Witness:
    """A witness: its cosigning key over its store."""

    def __init__(
        self, cosigner: Cosigner, store: WitnessStore, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.cosigner = cosigner
        self.store = store
        self._clock = clock

    def add_checkpoint(self, body: bytes) -> str:
        """Check one add-checkpoint request; return the cosignature line or raise
        :class:`WitnessRefusal`. The check and the new state are one transaction."""
        request = parse_add_checkpoint(body)
        # 1. The checkpoint must be a note whose text is a checkpoint.
        try:
            text, _ = split_note(request.note)
            checkpoint = parse_checkpoint(text)
        except InvalidRequest as exc:
            raise WitnessRefusal(400, f"not a signed checkpoint: {exc}") from None
        refusal: WitnessRefusal | None = None
        line = ""
        with self.store.transaction() as db:
            # A refusal still commits: the evidence it kept must outlive it.
            try:
                known = self.store.read(db, checkpoint.origin)
                # 2. Only logs this witness follows.
                if known is None:
                    raise WitnessRefusal(404, f"unknown log origin {checkpoint.origin!r}")
                # 3. Signed by one of the log's keys (a bad signature by one of them: refused).
                try:
                    opened = open_note(request.note, known.keys)
                except VerificationError as exc:
                    raise WitnessRefusal(403, f"checkpoint signature: {exc}") from None
                now = int(self._clock())
                # 4. The request's own sizes must make sense.
                if request.old_size > checkpoint.size:
                    self._rollback_evidence(db, known, checkpoint, request, now)
                    raise WitnessRefusal(
                        400,
                        f"old size {request.old_size} is above checkpoint size {checkpoint.size}",
                    )
                if checkpoint.size == 0 and checkpoint.root != EMPTY_ROOT:
                    raise WitnessRefusal(
                        422, "a checkpoint of size 0 must have the empty tree's root"
                    )
                # 5. The client must start from what this witness cosigned last.
                if request.old_size != known.size:
                    self._rollback_evidence(db, known, checkpoint, request, now)
                    raise WitnessRefusal(
                        409,
                        f"old size {request.old_size} is not the size {known.size} last cosigned",
                        known_size=known.size,
                    )
                # 6. The new tree must extend the known one.
                self._check_extends(db, known, checkpoint, request, now)
                # 7. Cosign, and keep the note (log signatures verified, ours added) as the state.
                line = self.cosigner.cosign(text, now)
                log_lines = "".join(
                    f"{s}\n"
                    for s in request.note[len(text) + 1 :].splitlines()
                    if any(s.startswith(f"\u2014 {k.name} ") for k in opened.verified)
                )
                served = f"{text}\n{log_lines}{line}"
                self.store.advance(
                    db, checkpoint.origin, checkpoint.size, checkpoint.root, served, now
                )

            except WitnessRefusal as exc:
                refusal = exc
        if refusal is not None:
            raise refusal
        return line

    def _check_extends(
        self,
        db: sqlite3.Connection,
        known: FollowedLog,
        checkpoint: Checkpoint,
        request: AddCheckpoint,
        now: int,
    ) -> None:
        if known.size == 0:
            if request.proof:
                raise WitnessRefusal(422, "a consistency proof from size 0 must be empty")
            return
        assert known.root is not None
        reason = None
        if checkpoint.size == known.size:
            if request.proof:
                reason = "a checkpoint of the cosigned size needs an empty proof"
            elif checkpoint.root != known.root:
                reason = f"a different root for size {known.size}, which was cosigned: a fork"
        else:
            try:
                verify_consistency(
                    known.size, checkpoint.size, known.root, checkpoint.root, request.proof
                )
            except VerificationError as exc:
                reason = (
                    f"checkpoint of size {checkpoint.size} is not consistent with the cosigned "
                    f"size {known.size} ({exc}): a fork"
                )
        if reason is not None:
            # A log's own signature on a tree that contradicts what was cosigned is
            # the proof of its misbehaviour: keep it (the spec allows it; auditors need it).
            self.store.keep_evidence(db, known, reason, request.note, now)
            raise WitnessRefusal(422, reason)

    def _rollback_evidence(
        self,
        db: sqlite3.Connection,
        known: FollowedLog,
        checkpoint: Checkpoint,
        request: AddCheckpoint,
        now: int,
    ) -> None:
        # A stale client is normal (409 tells it the size); a signed tree *smaller* than
        # the one cosigned is a rollback the log's key signed, worth keeping.
        if checkpoint.size < known.size:
            reason = f"checkpoint of size {checkpoint.size} is older than the cosigned {known.size}"
            self.store.keep_evidence(db, known, reason, request.note, now)
        elif checkpoint.size == known.size and checkpoint.root != known.root:
            reason = f"a different root for size {known.size}, which was cosigned: a fork"
            self.store.keep_evidence(db, known, reason, request.note, now)
