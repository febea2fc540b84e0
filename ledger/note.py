"""C2SP signed notes (https://c2sp.org/signed-note) and Go's note key texts, Ed25519 only.

A signed note is a UTF-8 text ending in a newline, one blank line, then one or
more signature lines::

    If you think cryptography is the answer to your problem,
    then you don't know what your problem is.

    — PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC[...]yBwJnAM=

A signature line is an em dash (U+2014), a space, the key name, a space and
``base64(key id || signature)``, where the signature covers the text including
its final newline but not the blank line. The whole note must be valid UTF-8
with no control character below U+0020 other than the newline.

A key is named by its name and a 4-byte key id, the first four bytes of
``SHA-256(name || 0x0A || 0x01 || public key)``; 0x01 is the Ed25519 type.
Public keys travel as vkey lines, ``name+<key id, 8 lowercase hex>+base64(0x01
|| public key)``; private keys in Go's text form, ``PRIVATE+KEY+`` followed by
the same three parts with the 32-byte seed in place of the public key.

Opening a note follows the spec and Go's ``note.Open``: signatures by unknown
keys are ignored (and reported as unverified), a known key's bad signature
rejects the whole note, and a note that no known key signs is rejected.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from memseal.ledger._base64 import b64decode, b64encode
from memseal.ledger.errors import InvalidRequest, VerificationError

__all__ = [
    "ALG_ED25519",
    "MAX_SIGNATURES",
    "Note",
    "NoteSignature",
    "NoteSigner",
    "VerifierKey",
    "format_skey",
    "format_vkey",
    "key_id",
    "open_note",
    "parse_skey",
    "parse_vkey",
    "sign_note",
    "split_note",
]

ALG_ED25519 = 0x01

# Go's note.Open refuses more than 100 signature lines (the spec asks for at
# least 16); matching it means any note Go accepts, we accept, and vice versa.
MAX_SIGNATURES = 100

_EM_DASH_PREFIX = "\u2014 "
_SKEY_PREFIX = "PRIVATE+KEY+"
_HEX_KEY_ID = re.compile(r"[0-9a-f]{8}")
_PUBLIC_KEY_SIZE = 32
_SEED_SIZE = 32
_SIGNATURE_SIZE = 64


def key_id(name: str, public_key: bytes) -> bytes:
    """The 4-byte id of an Ed25519 key: SHA-256(name || 0x0A || 0x01 || key)[:4]."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public_key)
    return digest.digest()[:4]


def _spec_name_defect(name: str) -> str | None:
    """What the spec forbids in a key name (and Go's isValidName), or None."""
    if not name:
        return "is empty"
    if "+" in name:
        return "contains '+'"
    if any(ch.isspace() for ch in name):
        return "contains whitespace"
    return None


def _key_name_defect(name: str) -> str | None:
    """Stricter than the spec for keys we hold or trust: printable characters only.

    A key name ends up in logs, file names and error messages; an invisible
    character there would let two different keys look the same to a person.
    """
    defect = _spec_name_defect(name)
    if defect is None and not name.isprintable():
        defect = "contains a non-printable character"
    return defect


def _check_key_name(name: str, what: str) -> None:
    defect = _key_name_defect(name)
    if defect is not None:
        raise InvalidRequest(f"{what} name {defect}")


def _text_defect(text: str) -> str | None:
    """Why ``text`` may not appear in a signed note, or None."""
    for ch in text:
        if ch < " " and ch != "\n":
            return f"contains control character U+{ord(ch):04X}"
        # Lone surrogates are the only str content that is not valid UTF-8.
        if "\ud800" <= ch <= "\udfff":
            return "is not valid UTF-8"
    return None


class VerifierKey(msgspec.Struct, frozen=True, kw_only=True):
    """A trusted Ed25519 public key with its note name and key id."""

    name: str
    key_id: bytes
    public_key: bytes

    def __post_init__(self) -> None:
        # A key id that does not match the key would make signatures look up
        # the wrong key; refuse to build one rather than check at every use.
        _check_key_name(self.name, "vkey")
        if len(self.public_key) != _PUBLIC_KEY_SIZE:
            raise InvalidRequest(
                f"vkey ed25519 public key must be 32 bytes, got {len(self.public_key)}"
            )
        if self.key_id != key_id(self.name, self.public_key):
            raise InvalidRequest("vkey key id does not match its name and public key")

    @property
    def text(self) -> str:
        """The vkey line: ``name+<8 hex key id>+base64(0x01 || public key)``."""
        return format_vkey(self.name, self.public_key)

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        if len(signature) != _SIGNATURE_SIZE:
            return False
        try:
            VerifyKey(self.public_key).verify(message, signature)
        except (BadSignatureError, ValueError):
            return False
        return True


