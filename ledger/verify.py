"""Offline verification of a ledger: every entry, in order, from one trusted key.

:class:`LedgerVerifier` is fed records in seq order, in chunks, and keeps
only what later entries need (the previous leaf hash, the known keys, the
payloads still awaiting a signed redaction). It returns ``None`` or raises
:class:`VerificationError` naming the first bad seq and the failed step.

Per entry, in order (the step names appear in errors):

1. ``format``: the stored bytes decode strictly as an entry of format v1,
   are canonical (re-encoding gives the same bytes, so one entry has one
   encoding), and carry the seq they are stored at.
2. ``stored hash``: the stored leaf hash is ``SHA-256(0x00 || bytes)``.
3. ``chain``: ``prev`` is the leaf hash of the entry before.
4. ``unknown key``: the signer's key id is one the auditor trusts.
5. ``signature``: Ed25519 over the domain-separated leaf hash. Checked in
   batches on a thread pool: libsodium releases the GIL, so two cores
   verify twice as fast.
6. ``payload hash``: a present payload hashes, with its salt, to
   ``payload_hash``.
7. ``redaction``: a missing payload is listed by a later signed entry's
   ``redacts``; what is still unlisted at the end fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from typing import Any

import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from .entry import (
    FORMAT_VERSION,
    GENESIS_PREV,
    SALT_SIZE,
    Entry,
    decode_entry,
    leaf_hash,
    payload_hash,
    signing_message,
)
from .errors import VerificationError
from .note import VerifierKey
from .store import Record

__all__ = ["LedgerVerifier", "VerifySummary"]

_HEADER = re.compile(
    rb'\{"v":\d+,"seq":\d+,"at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z",'
    rb'"kind":"[a-z][a-z0-9_]{0,63}","prev":"[0-9a-f]{64}","key":"[0-9a-f]{8}",'
    rb'"redacts":\[[0-9,]*\],"payload_hash":(?:null|"[0-9a-f]{64}"),"body":\{'
)
_canonical = msgspec.json.Encoder(order="deterministic")


class VerifySummary(msgspec.Struct, frozen=True, kw_only=True):
    """What a successful verification saw."""

    size: int
    head: str | None
    keys: tuple[str, ...]
    redacted: int

    def line(self) -> str:
        head = self.head[:16] if self.head else "-"
        return (
            f"ok: {self.size} entries verified, head {head}, "
            f"{len(self.keys)} signing key(s), {self.redacted} redacted payload(s)"
        )


class _Pending(msgspec.Struct):
    seq: int
    key: VerifyKey
    message: bytes
    signature: bytes


class LedgerVerifier:
    """Feed records in order; :meth:`finish` returns a summary or raises."""

    def __init__(
        self,
        trusted: Sequence[VerifierKey],
        *,
        executor: Executor | None = None,
        workers: int = 1,
    ) -> None:
        if not trusted:
            raise VerificationError("no trusted key given", step="unknown key")
        self._keys: dict[str, VerifyKey] = {
            k.key_id.hex(): VerifyKey(k.public_key) for k in trusted
        }
        self._names = {k.key_id.hex(): k.name for k in trusted}
        self._used: dict[str, None] = {}
        self._executor = executor
        self._workers = max(1, workers)
        self._next = 0
        self._prev = GENESIS_PREV
        self._missing: dict[int, None] = {}
        self._redacted: set[int] = set()
        self._inflight: list[Future[int | None]] = []

    @property
    def size(self) -> int:
        return self._next

    @property
    def redacted(self) -> frozenset[int]:
        """Seqs some verified entry redacts (their payloads must be gone)."""
        return frozenset(self._redacted)

    def feed(self, records: Sequence[Record]) -> None:
        """Check the next records; signatures may still be in flight when this returns."""
        pending: list[_Pending] = []
        failure: VerificationError | None = None
        for record in records:
            try:
                pending.append(self._check(record))
            except VerificationError as exc:
                failure = exc
                break
        # The previous chunk's signatures were checked on the pool while this chunk's
        # structure was checked here; an earlier bad signature is the first failure.
        self._collect()
        if failure is not None or self._executor is None or self._workers == 1:
            bad = _first_bad(pending)
            if bad is not None:
                raise VerificationError(
                    "Ed25519 signature does not verify", seq=bad, step="signature"
                )
            if failure is not None:
                raise failure
            return
        step = -(-len(pending) // self._workers)
        self._inflight = [
            self._executor.submit(_first_bad, pending[i : i + step])
            for i in range(0, len(pending), step)
        ]

    def _collect(self) -> None:
        # 5. signature (the batches submitted by the previous feed)
        inflight, self._inflight = self._inflight, []
        found = [seq for seq in (f.result() for f in inflight) if seq is not None]
        if found:
            raise VerificationError(
                "Ed25519 signature does not verify", seq=min(found), step="signature"
            )

    def _check(self, record: Record) -> _Pending:
        seq = self._next
        # 1. format
        if record.seq != seq:
            raise VerificationError(
                f"expected seq {seq} next, found seq {record.seq} (a missing or moved entry)",
                seq=seq,
                step="chain",
            )
        entry = _decode(record.leaf, seq)
        # 2. stored hash
        digest = leaf_hash(record.leaf)
        if digest != record.leaf_hash:
            raise VerificationError(
                "stored leaf hash does not match the entry", seq=seq, step="stored hash"
            )
        # 3. chain
        if entry.prev != self._prev:
            raise VerificationError(
                "prev is not the leaf hash of the entry before", seq=seq, step="chain"
            )
        # 4. unknown key
        key = self._keys.get(entry.key)
        if key is None:
            raise VerificationError(
                f"signed by key {entry.key}, which is not trusted", seq=seq, step="unknown key"
            )
        self._used[entry.key] = None
        # 6. payload hash (the signature, step 5, is checked in a batch by the caller)
        if record.payload is not None:
            if entry.payload_hash is None:
                raise VerificationError(
                    "a payload is stored but the entry commits to none",
                    seq=seq,
                    step="payload hash",
                )
            if record.salt is None or len(record.salt) != SALT_SIZE:
                raise VerificationError(
                    "the payload salt is not 16 bytes", seq=seq, step="payload hash"
                )
            if payload_hash(record.salt, record.payload) != entry.payload_hash:
                raise VerificationError(
                    "payload does not match its hash", seq=seq, step="payload hash"
                )
        elif entry.payload_hash is not None:
            self._missing[seq] = None
        # 7. redaction: this entry authorises erasing earlier payloads.
        for earlier in entry.redacts:
            self._missing.pop(earlier, None)
            self._redacted.add(earlier)
        self._on_verified(entry)
        self._next = seq + 1
        self._prev = digest.hex()
        return _Pending(
            seq=seq, key=key, message=signing_message(digest), signature=record.signature
        )

    def _on_verified(self, entry: Entry) -> None:
        """Hook for entries that change what later entries are checked against."""

    def finish(self) -> VerifySummary:
        self._collect()
        if self._missing:
            seq = next(iter(self._missing))
            raise VerificationError(
                "payload is missing and no signed entry redacts it", seq=seq, step="redaction"
            )
        return VerifySummary(
            size=self._next,
            head=None if self._next == 0 else self._prev,
            keys=tuple(f"{self._names.get(k, '?')}+{k}" for k in self._used),
            redacted=len(self._redacted),
        )


def _first_bad(pending: Sequence[_Pending]) -> int | None:
    for item in pending:
        try:
            item.key.verify(item.message, item.signature)
        except (BadSignatureError, ValueError, TypeError):
            return item.seq
    return None


def _decode(leaf: bytes, seq: int) -> Entry:
    try:
        entry = decode_entry(leaf)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise VerificationError(
            f"entry bytes do not decode: {exc}", seq=seq, step="format"
        ) from exc
    problem = _format_problem(entry, leaf, seq)
    if problem is not None:
        raise VerificationError(problem, seq=seq, step="format")
    return entry


def _format_problem(entry: Entry, leaf: bytes, seq: int) -> str | None:
    if entry.v != FORMAT_VERSION:
        return f"format version {entry.v}; this verifier reads {FORMAT_VERSION}"
    if entry.seq != seq:
        return f"entry says seq {entry.seq} but is stored at seq {seq}"
    # One pattern checks every header field's form at once (the cheap path for big ledgers).
    if _HEADER.match(leaf) is None:
        return "a header field is malformed (time, kind, prev, key or payload_hash)"
    if list(entry.redacts) != sorted(set(entry.redacts)) or (
        entry.redacts and (entry.redacts[-1] >= seq or entry.redacts[0] < 0)
    ):
        return "`redacts` must list earlier seqs, ascending, once each"
    # One entry, one encoding: re-encoding the decoded entry must give the stored bytes.
    if _canonical.encode(entry) != leaf:
        return "entry bytes are not canonical"
    body: Any = msgspec.json.decode(entry.body)
    if not isinstance(body, dict) or _canonical.encode(body) != bytes(entry.body):
        return "body is not a canonical JSON object"
    return None
