"""Checkpoints and proofs: what lets an auditor check one entry, or that the log only grew.

A checkpoint is a C2SP ``tlog-checkpoint`` body (origin, size, root) signed
as a C2SP ``signed-note`` with the ledger key. The log cuts one every N
entries (in the group commit that crosses the mark), every T seconds when
it has grown, and on demand, and stores each. Before signing, the log
checks the new tree against the newest checkpoint it signed, by a
consistency proof from its own stored hashes: it refuses to sign two
checkpoints that disagree, whatever happened to the database.

:class:`LogClient` is the other side: an auditor's memory of the last
checkpoint it accepted, refusing a smaller tree, a different root at the
same size, and a larger tree without a valid consistency proof.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence

import msgspec

from .checkpoint import (
    Checkpoint,
    TlogProof,
    format_checkpoint,
    format_tlog_proof,
    parse_checkpoint,
)
from .errors import InvalidRequest, VerificationError
from .merkle import (
    EMPTY_ROOT,
    consistency_proof,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)
from .note import NoteSigner, VerifierKey, open_note, sign_note
from .store import StoredCheckpoint, WriteTxn

__all__ = [
    "CheckpointPolicy",
    "ConsistencyProof",
    "InclusionProof",
    "LogClient",
    "cut_checkpoint",
    "open_checkpoint",
]


class CheckpointPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """When the log cuts checkpoints by itself (``None`` turns a trigger off)."""

    origin: str
    every: int | None = 1000
    interval: float | None = 60.0

    def __post_init__(self) -> None:
        every, interval = self.every, self.interval
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, int) or every < 1
        ):
            raise InvalidRequest(
                "`checkpoint_every` must be a whole number of entries >= 1, or None"
            )
        if interval is not None and (
            isinstance(interval, bool)
            or not isinstance(interval, int | float)
            or not math.isfinite(interval)
            or interval <= 0
        ):
            raise InvalidRequest(
                "`checkpoint_interval` must be a positive number of seconds, or None"
            )
        if not isinstance(self.origin, str):
            raise InvalidRequest("`origin` must be text")
        # The origin is the first line of every checkpoint: one line of printable text.
        format_checkpoint(Checkpoint(origin=self.origin, size=0, root=EMPTY_ROOT))


class InclusionProof(msgspec.Struct, frozen=True, kw_only=True):
    """Entry ``seq`` is leaf ``seq`` of the tree of ``size`` entries whose root is ``root``."""

    seq: int
    size: int
    leaf_hash: bytes
    root: bytes
    hashes: tuple[bytes, ...]

    def verify(self) -> None:
        """Raise VerificationError unless the entry's leaf is in the tree of ``root``."""
        verify_inclusion(self.seq, self.size, self.leaf_hash, self.hashes, self.root)


class ConsistencyProof(msgspec.Struct, frozen=True, kw_only=True):
    """The tree of ``old_size`` entries is a prefix of the tree of ``new_size``."""

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    hashes: tuple[bytes, ...]

    def verify(self) -> None:
        """Raise VerificationError unless the old tree is a prefix of the new one."""
        verify_consistency(self.old_size, self.new_size, self.old_root, self.new_root, self.hashes)

    def text(self) -> str:
        """A plain text form: a header line, the sizes and roots, one base64 hash a line."""
        lines = [
            "memseal/consistency-proof@v1",
            f"old {self.old_size} {base64.b64encode(self.old_root).decode()}",
            f"new {self.new_size} {base64.b64encode(self.new_root).decode()}",
            *(base64.b64encode(h).decode() for h in self.hashes),
        ]
        return "\n".join(lines) + "\n"


def cut_checkpoint(txn: WriteTxn, origin: str, signers: Sequence[NoteSigner]) -> StoredCheckpoint:
    """Sign and store a checkpoint of the tree as of this transaction (run in the writer).

    Returns the newest stored checkpoint unchanged when the log has not grown.
    """
    size = txn.size
    root = tree_hash(size, txn.tree_hashes)
    latest = txn.latest_checkpoint()
    if latest is not None:
        # 1. never sign a tree smaller than one already signed (a truncated log)
        if latest.size > size:
            raise VerificationError(
                f"the log has {size} entries but checkpoint {latest.size} was signed; "
                "refusing to sign a smaller tree",
                step="checkpoint",
            )
        # 2. never sign a different root for a size already signed
        if latest.size == size:
            if latest.root != root:
                raise VerificationError(
                    f"the tree of size {size} no longer has the root signed before",
                    step="checkpoint",
                )
            return latest
        # 3. the new tree must extend the signed one
        if latest.size > 0:
            proof = consistency_proof(latest.size, size, txn.tree_hashes)
            verify_consistency(latest.size, size, latest.root, root, proof)
    body = format_checkpoint(Checkpoint(origin=origin, size=size, root=root))
    stored = StoredCheckpoint(size=size, root=root, note=sign_note(body, signers), at=txn.now())
    txn.store_checkpoint(stored)
    return stored


def open_checkpoint(
    note: str, known: Sequence[VerifierKey], origin: str | None = None
) -> Checkpoint:
    """Verify a signed checkpoint note against ``known`` keys and parse its body."""
    opened = open_note(note, known)
    try:
        checkpoint = parse_checkpoint(opened.text)
    except InvalidRequest as exc:
        raise VerificationError(f"not a checkpoint: {exc}", step="checkpoint") from exc
    if origin is not None and checkpoint.origin != origin:
        raise VerificationError(
            f"checkpoint origin {checkpoint.origin!r} is not {origin!r}", step="checkpoint"
        )
    return checkpoint


def tlog_proof(proof: InclusionProof, checkpoint_note: str) -> str:
    """The C2SP tlog-proof text for one entry: index, audit path, the checkpoint verbatim."""
    return format_tlog_proof(
        TlogProof(index=proof.seq, hashes=proof.hashes, checkpoint=checkpoint_note)
    )


class LogClient:
    """An auditor's memory of the newest checkpoint it accepted from one log."""

    def __init__(self, known: Sequence[VerifierKey], origin: str) -> None:
        self._known = list(known)
        self._origin = origin
        self.latest: Checkpoint | None = None

    def update(self, note: str, proof: Sequence[bytes] = ()) -> Checkpoint:
        """Accept ``note`` if it extends the remembered checkpoint; raise otherwise.

        1. the note is signed by a known key and names this log's origin;
        2. a smaller tree than the remembered one is refused;
        3. the same size must carry the same root;
        4. a larger tree needs a consistency proof from the remembered one.
        """
        checkpoint = open_checkpoint(note, self._known, self._origin)
        old = self.latest
        if old is not None:
            if checkpoint.size < old.size:
                raise VerificationError(
                    f"checkpoint of size {checkpoint.size} is older than the {old.size} seen",
                    step="checkpoint",
                )
            if checkpoint.size == old.size:
                if checkpoint.root != old.root:
                    raise VerificationError(
                        f"two different roots signed for size {old.size}: the log forked",
                        step="checkpoint",
                    )
            elif old.size > 0:
                verify_consistency(old.size, checkpoint.size, old.root, checkpoint.root, proof)
        self.latest = checkpoint
        return checkpoint
