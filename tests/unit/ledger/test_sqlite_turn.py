"""The SQLite writers' turn: a flock beside the database, waited for at most the busy timeout."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from memseal.ledger import sqlite as sqlite_store
from memseal.ledger.entry import make_draft
from memseal.ledger.errors import StorageError
from memseal.ledger.note import NoteSigner
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.store import WriteTxn

SIGNER = NoteSigner.from_seed("turn-test", bytes(range(32)))


def _append(txn: WriteTxn) -> int:
    return txn.append(make_draft("note", {"n": txn.size})).seq


async def test_a_turn_held_too_long_fails_the_write_and_nothing_is_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteLogStore(tmp_path / "ledger.db", SIGNER)
    await store.open()
    try:
        assert await store.run(_append) == 0
        monkeypatch.setattr(sqlite_store, "_BUSY_TIMEOUT_MS", 200)
        # Another process holding the turn and never letting go (stopped mid-write).
        holder = os.open(tmp_path / "ledger.db.writer", os.O_RDWR)
        fcntl.flock(holder, fcntl.LOCK_EX)
        try:
            with pytest.raises(StorageError, match="writer turn"):
                await store.run(_append)
        finally:
            os.close(holder)  # closing the file lets go of the lock
        assert (await store.head()).size == 1
        assert await store.run(_append) == 1  # the turn is free again
    finally:
        await store.close()