def format_vkey(name: str, public_key: bytes) -> str:
    """The vkey line for an Ed25519 public key."""
    _check_key_name(name, "vkey")
    if len(public_key) != _PUBLIC_KEY_SIZE:
        raise InvalidRequest(f"vkey ed25519 public key must be 32 bytes, got {len(public_key)}")
    key_data = b64encode(bytes([ALG_ED25519]) + public_key)
    return f"{name}+{key_id(name, public_key).hex()}+{key_data}"


def _parse_key_text(text: str, what: str) -> tuple[str, bytes, bytes]:
    """Split ``name+hex+base64`` into name, key id and the key bytes after 0x01.

    The base64 part may itself contain '+', so only the first two separate.
    """
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise InvalidRequest(f"{what} must be name+keyid+keydata")
    name, hex_id, key64 = parts
    _check_key_name(name, what)
    if not _HEX_KEY_ID.fullmatch(hex_id):
        raise InvalidRequest(f"{what} key id must be 8 lowercase hex digits")
    key_data = b64decode(key64)
    if key_data is None:
        raise InvalidRequest(f"{what} key data is not valid base64")
    if not key_data:
        raise InvalidRequest(f"{what} key data is empty")
    if key_data[0] != ALG_ED25519:
        raise InvalidRequest(f"{what} algorithm 0x{key_data[0]:02x} is not ed25519 (0x01)")
    if len(key_data) != 1 + _PUBLIC_KEY_SIZE:
        raise InvalidRequest(f"{what} ed25519 key must be 32 bytes, got {len(key_data) - 1}")
    return name, bytes.fromhex(hex_id), key_data[1:]


def parse_vkey(text: str) -> VerifierKey:
    """Parse a vkey line strictly; surrounding whitespace is ignored."""
    name, kid, public_key = _parse_key_text(text.strip(), "vkey")
    if kid != key_id(name, public_key):
        raise InvalidRequest("vkey key id does not match its name and public key")
    return VerifierKey(name=name, key_id=kid, public_key=public_key)


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class NoteSigner:
    """An Ed25519 note signing key with its name and key id.

    repr, str and hash never involve the seed; equality compares public parts.
    """

    name: str
    key_id: bytes
    signing_key: SigningKey

    def __post_init__(self) -> None:
        _check_key_name(self.name, "signer")
        public_key = bytes(self.signing_key.verify_key)
        if self.key_id != key_id(self.name, public_key):
            raise InvalidRequest("signer key id does not match its name and key")

    @classmethod
    def generate(cls, name: str) -> NoteSigner:
        """A fresh random key."""
        return cls._from_signing_key(name, SigningKey.generate())

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> NoteSigner:
        """The key for a 32-byte Ed25519 seed (RFC 8032 private key)."""
        if len(seed) != _SEED_SIZE:
            raise InvalidRequest(f"signer seed must be 32 bytes, got {len(seed)}")
        return cls._from_signing_key(name, SigningKey(seed))

    @classmethod
    def _from_signing_key(cls, name: str, signing_key: SigningKey) -> NoteSigner:
        _check_key_name(name, "signer")
        kid = key_id(name, bytes(signing_key.verify_key))
        return cls(name=name, key_id=kid, signing_key=signing_key)

    @property
    def verifier(self) -> VerifierKey:
        """The public key that checks this signer's notes."""
        public_key = bytes(self.signing_key.verify_key)
        return VerifierKey(name=self.name, key_id=self.key_id, public_key=public_key)

    @property
    def seed(self) -> bytes:
        """The 32-byte Ed25519 seed; secret, written only to the key file."""
        return bytes(self.signing_key)

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return self.signing_key.sign(message).signature

    def __repr__(self) -> str:
        return f"NoteSigner(name={self.name!r}, key_id={self.key_id.hex()!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NoteSigner):
            return NotImplemented
        return self.verifier == other.verifier

    def __hash__(self) -> int:
        return hash((self.name, self.key_id))


def format_skey(signer: NoteSigner) -> str:
    """Go's private key text: ``PRIVATE+KEY+name+<8 hex key id>+base64(0x01 || seed)``."""
    key_data = b64encode(bytes([ALG_ED25519]) + signer.seed)
    return f"{_SKEY_PREFIX}{signer.name}+{signer.key_id.hex()}+{key_data}"


def parse_skey(text: str) -> NoteSigner:
    """Parse Go's private key text strictly; messages never quote the key."""
    text = text.strip()
    if not text.startswith(_SKEY_PREFIX):
        raise InvalidRequest("skey must start with PRIVATE+KEY+")
    name, kid, seed = _parse_key_text(text[len(_SKEY_PREFIX) :], "skey")
    signer = NoteSigner.from_seed(name, seed)
    # The id names the public key, which only exists once the seed is expanded.
    if kid != signer.key_id:
        raise InvalidRequest("skey key id does not match its name and key")
    return signer


class NoteSignature(msgspec.Struct, frozen=True, kw_only=True):
    """One signature line of a note, not yet checked against any key."""

    name: str
    key_id: bytes
    signature: bytes


