"""A witness's data folder: its key, the logs it follows, what it cosigned, the evidence.

``DIR/witness.key`` holds the signing key in Go's ``PRIVATE+KEY+`` text form
(mode 0600); ``DIR/witness.db`` is one SQLite file with three tables:

* ``logs``: per origin, the log's vkeys (newline-separated), and the latest
  checkpoint the witness cosigned (size, root, the note it serves);
* ``evidence``: checkpoints validly signed by a followed log that conflict
  with what the witness cosigned (a fork, a rollback), each with the known
  checkpoint, kept once per distinct request;
* ``meta``: the format version.

Checking an add-checkpoint against the stored state and storing the new
state happen in one ``BEGIN IMMEDIATE`` transaction (see
:meth:`WitnessStore.transaction`), so two requests, or two witness processes
on one folder, can never roll the state back between them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec

from memseal.ledger.errors import InvalidRequest, KeyFileError, NotFound, StorageError
from memseal.ledger.note import NoteSigner, VerifierKey, format_skey, parse_skey, parse_vkey

__all__ = [
    "DATABASE",
    "KEY_FILE",
    "MAX_EVIDENCE",
    "Evidence",
    "FollowedLog",
    "WitnessStore",
    "create_witness_key",
    "load_witness_key",
]

KEY_FILE = "witness.key"
DATABASE = "witness.db"
_FORMAT = "memseal/witness@v1"

#: Evidence rows kept per log; the first ones are the ones that matter, later ones are dropped.
MAX_EVIDENCE = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS logs (
    origin TEXT PRIMARY KEY,
    vkeys TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    root BLOB,
    note TEXT,
    cosigned_at INTEGER
);
CREATE TABLE IF NOT EXISTS evidence (
    id INTEGER PRIMARY KEY,
    origin TEXT NOT NULL,
    at INTEGER NOT NULL,
    reason TEXT NOT NULL,
    known_size INTEGER NOT NULL,
    known_note TEXT,
    request TEXT NOT NULL,
    digest BLOB NOT NULL,
    UNIQUE (origin, digest)
);
"""


