"""A run's memo hits reach ``memo_hits`` even when its closing write fails once."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.ledger.errors import StorageError
from memseal.replay.runs import _lease, memo
from memseal.tools import ToolScope

SCOPE = ToolScope.placed_at("team:hits/agent:a")
CALL = ("memory_list", {"limit": 5})


def _hits(folder: Path) -> list[tuple[str, int, int]]:
    with sqlite3.connect(folder / "ledger.db") as db:
        return db.execute("SELECT run_id, step, hits FROM memo_hits").fetchall()


async def test_hits_survive_a_failed_closing_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = memseal.open(tmp_path, embedder=None, checkpoint_interval=None)
    async with opened as memory:
        async with memory.run("r1", SCOPE, mode="record") as run:
            await run.call(*CALL)
        # The disk stays full for the whole closing write: a writer group that fails is
        # run again call by call, so a fault that cleared after one try would not surface.
        full = [True]
        real = memo.release

        def release(*args: Any) -> None:
            if full[0]:
                raise StorageError("disk full while letting go of the lease")
            real(*args)

        monkeypatch.setattr(_lease, "release", release)
        with pytest.raises(StorageError, match="disk full"):
            async with memory.run("r1", SCOPE, mode="strict") as run:
                await run.call(*CALL)
        full[0] = False
    # The lease write rolled back with the hits beside it; the hits alone were written again.
    assert _hits(tmp_path) == [("r1", 0, 1)]
