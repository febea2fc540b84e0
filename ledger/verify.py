"""Offline verification of a ledger: every entry, in order, from one trusted key.

:class:`LedgerVerifier` is fed records in seq order, in chunks, and keeps
only what later entries need (the previous leaf hash, the known keys, the
payloads still awaiting a signed redaction). It returns ``None`` or raises
:class:`VerificationError` naming the first bad seq and the failed step.

Per entry, in order (the step names appear in errors; steps 1, 2, 4 and 5
are :func:`~memseal.ledger.entry_check.check_entry`, the one check of a signed
entry that every reader makes):

1. ``format``: the stored bytes decode strictly as an entry of format v1,
   are canonical (re-encoding gives the same bytes, so one entry has one
   encoding), and carry the seq they are stored at.
2. ``stored hash``: the stored leaf hash is ``SHA-256(0x00 || bytes)``.
3. ``chain``: ``prev`` is the leaf hash of the entry before.
4. ``unknown key``: the signer's key id is one the auditor trusts.
5. ``signature``: Ed25519 over the domain-separated leaf hash.
6. ``payload hash``: a present payload hashes, with its salt, to
   ``payload_hash``; a residue (what a forget left of a payload, stored with
   an empty salt) holds only texts whose salted refs the signed body carries.
7. ``redaction``: a missing payload or a residue is listed by a later signed entry's
   ``redacts``; what is still unlisted at the end fails.
8. ``tree``: the stored Merkle hashes equal those computed from the entries
   (the verifier keeps the tree's right edge, O(log n) hashes).
9. ``checkpoint``: every stored or supplied checkpoint is signed by a key
   trusted at its size and names the root computed at that size; one larger
   than the log means the log was truncated.

A ``key_rotated`` entry, once verified, hands trust from its signer to the
key it names: later entries must be signed by the new key, and the old one
no longer counts.

With an executor, each chunk of records is split across its threads, which
run the checks that need no earlier entry (format, stored hash, the
signature under the key the entry names, the payload hash) while this thread
runs the ordered pass over the chunk before (seq, chain, the key in force,
redactions, tree, checkpoints). Per record a thread alternates Python with
libsodium, which releases the GIL, so the threads keep both cores busy
instead of one long Python loop starving them. The ordered pass trusts a
pool thread's signature result only when that thread checked it under the
very key object in force at that seq; otherwise it checks the signature
itself. Every check is made, in the step order above, and the first failing
seq is the one named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future

import msgspec
from nacl.signing import VerifyKey

from .checkpoint import parse_checkpoint
from .entry import (
    GENESIS_PREV,
    RESIDUE_SALT,
    SALT_SIZE,
    Entry,
    check_residue,
    payload_hash,
)
from .entry_check import KeyChain, check_entry, check_format, signature_verifies
from .errors import InvalidRequest, VerificationError
from .merkle import EMPTY_ROOT, node_hash
from .note import VerifierKey, open_note
from .store import Record

__all__ = [
    "KeyChain",
    "LedgerVerifier",
    "Observe",
    "VerifySummary",
    "check_format",
    "check_payload",
    "signature_verifies",
]

Observe = Callable[[Record, Entry], None]
"""Called, in seq order, with each record that passed and its entry."""


class VerifySummary(msgspec.Struct, frozen=True, kw_only=True):
    """What a successful verification saw."""

    size: int
    head: str | None
    root: bytes
    keys: tuple[str, ...]
    redacted: int
    checkpoints: int = 0

    def line(self) -> str:
        """The one line ``memseal verify`` prints on success."""
        head = self.head[:16] if self.head else "-"
        return (
            f"ok: {self.size} entries verified, head {head}, root {self.root.hex()[:16]}, "
            f"{len(self.keys)} signing key(s), {self.checkpoints} checkpoint(s), "
            f"{self.redacted} redacted payload(s)"
        )


def check_payload(entry: Entry, payload: bytes | None, salt: bytes | None) -> bool:
    """Step ``payload hash``: a present payload must hash, with its 16-byte salt, to the
    entry's ``payload_hash``; a residue (empty salt) must hold only texts the signed body
    refers to. Returns True when the entry commits to a payload that is absent or cut to a
    residue (a signed entry's ``redacts`` must then account for it), else False."""
    if payload is None:
        return entry.payload_hash is not None
    if entry.payload_hash is None:
        raise VerificationError(
            "a payload is stored but the entry commits to none", seq=entry.seq, step="payload hash"
        )
    if salt == RESIDUE_SALT:
        # A payload a forget erased in part: checked text by text against the signed
        # body, and (like a missing one) owed a later signed redaction.
        problem = check_residue(bytes(entry.body), payload)
        if problem is not None:
            raise VerificationError(problem, seq=entry.seq, step="payload hash")
        return True
    if salt is None or len(salt) != SALT_SIZE:
        raise VerificationError(
            "the payload salt is not 16 bytes", seq=entry.seq, step="payload hash"
        )
    if payload_hash(salt, payload) != entry.payload_hash:
        raise VerificationError(
            "payload does not match its hash", seq=entry.seq, step="payload hash"
        )
    return False


class _Alone(msgspec.Struct):
    """What a pool thread found for one record: the checks that need no earlier entry."""

    entry: Entry
    digest: bytes
    signer: VerifyKey | None  # the key object the signature was checked under, if any
    signed: bool
    payload_ok: bool | None  # None: left to the ordered pass (absent, residue, odd salt)


_Result = _Alone | VerificationError


def _check_alone(records: Sequence[Record], keys: Mapping[str, VerifyKey]) -> list[_Result]:
    # Steps 1, 2, 5 and 6 of each record on its own; stops at the first failure, which the
    # ordered pass raises when it reaches that record (an earlier one may fail first).
    out: list[_Result] = []
    for record in records:
        # Steps 1, 2, 4 and 5 are check_entry, the one check every reader of an entry makes.
        # A key it does not find may come into force in this very chunk (a rotation), and
        # a signature failure is named only after the seq's other checks: both are left to
        # the ordered pass, which looks the key up along the chain. The decoded body is
        # dropped here: thousands of them alive at once would make each garbage collection
        # walk them all (measured: several times slower).
        try:
            entry = check_entry(
                record.leaf, record.signature, keys, seq=record.seq, stored_hash=record.leaf_hash
            )
            signed = True
        except VerificationError as exc:
            if exc.step not in ("unknown key", "signature"):
                out.append(exc)
                break
            entry, signed = check_format(record.leaf, record.seq), False
        key = keys.get(entry.key)
        digest = record.leaf_hash  # equal to the recomputed hash: step 2 passed
        payload_ok: bool | None = None
        salt, payload = record.salt, record.payload
        if (
            payload is not None
            and entry.payload_hash is not None
            and salt is not None
            and len(salt) == SALT_SIZE
        ):
            payload_ok = payload_hash(salt, payload) == entry.payload_hash
        out.append(
            _Alone(
                entry=entry,
                digest=digest,
                signer=key,
                signed=signed,
                payload_ok=payload_ok,
            )
        )
    return out


class _Chunk(msgspec.Struct):
    records: Sequence[Record]
    tree: Sequence[bytes] | None
    parts: list[Future[list[_Result]]]


class LedgerVerifier:
    """Feed records in order; :meth:`finish` returns a summary or raises."""

    def __init__(
        self,
        trusted: Sequence[VerifierKey],
        *,
        executor: Executor | None = None,
        workers: int = 1,
        observe: Observe | None = None,
        payloads: bool = True,
    ) -> None:
        """``observe``, when given, sees each record once it passed (the derived tables'
        checks ride on this one scan instead of reading and decoding the log again).
        ``payloads=False`` checks signed bodies that travel without their payloads (tile
        entry bundles): an absent payload is then owed no redaction."""
        self._payloads = payloads
        self._chain = KeyChain(trusted)
        self._executor = executor
        self._workers = max(1, workers)
        self._observe = observe
        self._next = 0
        self._prev = GENESIS_PREV
        self._missing: dict[int, None] = {}
        self._redacted: set[int] = set()
        self._residues: set[int] = set()
        self._waiting: _Chunk | None = None  # fed, its records still on the pool
        self._edge: list[tuple[int, bytes]] = []  # (level, hash) of the tree's right edge
        self._computed: list[bytes] = []  # stored hashes computed in the current chunk
        self._bounds: list[tuple[int, int]] = []  # (seq, end in _computed) per record passed
        self._checkpoints: list[tuple[int, str]] = []
        self._checked = 0

    def expect_checkpoints(self, notes: Sequence[tuple[int, str]]) -> None:
        """Checkpoints (size, signed note) to check as the log passes their sizes."""
        self._checkpoints = sorted([*self._checkpoints, *notes])
        while self._checkpoints and self._checkpoints[0][0] <= self._next:
            if self._checkpoints[0][0] < self._next:
                raise VerificationError(
                    "a checkpoint arrived after its size was passed", step="checkpoint"
                )
            self._check_checkpoint()

    @property
    def root(self) -> bytes:
        """The root of the tree of the entries verified so far."""
        if not self._edge:
            return EMPTY_ROOT
        h = self._edge[-1][1]
        for _, left in reversed(self._edge[:-1]):
            h = node_hash(left, h)
        return h

    @property
    def active_keys(self) -> list[VerifierKey]:
        """The keys in force at the size verified so far."""
        return self._chain.in_force

    @property
    def size(self) -> int:
        """How many entries have passed every check so far (see :meth:`flush`)."""
        return self._next

    @property
    def redacted(self) -> frozenset[int]:
        """Seqs some verified entry redacts (their payloads must be gone)."""
        return frozenset(self._redacted)

    @property
    def residues(self) -> frozenset[int]:
        """Seqs whose stored payload is a residue a forget left (checked text by text)."""
        return frozenset(self._residues)

    def feed(self, records: Sequence[Record], tree: Sequence[bytes] | None = None) -> None:
        """Check the next records; with an executor, they may still be in flight when this
        returns (the chunk fed before is checked meanwhile; :meth:`flush` waits).

        ``tree``, when given, is the stored Merkle hashes these records wrote, in order.
        """
        if self._executor is None:
            self._settle(records, tree, _check_alone(records, self._chain.by_id))
            return
        # The keys in force now: a rotation still in flight leaves later entries to the
        # ordered pass, which checks those signatures itself.
        keys = self._chain.by_id
        step = -(-len(records) // self._workers) or 1
        chunk = _Chunk(
            records=records,
            tree=tree,
            parts=[
                self._executor.submit(_check_alone, records[i : i + step], keys)
                for i in range(0, len(records), step)
            ],
        )
        self.flush()
        self._waiting = chunk

    def flush(self) -> None:
        """Finish checking every record fed so far (raises at the first failure)."""
        chunk, self._waiting = self._waiting, None
        if chunk is None:
            return
        results: list[_Result] = []
        for part in chunk.parts:
            results.extend(part.result())
        self._settle(chunk.records, chunk.tree, results)

    def _settle(
        self, records: Sequence[Record], tree: Sequence[bytes] | None, results: list[_Result]
    ) -> None:
        failure: VerificationError | None = None
        unsigned: int | None = None  # the first seq whose signature does not verify
        self._computed = []
        self._bounds = []
        for record, result in zip(records, results, strict=False):
            try:
                if not self._check(record, result):
                    unsigned = record.seq
                    break
            except VerificationError as exc:
                failure = exc
                break
        if tree is not None:
            complete = failure is None and unsigned is None
            failure = _earliest(failure, self._compare_tree(tree, complete=complete))
        # At one seq, what its other checks (the tree's too) find is named before its
        # signature: an entry that does not even fit the log is reported as such.
        if failure is not None and (
            unsigned is None or failure.seq is None or failure.seq <= unsigned
        ):
            raise failure
        if unsigned is not None:
            raise VerificationError(
                "Ed25519 signature does not verify", seq=unsigned, step="signature"
            )

    def _check(self, record: Record, alone: _Result) -> bool:
        # Every check of one record but the tree's; returns whether its signature verifies.
        seq = self._next
        if record.seq != seq:
            raise VerificationError(
                f"expected seq {seq} next, found seq {record.seq} (a missing or moved entry)",
                seq=seq,
                step="chain",
            )
        # 1. format and 2. stored hash, found by the pool thread
        if isinstance(alone, VerificationError):
            raise alone
        entry, digest = alone.entry, alone.digest
        # 3. chain
        if entry.prev != self._prev:
            raise VerificationError(
                "prev is not the leaf hash of the entry before", seq=seq, step="chain"
            )
        # 4. unknown key
        key = self._chain.signer_of(entry)
        # 5. signature: the pool thread's answer counts only under this very key
        signed = (
            alone.signed
            if alone.signer is key
            else signature_verifies(key, digest, record.signature)
        )
        # 6. payload hash (a present, salted payload was hashed by the pool thread)
        if alone.payload_ok is None:
            owed = check_payload(entry, record.payload, record.salt)
        elif not alone.payload_ok:
            raise VerificationError("payload does not match its hash", seq=seq, step="payload hash")
        else:
            owed = False
        if owed and self._payloads:
            if record.payload is not None:
                self._residues.add(seq)
            self._missing[seq] = None
        # 7. redaction: this entry authorises erasing earlier payloads.
        for earlier in entry.redacts:
            self._missing.pop(earlier, None)
            self._redacted.add(earlier)
        # A key_rotated entry hands trust over: from the next entry only the new key counts.
        self._chain.hand_over(entry)
        self._next = seq + 1
        self._prev = digest.hex()
        self._push_leaf(digest)
        self._bounds.append((seq, len(self._computed)))
        # 9. checkpoint, at each size a checkpoint was signed for
        while self._checkpoints and self._checkpoints[0][0] == self._next:
            self._check_checkpoint()
        if self._observe is not None and signed:
            self._observe(record, entry)
        return signed

    def _push_leaf(self, digest: bytes) -> None:
        # The tlog layout writes the leaf hash, then one node per subtree the leaf completes;
        # merging equal levels on the right edge yields exactly those, in that order.
        self._computed.append(digest)
        level, h = 0, digest
        while self._edge and self._edge[-1][0] == level:
            _, left = self._edge.pop()
            h = node_hash(left, h)
            level += 1
            self._computed.append(h)
        self._edge.append((level, h))

    def _compare_tree(self, tree: Sequence[bytes], *, complete: bool) -> VerificationError | None:
        # 8. tree
        start = 0
        for seq, end in self._bounds:
            if list(tree[start:end]) != self._computed[start:end]:
                return VerificationError(
                    "stored Merkle hashes differ from those computed from the entries",
                    seq=seq,
                    step="tree",
                )
            start = end
        if complete and len(tree) != len(self._computed):
            return VerificationError(
                f"{len(tree)} stored Merkle hashes where the entries make {len(self._computed)}",
                seq=self._bounds[-1][0] if self._bounds else None,
                step="tree",
            )
        return None

    def _check_checkpoint(self) -> None:
        size, note = self._checkpoints.pop(0)
        seq = size - 1 if size > 0 else None
        try:
            opened = open_note(note, self.active_keys)
            checkpoint = parse_checkpoint(opened.text)
        except (VerificationError, InvalidRequest) as exc:
            raise VerificationError(
                f"checkpoint of size {size} does not verify: {exc}", seq=seq, step="checkpoint"
            ) from exc
        if checkpoint.size != size or checkpoint.root != self.root:
            raise VerificationError(
                f"checkpoint of size {size} names a root the entries do not make",
                seq=seq,
                step="checkpoint",
            )
        self._checked += 1

    def finish(self) -> VerifySummary:
        """End the check after the last entry and return its summary.

        Raises if a checkpoint was signed for more entries than the log has (a
        truncation) or a payload is missing with no signed entry redacting it.
        """
        self.flush()
        if self._checkpoints:
            size = self._checkpoints[0][0]
            raise VerificationError(
                f"the log has {self._next} entries but a checkpoint of size {size} was signed: "
                "the log was truncated",
                seq=self._next,
                step="checkpoint",
            )
        if self._missing:
            seq = next(iter(self._missing))
            raise VerificationError(
                "payload is missing and no signed entry redacts it", seq=seq, step="redaction"
            )
        return VerifySummary(
            size=self._next,
            head=None if self._next == 0 else self._prev,
            root=self.root,
            checkpoints=self._checked,
            keys=self._chain.used,
            redacted=len(self._redacted),
        )


def _earliest(a: VerificationError | None, b: VerificationError | None) -> VerificationError | None:
    if a is None or b is None:
        return a or b
    return b if (b.seq if b.seq is not None else -1) < (a.seq if a.seq is not None else -1) else a