def create_witness_key(folder: Path, name: str) -> NoteSigner:
    """A new witness key in ``folder`` (made 0700 if missing); refuses to overwrite one."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / KEY_FILE
    signer = NoteSigner.generate(name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InvalidRequest(f"{path} already exists; a witness key is never overwritten") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(format_skey(signer) + "\n")
    return signer


def load_witness_key(folder: Path) -> NoteSigner:
    """The witness key of ``folder``."""
    path = folder / KEY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyFileError(f"{folder} has no {KEY_FILE} (run memseal witness init)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read {path}: {exc}") from exc
    try:
        return parse_skey(text)
    except InvalidRequest as exc:
        raise KeyFileError(f"{path} is not a witness key: {exc}") from None


class FollowedLog(msgspec.Struct, frozen=True, kw_only=True):
    """A log the witness follows, and the latest checkpoint it cosigned for it."""

    origin: str
    keys: tuple[VerifierKey, ...]
    size: int
    root: bytes | None
    note: str | None
    cosigned_at: int | None


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """A validly signed checkpoint that conflicts with what the witness cosigned."""

    id: int
    origin: str
    at: int
    reason: str
    known_size: int
    known_note: str | None
    request: str


def _followed(row: tuple[object, ...]) -> FollowedLog:
    origin, vkeys, size, root, note, at = row
    assert isinstance(origin, str) and isinstance(vkeys, str) and isinstance(size, int)
    return FollowedLog(
        origin=origin,
        keys=tuple(parse_vkey(v) for v in vkeys.split("\n") if v),
        size=size,
        root=root if isinstance(root, bytes) else None,
        note=note if isinstance(note, str) else None,
        cosigned_at=at if isinstance(at, int) else None,
    )


class WitnessStore:
    """The witness's SQLite file. Thread-safe: every use takes one lock."""

    def __init__(self, folder: Path, *, create: bool = False) -> None:
        path = folder / DATABASE
        if not create and not path.exists():
            raise NotFound(f"{folder} is not a witness folder (run memseal witness init)")
        try:
            if create:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
                os.close(fd)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('format', ?)", (_FORMAT,))
            elif row[0] != _FORMAT:
                raise StorageError(f"{path} is a {row[0]} file, not {_FORMAT}")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open {path}: {exc}") from exc
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before anything is read (``BEGIN IMMEDIATE``)."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(f"witness database: {exc}") from exc
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise StorageError(f"witness database: {exc}") from exc

    # -- logs ---------------------------------------------------------------------

    def follow(self, vkey: str, origin: str | None = None) -> FollowedLog:
        """Follow the log signed by ``vkey`` (its origin defaults to the key's name).

        A second key for a followed origin is added to it (a log's key rotation).
        """
        key = parse_vkey(vkey)
        origin = key.name if origin is None else origin
        if not origin or any(ch < " " for ch in origin):
            raise InvalidRequest("--origin must be one line of text")
        with self.transaction() as db:
            row = db.execute(
                "SELECT origin, vkeys, size, root, note, cosigned_at FROM logs WHERE origin = ?",
                (origin,),
            ).fetchone()
            if row is None:
                db.execute("INSERT INTO logs (origin, vkeys) VALUES (?, ?)", (origin, key.text))
            else:
                known = _followed(row)
                if key not in known.keys:
                    vkeys = "\n".join([*(k.text for k in known.keys), key.text])
                    db.execute("UPDATE logs SET vkeys = ? WHERE origin = ?", (vkeys, origin))
            row = db.execute(
                "SELECT origin, vkeys, size, root, note, cosigned_at FROM logs WHERE origin = ?",
                (origin,),
            ).fetchone()
        return _followed(row)

    def logs(self) -> list[FollowedLog]:
        """Every followed log, by origin."""
        with self._lock:
            rows = self._db.execute(
                "SELECT origin, vkeys, size, root, note, cosigned_at FROM logs ORDER BY origin"
            ).fetchall()
        return [_followed(r) for r in rows]

    def log(self, origin: str) -> FollowedLog | None:
        """The followed log of ``origin``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT origin, vkeys, size, root, note, cosigned_at FROM logs WHERE origin = ?",
                (origin,),
            ).fetchone()
        return None if row is None else _followed(row)

    def by_origin_hash(self, digest_hex: str) -> FollowedLog | None:
        """The followed log whose origin hashes (SHA-256, lowercase hex) to ``digest_hex``."""
        for log in self.logs():
            if hashlib.sha256(log.origin.encode("utf-8")).hexdigest() == digest_hex:
                return log
        return None

    # -- inside a transaction -------------------------------------------------------

    @staticmethod
    def read(db: sqlite3.Connection, origin: str) -> FollowedLog | None:
        """Within a transaction: the followed log of ``origin``, or None."""
        row = db.execute(
            "SELECT origin, vkeys, size, root, note, cosigned_at FROM logs WHERE origin = ?",
            (origin,),
        ).fetchone()
        return None if row is None else _followed(row)

    @staticmethod
    def advance(
        db: sqlite3.Connection, origin: str, size: int, root: bytes, note: str, at: int
    ) -> None:
        """Within a transaction: the newest cosigned checkpoint of ``origin``."""
        db.execute(
            "UPDATE logs SET size = ?, root = ?, note = ?, cosigned_at = ? WHERE origin = ?",
            (size, root, note, at, origin),
        )

    @staticmethod
    def keep_evidence(
        db: sqlite3.Connection, known: FollowedLog, reason: str, request: str, at: int
    ) -> None:
        """Within a transaction: keep a conflicting request beside the known checkpoint
        (once per distinct request, at most :data:`MAX_EVIDENCE` per log)."""
        (count,) = db.execute(
            "SELECT count(*) FROM evidence WHERE origin = ?", (known.origin,)
        ).fetchone()
        if count >= MAX_EVIDENCE:
            return
        digest = hashlib.sha256(request.encode("utf-8")).digest()
        db.execute(
            "INSERT OR IGNORE INTO evidence "
            "(origin, at, reason, known_size, known_note, request, digest) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (known.origin, at, reason, known.size, known.note, request, digest),
        )

    def evidence(self) -> list[Evidence]:
        """Every evidence row, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, origin, at, reason, known_size, known_note, request "
                "FROM evidence ORDER BY id"
            ).fetchall()
        return [
            Evidence(
                id=r[0],
                origin=r[1],
                at=r[2],
                reason=r[3],
                known_size=r[4],
                known_note=r[5],
                request=r[6],
            )
            for r in rows
        ]
