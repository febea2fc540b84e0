"""The check of one signed entry, made the same way wherever an entry is trusted.

:func:`check_entry` is the one place that turns signed bytes into an
:class:`~memseal.ledger.entry.Entry`: the ledger audit, memo provenance, run
leases, bundles and read proofs all call it, so a check added here reaches
every reader at once (two hand-made copies had already drifted apart: one
trusted the stored leaf hash without recomputing it). Its steps, in order,
with the step names :class:`VerificationError` carries:

1. ``format``: the bytes decode strictly as a canonical v1 entry that carries
   the seq it is read at (:func:`check_format`).
2. ``stored hash``: the leaf hash is recomputed from the bytes, always; a
   stored one given beside them must equal it.
3. ``unknown key``: the entry's key id names a key the caller trusts at this
   point of the log (a :class:`KeyChain` walked in seq order, or a plain map
   of key ids for a reader that trusts a fixed set).
4. ``signature``: Ed25519 over the domain-separated recomputed leaf hash,
   never over a hash stored beside the bytes.

What only a walk of the whole log can tell (``prev`` chaining, payloads,
redactions, the tree) stays with the callers that walk it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from .entry import FORMAT_VERSION, Entry, decode_entry, leaf_hash, signing_message
from .errors import InvalidRequest, VerificationError
from .note import VerifierKey, parse_vkey

__all__ = ["KeyChain", "check_entry", "check_format", "signature_verifies"]

_HEADER = re.compile(
    rb'\{"v":\d+,"seq":\d+,"at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z",'
    rb'"kind":"[a-z][a-z0-9_]{0,63}","prev":"[0-9a-f]{64}","key":"[0-9a-f]{8}",'
    rb'"redacts":\[[0-9,]*\],"payload_hash":(?:null|"[0-9a-f]{64}"),"body":\{'
)
_canonical = msgspec.json.Encoder(order="deterministic")


class KeyChain:
    """The keys trusted at the current point of a log, walked entry by entry in seq order.

    It starts from the keys the auditor trusts; a verified ``key_rotated``
    entry (:meth:`hand_over`) hands trust from its signer to the key it names,
    and the old key no longer counts. The ledger audit, bundle verification
    and anything else that follows a log's signers use this one walk.
    """

    def __init__(self, trusted: Sequence[VerifierKey]) -> None:
        if not trusted:
            raise VerificationError("no trusted key given", step="unknown key")
        self._active: dict[str, VerifyKey] = {
            k.key_id.hex(): VerifyKey(k.public_key) for k in trusted
        }
        self._known: dict[str, VerifierKey] = {k.key_id.hex(): k for k in trusted}
        self._retired: set[str] = set()
        self._used: dict[str, None] = {}

    @property
    def in_force(self) -> list[VerifierKey]:
        """The keys that may sign the next entry."""
        return [self._known[k] for k in self._active]

    @property
    def known(self) -> list[VerifierKey]:
        """Every key of the chain so far: the trusted ones, then each handed over to."""
        return list(self._known.values())

    @property
    def by_id(self) -> dict[str, VerifyKey]:
        """A copy of the keys in force by key id (what pool threads check signatures with)."""
        return dict(self._active)

    @property
    def used(self) -> tuple[str, ...]:
        """``name+keyid`` of every key that signed an entry looked up so far."""
        return tuple(f"{self._known[k].name}+{k}" for k in self._used)

    def signer_of(self, entry: Entry) -> VerifyKey:
        """The key in force that signed ``entry``; raise step ``unknown key`` if none is."""
        key = self._active.get(entry.key)
        if key is None:
            raise VerificationError(
                f"signed by key {entry.key}, which is not trusted: not reachable from the "
                "trusted key through key_rotated entries",
                seq=entry.seq,
                step="unknown key",
            )
        self._used[entry.key] = None
        return key

    def hand_over(self, entry: Entry) -> None:
        """Apply a verified ``key_rotated`` entry (any other kind: nothing to do)."""
        if entry.kind != "key_rotated":
            return
        try:
            body = msgspec.json.decode(entry.body)
            new = parse_vkey(body["vkey"])
        except (
            msgspec.DecodeError,
            UnicodeDecodeError,
            KeyError,
            TypeError,
            InvalidRequest,
        ) as exc:
            raise VerificationError(
                f"key_rotated entry does not name a valid vkey: {exc}", seq=entry.seq, step="format"
            ) from exc
        new_id = new.key_id.hex()
        if new_id == entry.key or new_id in self._retired:
            raise VerificationError(
                "key_rotated must hand over to a new key", seq=entry.seq, step="unknown key"
            )
        self._active.pop(entry.key, None)
        self._retired.add(entry.key)
        self._active[new_id] = VerifyKey(new.public_key)
        self._known[new_id] = new


def check_entry(
    leaf: bytes,
    signature: bytes,
    keys: KeyChain | Mapping[str, VerifyKey],
    *,
    seq: int,
    stored_hash: bytes | None = None,
) -> Entry:
    """The entry ``leaf`` read at ``seq``, checked (format, stored hash, key, signature).

    ``keys`` is the chain of keys in force at ``seq`` (its :meth:`KeyChain.signer_of`
    notes the key as used; handing over on a ``key_rotated`` entry is the caller's,
    once its own checks of the entry passed) or a fixed map of trusted key ids.
    Raises :class:`VerificationError` naming ``seq`` and the step that failed.
    """
    # 1. format
    entry = check_format(leaf, seq)
    # 2. stored hash: recomputed every time, so bytes swapped under a kept hash and
    # signature never pass on the strength of the stored hash.
    digest = leaf_hash(leaf)
    if stored_hash is not None and stored_hash != digest:
        raise VerificationError(
            "stored leaf hash does not match the entry", seq=seq, step="stored hash"
        )
    # 3. unknown key
    if isinstance(keys, KeyChain):
        key = keys.signer_of(entry)
    else:
        found = keys.get(entry.key)
        if found is None:
            raise VerificationError(
                f"signed by key {entry.key}, which is not trusted", seq=seq, step="unknown key"
            )
        key = found
    # 4. signature, over the hash of these very bytes
    if not signature_verifies(key, digest, signature):
        raise VerificationError("Ed25519 signature does not verify", seq=seq, step="signature")
    return entry


def signature_verifies(key: VerifyKey, leaf_digest: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``key``'s Ed25519 signature of the entry with this leaf hash."""
    try:
        key.verify(signing_message(leaf_digest), signature)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


def check_format(leaf: bytes, seq: int) -> Entry:
    """Step ``format``: the entry bytes stored at ``seq``, decoded strictly (canonical v1
    bytes carrying their seq, a canonical JSON object body); raise VerificationError."""
    try:
        entry = decode_entry(leaf)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
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
    try:
        body: Any = msgspec.json.decode(entry.body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return "body is not JSON"
    if not isinstance(body, dict) or _canonical.encode(body) != bytes(entry.body):
        return "body is not a canonical JSON object"
    return None
