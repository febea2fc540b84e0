"""Witness cosignatures of checkpoints: C2SP ``cosignature/v1`` (https://c2sp.org/tlog-cosignature).

A cosignature is one more signature line on a checkpoint note, by a witness
that checked the checkpoint is consistent with every earlier one it saw::

    — witness.example.com/w1 base64(key id || timestamp || signature)

* the key id is ``SHA-256(name || 0x0A || 0x04 || public key)[:4]``: the
  algorithm byte 0x04 (timestamped Ed25519 cosignature) differs from a note
  signer's 0x01, so a witness line is an unknown key to a log verifier and
  the other way round;
* the timestamp is 8 bytes, big-endian, POSIX seconds, at most 2^63-1;
* the signature is Ed25519 over ``cosignature/v1\\n`` ``time <decimal>\\n``
  and the checkpoint's whole note text (extension lines included, no
  signature line). The message does not name the witness, so one public key
  serves one witness only.

Witness public keys travel as vkeys with type byte 0x04:
``name+<8 hex key id>+base64(0x04 || public key)``. The private key stays
in Go's ``PRIVATE+KEY+`` text form (type 0x01), the form transparency-dev's
``NewSignerForCosignatureV1`` reads, so a witness key works in both.

Checking follows the signed-note rules: lines by keys not trusted are
ignored; a line that names a trusted witness (name and key id) must verify,
or the whole note is refused; a quorum counts distinct public keys.
"""

from __future__ import annotations

import hashlib
import re
import struct
import time
from collections.abc import Callable, Sequence

import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from ._base64 import b64decode, b64encode
from .checkpoint import Checkpoint, parse_checkpoint
from .errors import InvalidRequest, VerificationError
from .note import NoteSigner, split_note

__all__ = [
    "ALG_COSIGNATURE_V1",
    "COSIGNATURE_HEADER",
    "MAX_FUTURE_SKEW",
    "MAX_TIMESTAMP",
    "Cosignature",
    "Cosigner",
    "CosignerKey",
    "check_cosignatures",
    "cosignature_message",
    "cosigner_key_id",
    "format_cosigner_vkey",
    "parse_cosigner_vkey",
    "require_cosignatures",
]

ALG_COSIGNATURE_V1 = 0x04
COSIGNATURE_HEADER = "cosignature/v1"
MAX_TIMESTAMP = 2**63 - 1

#: How far in the future a cosignature's time may lie (clock drift between machines).
MAX_FUTURE_SKEW = 300

_STEP = "witness"
_HEX_KEY_ID = re.compile(r"[0-9a-f]{8}")
_PUBLIC_KEY_SIZE = 32
_SIGNATURE_SIZE = 64
_BLOB_SIZE = 4 + 8 + _SIGNATURE_SIZE
_EM_DASH_PREFIX = "\u2014 "


def cosigner_key_id(name: str, public_key: bytes) -> bytes:
    """The 4-byte id of a cosignature/v1 key: SHA-256(name || 0x0A || 0x04 || key)[:4]."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([ALG_COSIGNATURE_V1]) + public_key)
    return digest.digest()[:4]


def _name_defect(name: str) -> str | None:
    if not name:
        return "is empty"
    if "+" in name:
        return "contains '+'"
    if any(ch.isspace() for ch in name) or not name.isprintable():
        return "contains whitespace or a non-printable character"
    return None


def cosignature_message(body: str, timestamp: int) -> bytes:
    """The bytes a cosignature/v1 signs: header line, time line, the checkpoint note text."""
    if isinstance(timestamp, bool) or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise InvalidRequest("cosignature timestamp must be an integer from 0 to 2^63-1")
    if not body.endswith("\n"):
        raise InvalidRequest("cosigned checkpoint text must end with a newline")
    return f"{COSIGNATURE_HEADER}\ntime {timestamp}\n{body}".encode()


class CosignerKey(msgspec.Struct, frozen=True, kw_only=True):
    """A trusted witness public key (cosignature/v1) with its name and key id."""

    name: str
    key_id: bytes
    public_key: bytes

    def __post_init__(self) -> None:
        defect = _name_defect(self.name)
        if defect is not None:
            raise InvalidRequest(f"witness vkey name {defect}")
        if len(self.public_key) != _PUBLIC_KEY_SIZE:
            raise InvalidRequest("witness vkey ed25519 public key must be 32 bytes")
        if self.key_id != cosigner_key_id(self.name, self.public_key):
            raise InvalidRequest("witness vkey key id does not match its name and public key")

    @property
    def text(self) -> str:
        """The vkey line, type byte 0x04."""
        return format_cosigner_vkey(self.name, self.public_key)

    def verify(self, body: str, timestamp: int, signature: bytes) -> bool:
        """Whether ``signature`` is this witness's cosignature of ``body`` at ``timestamp``."""
        if len(signature) != _SIGNATURE_SIZE:
            return False
        try:
            VerifyKey(self.public_key).verify(cosignature_message(body, timestamp), signature)
        except (BadSignatureError, ValueError, InvalidRequest):
            return False
        return True


