"""The layout of a data folder, known in this one place.

A data folder holds the SQLite ledger (unless the log lives in PostgreSQL)
and, whichever store holds the log, the keys::

    ledger.db                 the SQLite log store
    ledger.location           where the folder's ledger lives, and its first entry
    keys/ledger.skey          the current signing key (private)
    keys/ledger.vkey          its public half
    keys/ledger.next.skey     the next key of a rotation under way
    keys/instance.secret      32 random bytes keying item ids and fingerprints
    keys/history              every verifier key this ledger has used

Callers ask a :class:`DataFolder` for a path instead of spelling file
names, so a change to the layout is made here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

__all__ = ["DATABASE", "LOCATION", "DataFolder"]

DATABASE: Final = "ledger.db"
"""The SQLite ledger's file name inside a data folder."""
LOCATION: Final = "ledger.location"
"""The file naming where the folder's ledger lives ("sqlite", or the store URL with its
password hidden) and its first entry, so the folder's key never signs two ledgers."""


class DataFolder(msgspec.Struct, frozen=True, kw_only=True):
    """A data folder and the paths of the files memseal keeps in it."""

    root: Path

    @property
    def database(self) -> Path:
        """The SQLite log store."""
        return self.root / DATABASE

    @property
    def keys(self) -> Path:
        """The folder of key files; it stays here even when the log is in PostgreSQL."""
        return self.root / "keys"

    @property
    def location(self) -> Path:
        """Where the folder's ledger lives (see :data:`LOCATION`)."""
        return self.root / LOCATION

    @property
    def signing_key(self) -> Path:
        """The current private signing key."""
        return self.keys / "ledger.skey"

    @property
    def public_key(self) -> Path:
        """The current signing key's public half."""
        return self.keys / "ledger.vkey"

    @property
    def public_key_swap(self) -> Path:
        """The new public key while a rotation swaps it in."""
        return self.keys / "ledger.vkey.tmp"

    @property
    def next_key(self) -> Path:
        """The next private key of a rotation begun and not yet finished."""
        return self.keys / "ledger.next.skey"

    @property
    def instance_secret(self) -> Path:
        """The secret keying item ids and fingerprints."""
        return self.keys / "instance.secret"

    @property
    def key_history(self) -> Path:
        """Every verifier key the ledger has used, oldest first."""
        return self.keys / "history"

    def has_database(self) -> bool:
        """Whether a SQLite ledger file exists here."""
        return self.database.is_file()