class Note(msgspec.Struct, frozen=True, kw_only=True):
    """An opened note: its text, the known keys that signed it, and other signers."""

    text: str
    verified: tuple[VerifierKey, ...]
    unverified: tuple[tuple[str, bytes], ...]


def sign_note(text: str, signers: Sequence[NoteSigner]) -> str:
    """``text`` followed by a blank line and one signature line per signer."""
    if not text.endswith("\n"):
        raise InvalidRequest("note text must end with a newline")
    defect = _text_defect(text)
    if defect is not None:
        raise InvalidRequest(f"note text {defect}")
    if not signers:
        raise InvalidRequest("a note needs at least one signer")
    if len(signers) > MAX_SIGNATURES:
        raise InvalidRequest(f"a note may carry at most {MAX_SIGNATURES} signatures")
    # open_note rejects two signatures by one key, so never write them.
    ids = {(s.name, s.key_id) for s in signers}
    if len(ids) != len(signers):
        raise InvalidRequest("a note cannot be signed twice by the same key")
    message = text.encode("utf-8")
    lines = [
        f"{_EM_DASH_PREFIX}{s.name} {b64encode(s.key_id + s.sign(message))}\n" for s in signers
    ]
    return text + "\n" + "".join(lines)


def split_note(note: str | bytes) -> tuple[str, tuple[NoteSignature, ...]]:
    """Parse a signed note's syntax without checking any signature.

    Raises InvalidRequest naming the defect. The text MUST NOT be trusted
    until :func:`open_note` has verified it.
    """
    if isinstance(note, bytes):
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest("note is not valid UTF-8") from None
    defect = _text_defect(note)
    if defect is not None:
        raise InvalidRequest(f"note {defect}")
    # The text may hold blank lines of its own; the last one starts the signatures.
    split = note.rfind("\n\n")
    if split < 0:
        raise InvalidRequest("note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block or not block.endswith("\n"):
        raise InvalidRequest("note signature block must be non-empty and end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise InvalidRequest(f"note has more than {MAX_SIGNATURES} signatures")
    signatures: list[NoteSignature] = []
    for number, line in enumerate(lines, start=1):
        if not line.startswith(_EM_DASH_PREFIX):
            raise InvalidRequest(f"note signature line {number} does not start with an em dash")
        name, _, sig64 = line[len(_EM_DASH_PREFIX) :].partition(" ")
        name_defect = _spec_name_defect(name)
        if name_defect is not None:
            raise InvalidRequest(f"note signature line {number}: key name {name_defect}")
        raw = b64decode(sig64)
        # Go's minimum: a 4-byte key id and at least one signature byte.
        if raw is None or len(raw) < 5:
            raise InvalidRequest(f"note signature line {number}: bad base64 signature")
        signatures.append(NoteSignature(name=name, key_id=raw[:4], signature=raw[4:]))
    return text, tuple(signatures)


def open_note(note: str | bytes, known: Sequence[VerifierKey]) -> Note:
    """Parse ``note`` and verify it against the ``known`` keys.

    Signatures by unknown keys are ignored (listed in ``unverified``); a
    known key's bad or repeated signature, a note with no known signer, and
    any syntax defect raise VerificationError with step ``note``.
    """
    try:
        text, signatures = split_note(note)
    except InvalidRequest as exc:
        raise VerificationError(f"malformed note: {exc}", step="note") from None

    by_id: dict[tuple[str, bytes], VerifierKey] = {}
    ambiguous: set[tuple[str, bytes]] = set()
    for trusted in known:
        ident = (trusted.name, trusted.key_id)
        # Listing one key twice is harmless; two keys sharing a name and id
        # means the trust list is broken, so refuse to pick one (as Go does).
        if ident in by_id and by_id[ident] != trusted:
            ambiguous.add(ident)
        by_id.setdefault(ident, trusted)

    message = text.encode("utf-8")
    verified: list[VerifierKey] = []
    unverified: list[tuple[str, bytes]] = []
    for sig in signatures:
        ident = (sig.name, sig.key_id)
        label = f"{sig.name}+{sig.key_id.hex()}"
        key = by_id.get(ident)
        if key is None:
            if ident not in unverified:
                unverified.append(ident)
            continue
        if ident in ambiguous:
            raise VerificationError(f"ambiguous known key {label}", step="note")
        # Go skips a repeated signature by a known key without checking it; we
        # refuse, so no unchecked bytes ride along under a trusted name.
        if key in verified:
            raise VerificationError(f"duplicate signature by key {label}", step="note")
        if not key.verify(message, sig.signature):
            raise VerificationError(f"invalid signature for key {label}", step="note")
        verified.append(key)

    if not verified:
        raise VerificationError("note has no valid signature by a known key", step="note")
    return Note(text=text, verified=tuple(verified), unverified=tuple(unverified))