def format_cosigner_vkey(name: str, public_key: bytes) -> str:
    """``name+<8 hex key id>+base64(0x04 || public key)``."""
    key = CosignerKey(name=name, key_id=cosigner_key_id(name, public_key), public_key=public_key)
    data = b64encode(bytes([ALG_COSIGNATURE_V1]) + key.public_key)
    return f"{name}+{key.key_id.hex()}+{data}"


def parse_cosigner_vkey(text: str) -> CosignerKey:
    """Parse a witness vkey strictly: type 0x04, a 32-byte key, a matching key id."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3:
        raise InvalidRequest("witness vkey must be name+keyid+keydata")
    name, hex_id, data64 = parts
    defect = _name_defect(name)
    if defect is not None:
        raise InvalidRequest(f"witness vkey name {defect}")
    if not _HEX_KEY_ID.fullmatch(hex_id):
        raise InvalidRequest("witness vkey key id must be 8 lowercase hex digits")
    data = b64decode(data64)
    if data is None or not data:
        raise InvalidRequest("witness vkey key data is not valid base64")
    if data[0] != ALG_COSIGNATURE_V1:
        hint = " (a log's note key, not a witness's)" if data[0] == 0x01 else ""
        raise InvalidRequest(
            f"witness vkey type 0x{data[0]:02x} is not cosignature/v1 (0x04){hint}"
        )
    if len(data) != 1 + _PUBLIC_KEY_SIZE:
        raise InvalidRequest("witness vkey ed25519 public key must be 32 bytes")
    public_key = data[1:]
    if bytes.fromhex(hex_id) != cosigner_key_id(name, public_key):
        raise InvalidRequest("witness vkey key id does not match its name and public key")
    return CosignerKey(name=name, key_id=bytes.fromhex(hex_id), public_key=public_key)


class Cosigner:
    """A witness's signing key: makes cosignature/v1 lines."""

    def __init__(self, signer: NoteSigner) -> None:
        # The seed is the note signer's; only the key id (type byte 0x04) differs.
        self._signer = signer
        public_key = bytes(signer.signing_key.verify_key)
        self.key = CosignerKey(
            name=signer.name,
            key_id=cosigner_key_id(signer.name, public_key),
            public_key=public_key,
        )

    @property
    def name(self) -> str:
        """The witness's key name, the first word of its lines."""
        return self.key.name

    @property
    def vkey(self) -> str:
        """The witness's public key line, to hand to logs and verifiers."""
        return self.key.text

    def cosign(self, body: str, timestamp: int) -> str:
        """The signature line (ending in a newline) cosigning checkpoint text ``body``."""
        if timestamp < 1:
            # tlog-witness: the timestamp must never be left out (zero).
            raise InvalidRequest("a witness cosignature needs a timestamp after 1970")
        signature = self._signer.sign(cosignature_message(body, timestamp))
        blob = self.key.key_id + struct.pack(">Q", timestamp) + signature
        return f"{_EM_DASH_PREFIX}{self.name} {b64encode(blob)}\n"

    def __repr__(self) -> str:
        return f"Cosigner(name={self.name!r}, key_id={self.key.key_id.hex()!r})"


