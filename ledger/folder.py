"""The layout of a data folder, known in this one place.

A data folder holds the SQLite ledger (unless the log lives in PostgreSQL)
and, whichever store holds the log, the keys::

    ledger.db                 the SQLite log store
    keys/instance.secret      32 random bytes keying item ids and fingerprints
    keys/history              every verifier key this ledger has used

Callers ask a :class:`DataFolder` for a path instead of spelling file
names, so a change to the layout is made here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

__all__ = ["DATABASE", "DataFolder"]

DATABASE: Final = "ledger.db"
"""The SQLite ledger's file name inside a data folder."""


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
