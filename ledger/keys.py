"""Key material of one data folder: the ledger signing key and the instance secret.

Layout under the data folder::

    keys/               mode 0700
      ledger.skey       mode 0600  the Ed25519 signing key, Go note private-key text
      ledger.vkey       mode 0644  the public key as a C2SP vkey line (safe to publish)
      instance.secret   mode 0600  32 random bytes keying item ids and fingerprints
      history           mode 0644  every vkey this ledger has used, oldest first

The data folder itself is 0700 (:func:`secure_folder` tightens one made wider,
and the key folder and private files with it).

Keys are made on first use only. Once a folder has any key file, or a
ledger with entries, a missing or malformed file is a :class:`KeyFileError`,
never a reason to make a new key: a silently new key would orphan every
signature already made. The private key and the secret are never printed,
logged or returned by any public API; :class:`Keys` keeps them out of its repr.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from ._files import tighten, tighten_folder
from .errors import InvalidRequest, KeyFileError
from .folder import DataFolder
from .note import NoteSigner, VerifierKey, format_skey, parse_skey, parse_vkey

__all__ = [
    "SECRET_SIZE",
    "Keys",
    "begin_rotation",
    "complete_rotation",
    "create_keys",
    "discard_rotation",
    "key_files_exist",
    "key_history",
    "load_keys",
    "pending_rotation",
    "secure_folder",
    "signers_on_disk",
]

SECRET_SIZE = 32


class Keys:
    """The loaded key material; its repr names the public key only."""

    __slots__ = ("_secret", "_signer")

    def __init__(self, signer: NoteSigner, secret: bytes) -> None:
        self._signer = signer
        self._secret = secret

    @property
    def signer(self) -> NoteSigner:
        """The instance's current signing key."""
        return self._signer

    @property
    def secret(self) -> bytes:
        """The instance secret, for keyed hashes in the layers above (never shown)."""
        return self._secret

    @property
    def verifier(self) -> VerifierKey:
        """The public half of the signing key, as a signed-note verifier."""
        return self._signer.verifier

    @property
    def vkey(self) -> str:
        """The verifier key in its text form (``name+keyid+base64``), the trust root to share."""
        return self._signer.verifier.text

    @property
    def key_id(self) -> str:
        """The signer's C2SP key id as 8 hex digits, as entries carry it."""
        return self._signer.key_id.hex()

    def __repr__(self) -> str:
        return f"Keys(vkey={self.vkey!r})"


def key_files_exist(folder: Path) -> bool:
    """Whether any key file is in ``folder``: a half-written key set is not a new one."""
    d = DataFolder(root=folder)
    return any(path.exists() for path in (d.signing_key, d.public_key, d.instance_secret))


def secure_folder(folder: Path) -> None:
    """Tighten a data folder open to group or others to 0700, with ``keys/`` and its secrets.

    Raises :class:`~.errors.StorageError` where that is not this process's to do (a
    shared sticky folder such as ``/tmp``, a folder of another user): nothing is
    made in a data folder others may read.
    """
    tighten_folder(folder)
    d = DataFolder(root=folder)
    tighten(d.keys, 0o700)
    for path in (d.signing_key, d.instance_secret, d.next_key):
        tighten(path)


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
    d = DataFolder(root=folder)
    if key_files_exist(folder):
        raise KeyFileError(f"{d.keys} already holds key files; memseal never overwrites a key")
    try:
        signer = NoteSigner.generate(name)
    except InvalidRequest as exc:
        raise InvalidRequest(f"key name: {exc}") from exc
    secret = secrets.token_bytes(SECRET_SIZE)
    secure_folder(folder)
    try:
        d.keys.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_new(d.instance_secret, secret, 0o600)
        _write_new(d.signing_key, (format_skey(signer) + "\n").encode(), 0o600)
        _write_new(d.public_key, (signer.verifier.text + "\n").encode(), 0o644)
        _write_new(d.key_history, (signer.verifier.text + "\n").encode(), 0o644)
    except OSError as exc:
        raise KeyFileError(f"cannot create key files in {d.keys}: {exc.strerror}") from exc
    return Keys(signer, secret)


