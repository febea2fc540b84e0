"""Key material of one data folder: the ledger signing key and the instance secret.

Layout under the data folder::

    keys/               mode 0700
      ledger.skey       mode 0600  the Ed25519 signing key, Go note private-key text
      ledger.vkey       mode 0644  the public key as a C2SP vkey line (safe to publish)
      instance.secret   mode 0600  32 random bytes keying item ids and fingerprints

Keys are made on first use only. Once a folder has any key file, or a
ledger with entries, a missing or malformed file is a :class:`KeyFileError`,
never a reason to make a new key: a silently new key would orphan every
signature already made. The private key and the secret are never printed,
logged or returned by any public API; :class:`Keys` keeps them out of its repr.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .errors import InvalidRequest, KeyFileError
from .note import NoteSigner, VerifierKey, format_skey, parse_skey, parse_vkey

__all__ = ["SECRET_SIZE", "Keys", "create_keys", "key_files_exist", "load_keys"]

SECRET_SIZE = 32
_SKEY = "ledger.skey"
_VKEY = "ledger.vkey"
_SECRET = "instance.secret"


class Keys:
    """The loaded key material; its repr names the public key only."""

    __slots__ = ("_secret", "_signer")

    def __init__(self, signer: NoteSigner, secret: bytes) -> None:
        self._signer = signer
        self._secret = secret

    @property
    def signer(self) -> NoteSigner:
        return self._signer

    @property
    def secret(self) -> bytes:
        """The instance secret, for keyed hashes in the layers above (never shown)."""
        return self._secret

    @property
    def verifier(self) -> VerifierKey:
        return self._signer.verifier

    @property
    def vkey(self) -> str:
        return self._signer.verifier.text

    @property
    def key_id(self) -> str:
        """The signer's C2SP key id as 8 hex digits, as entries carry it."""
        return self._signer.key_id.hex()

    def __repr__(self) -> str:
        return f"Keys(vkey={self.vkey!r})"


def _dir(folder: Path) -> Path:
    return folder / "keys"


def key_files_exist(folder: Path) -> bool:
    d = _dir(folder)
    return any((d / name).exists() for name in (_SKEY, _VKEY, _SECRET))


def _write_new(path: Path, data: bytes, mode: int) -> None:
    # O_EXCL: two processes racing to create keys must not overwrite each other.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def create_keys(folder: Path, name: str) -> Keys:
    """Make a new signing key and instance secret; refuse if any key file exists."""
    d = _dir(folder)
    if key_files_exist(folder):
        raise KeyFileError(f"{d} already holds key files; memseal never overwrites a key")
    try:
        signer = NoteSigner.generate(name)
    except InvalidRequest as exc:
        raise InvalidRequest(f"key name: {exc}") from exc
    secret = secrets.token_bytes(SECRET_SIZE)
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_new(d / _SECRET, secret, 0o600)
        _write_new(d / _SKEY, (format_skey(signer) + "\n").encode(), 0o600)
        _write_new(d / _VKEY, (signer.verifier.text + "\n").encode(), 0o644)
    except OSError as exc:
        raise KeyFileError(f"cannot create key files in {d}: {exc.strerror}") from exc
    return Keys(signer, secret)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise KeyFileError(
            f"{what} {path} is missing; restore it from a backup "
            "(memseal never makes a new key for an existing ledger)"
        ) from exc
    except OSError as exc:
        raise KeyFileError(f"{what} {path} is unreadable: {exc.strerror}") from exc


def load_keys(folder: Path) -> Keys:
    """Load the folder's keys; any missing, unreadable or malformed file is a KeyFileError."""
    d = _dir(folder)
    skey_path, vkey_path, secret_path = d / _SKEY, d / _VKEY, d / _SECRET
    skey_bytes = _read(skey_path, "signing key")
    try:
        signer = parse_skey(skey_bytes.decode("utf-8").strip())
    except (UnicodeDecodeError, InvalidRequest):
        # No chained cause: the parse error could quote the private key into a log.
        raise KeyFileError(f"signing key {skey_path} is malformed") from None
    vkey_bytes = _read(vkey_path, "public key")
    try:
        verifier = parse_vkey(vkey_bytes.decode("utf-8").strip())
    except (UnicodeDecodeError, InvalidRequest) as exc:
        raise KeyFileError(f"public key {vkey_path} is malformed: {exc}") from exc
    if verifier != signer.verifier:
        raise KeyFileError(f"public key {vkey_path} does not match signing key {skey_path}")
    secret = _read(secret_path, "instance secret")
    if len(secret) != SECRET_SIZE:
        raise KeyFileError(
            f"instance secret {secret_path} is {len(secret)} bytes; it must be {SECRET_SIZE}"
        )
    return Keys(signer, secret)
