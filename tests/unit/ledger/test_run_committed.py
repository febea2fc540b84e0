"""``run_committed``: a write's in-process follow-up runs once it committed, never before."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memseal.ledger.entry import make_draft
from memseal.ledger.errors import StorageError
from memseal.ledger.note import NoteSigner
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.store import WriteTxn, run_committed

SIGNER = NoteSigner.from_seed("committed-test", bytes(range(32)))


def _append(txn: WriteTxn) -> int:
    return txn.append(make_draft("note", {"n": txn.size})).seq


def _fail(txn: WriteTxn) -> int:
    txn.append(make_draft("note", {"n": txn.size}))
    raise StorageError("the command gave up")


async def test_a_failing_follow_up_is_logged_and_the_committed_answer_stands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteLogStore(tmp_path / "ledger.db", SIGNER)
    await store.open()
    try:

        def follow_up() -> None:
            raise RuntimeError("the vectors could not be let go")

        with caplog.at_level(logging.ERROR, logger="memseal.ledger"):
            assert await run_committed(store.run, _append, follow_up) == 0
        assert (await store.head()).size == 1
        [record] = [r for r in caplog.records if r.name == "memseal.ledger"]
        assert "follow-up of a committed write failed" in record.getMessage()
        assert record.exc_info is not None and "vectors" in str(record.exc_info[1])
    finally:
        await store.close()


async def test_a_failed_command_runs_no_follow_up(tmp_path: Path) -> None:
    store = SqliteLogStore(tmp_path / "ledger.db", SIGNER)
    await store.open()
    try:
        ran: list[str] = []
        with pytest.raises(StorageError, match="gave up"):
            await run_committed(store.run, _fail, lambda: ran.append("follow-up"))
        assert ran == [] and (await store.head()).size == 0
        assert await run_committed(store.run, _append, lambda: ran.append("follow-up")) == 0
        assert ran == ["follow-up"]
    finally:
        await store.close()