def key_history(folder: Path) -> list[VerifierKey]:
    """Every key the ledger has used, oldest first (the first is its root of trust)."""
    path = DataFolder(root=folder).key_history
    text = _read(path, "key history").decode("utf-8", errors="replace")
    try:
        return [parse_vkey(line.strip()) for line in text.splitlines() if line.strip()]
    except InvalidRequest as exc:
        raise KeyFileError(f"key history {path} is malformed: {exc}") from exc


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
    d = DataFolder(root=folder)
    skey_path, vkey_path, secret_path = d.signing_key, d.public_key, d.instance_secret
    skey_bytes = _read(skey_path, "signing key")
    try:
        signer = parse_skey(skey_bytes.decode("utf-8").strip())
    except (UnicodeDecodeError, InvalidRequest):
        # No chained cause: the parse error could quote the private key into a log.
        raise KeyFileError(f"signing key {skey_path} is malformed") from None
    tmp = d.public_key_swap
    if tmp.exists():
        # A rotation stopped between swapping the private key and its public half.
        with contextlib.suppress(UnicodeDecodeError, InvalidRequest, OSError):
            if parse_vkey(tmp.read_text("utf-8").strip()) == signer.verifier:
                os.replace(tmp, vkey_path)
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


# Rotation is crash safe in three steps: (1) the new key is written beside the old one
# as ledger.next.skey; (2) the key_rotated entry is committed, signed by the old key;
# (3) the old key moves to keys/retired/ and the new one takes its place. An open that
# finds a ledger.next.skey finishes step 3 if the ledger holds step 2, else discards it.


def begin_rotation(folder: Path, name: str) -> NoteSigner:
    """Step 1: make the next key and store it beside the current one."""
    path = DataFolder(root=folder).next_key
    if path.exists():
        raise KeyFileError(f"{path} exists: a rotation is pending; open the data folder first")
    signer = NoteSigner.generate(name)
    try:
        _write_new(path, (format_skey(signer) + "\n").encode(), 0o600)
    except OSError as exc:
        raise KeyFileError(f"cannot write {path}: {exc.strerror}") from exc
    return signer


def pending_rotation(folder: Path) -> NoteSigner | None:
    """The next key of a rotation begun but not finished, or None."""
    path = DataFolder(root=folder).next_key
    if not path.exists():
        return None
    try:
        return parse_skey(_read(path, "next signing key").decode("utf-8").strip())
    except (UnicodeDecodeError, InvalidRequest):
        raise KeyFileError(f"next signing key {path} is malformed") from None


def signers_on_disk(folder: Path) -> list[NoteSigner]:
    """The signing keys the folder holds now: the pending next key, then the current one.

    For a process that finds the ledger signed over to a new key by another process.
    In that order, a rotation finishing at the same moment cannot hide the new key:
    step 3 moves the next key onto the current one, so a reader that misses it in the
    first file finds it in the second. Each file is parsed alone, not checked against
    ``ledger.vkey`` as :func:`load_keys` does: between step 3's two renames the pair
    does not match, and the key id the caller looks for is what identifies the key.
    """
    d = DataFolder(root=folder)
    found: list[NoteSigner] = []
    for path in (d.next_key, d.signing_key):
        try:
            text = path.read_bytes().decode("utf-8").strip()
            found.append(parse_skey(text))
        except (OSError, UnicodeDecodeError, InvalidRequest):
            continue
    return found


def _move(source: Path, target: Path) -> None:
    os.replace(source, target)


def discard_rotation(folder: Path) -> None:
    """Drop the next key of an unfinished rotation (the log never named it)."""
    DataFolder(root=folder).next_key.unlink(missing_ok=True)


def complete_rotation(folder: Path, old: Keys, new: NoteSigner) -> Keys:
    """Step 3: the new key becomes the folder's key; the old private key is deleted.

    Its public half stays in ``history``: verifiers start from the oldest key there
    and follow the ``key_rotated`` entries.
    """
    d = DataFolder(root=folder)
    try:
        history = key_history(folder)
        if new.verifier not in history:
            with d.key_history.open("a", encoding="utf-8") as f:
                f.write(new.verifier.text + "\n")
                f.flush()
                os.fsync(f.fileno())
        tmp = d.public_key_swap
        tmp.unlink(missing_ok=True)
        _write_new(tmp, (new.verifier.text + "\n").encode(), 0o644)
        _move(d.next_key, d.signing_key)
        _move(tmp, d.public_key)
    except OSError as exc:
        raise KeyFileError(f"cannot complete the key rotation in {d.keys}: {exc.strerror}") from exc
    return Keys(new, old.secret)