class Cosignature(msgspec.Struct, frozen=True, kw_only=True):
    """A verified cosignature: which trusted witness, and when it cosigned."""

    witness: CosignerKey
    timestamp: int


def check_cosignatures(
    note: str,
    witnesses: Sequence[CosignerKey],
    *,
    now: Callable[[], float] = time.time,
) -> tuple[Checkpoint, tuple[Cosignature, ...]]:
    """The checkpoint of ``note`` and its valid cosignatures by ``witnesses``.

    Does not check the log's own signature (that is :func:`open_checkpoint`'s
    job, with the log's keys). Lines by other keys are ignored. Raises
    VerificationError (step ``witness``) for a malformed note, a line naming a
    trusted witness whose cosignature does not verify, a repeated line by one
    witness, or a timestamp more than :data:`MAX_FUTURE_SKEW` seconds ahead.
    """
    # 1. The note and its text must be a well-formed checkpoint.
    try:
        body, signatures = split_note(note)
        checkpoint = parse_checkpoint(body)
    except InvalidRequest as exc:
        raise VerificationError(f"malformed checkpoint note: {exc}", step=_STEP) from None
    by_id: dict[tuple[str, bytes], CosignerKey] = {}
    for trusted in witnesses:
        by_id.setdefault((trusted.name, trusted.key_id), trusted)
    found: list[Cosignature] = []
    seen: set[tuple[str, bytes]] = set()
    for sig in signatures:
        ident = (sig.name, sig.key_id)
        key = by_id.get(ident)
        # 2. Lines by keys the verifier does not trust are ignored (signed-note).
        if key is None:
            continue
        label = f"{sig.name}+{sig.key_id.hex()}"
        # 3. One witness counts once; a second line is refused, not skipped unread.
        if ident in seen:
            raise VerificationError(f"two cosignatures by witness {label}", step=_STEP)
        seen.add(ident)
        # 4. The blob is key id, 8-byte big-endian time, 64-byte signature.
        if len(sig.signature) != _BLOB_SIZE - 4:
            raise VerificationError(
                f"cosignature by witness {label} is not a cosignature/v1 (wrong length)",
                step=_STEP,
            )
        (timestamp,) = struct.unpack(">Q", sig.signature[:8])
        if timestamp > MAX_TIMESTAMP:
            raise VerificationError(
                f"cosignature by witness {label} has a time beyond 2^63-1", step=_STEP
            )
        # 5. The signature must cover this very note text at that time.
        if not key.verify(body, timestamp, sig.signature[8:]):
            raise VerificationError(f"invalid cosignature by witness {label}", step=_STEP)
        # 6. A time far ahead of ours is refused: such a cosignature would look fresh forever.
        if timestamp > now() + MAX_FUTURE_SKEW:
            raise VerificationError(
                f"cosignature by witness {label} is dated {timestamp}, in the future",
                step=_STEP,
            )
        found.append(Cosignature(witness=key, timestamp=timestamp))
    return checkpoint, tuple(found)


def require_cosignatures(
    note: str,
    witnesses: Sequence[CosignerKey],
    quorum: int,
    *,
    now: Callable[[], float] = time.time,
) -> tuple[Cosignature, ...]:
    """Raise VerificationError unless ``note`` carries at least ``quorum`` valid cosignatures.

    Witnesses are counted by public key: one key listed under two names counts once.
    """
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
        raise InvalidRequest("the witness quorum must be a whole number >= 1")
    keys = {key.public_key for key in witnesses}
    if quorum > len(keys):
        raise InvalidRequest(
            f"a quorum of {quorum} witnesses needs at least {quorum} trusted witness keys, "
            f"got {len(keys)}"
        )
    checkpoint, found = check_cosignatures(note, witnesses, now=now)
    distinct = {c.witness.public_key for c in found}
    if len(distinct) < quorum:
        raise VerificationError(
            f"checkpoint of size {checkpoint.size} carries {len(distinct)} valid "
            f"cosignature(s) by trusted witnesses, {quorum} required",
            step=_STEP,
        )
    return found
