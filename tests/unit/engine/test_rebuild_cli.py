"""``memseal rebuild --data DIR``: rebuilds, prints the state hash and whether it matches."""

from __future__ import annotations

import argparse
import asyncio
import shutil
from pathlib import Path

import pytest

from memseal.cli.engine import add_engine_verbs, open_engine
from memseal.engine import Document, Learning


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="memseal")
    add_engine_verbs(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    code: int = asyncio.run(args.run(args))
    return code


async def _fill(folder: Path) -> str:
    async with open_engine(folder, create=True) as engine:
        first = await engine.store(Learning(text="alpha"), namespace="team:acme")
        await engine.store(Document(title="t", text="beta"), namespace="team:acme")
        await engine.promote(first.id, actor="h", reason="r")
        await engine.forget(ids=[first.id])
        return await engine.state_hash()


def test_rebuild_prints_the_state_hash_and_that_it_equals_the_incremental_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "data"
    incremental = asyncio.run(_fill(folder))
    assert _run(["rebuild", "--data", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"state hash:  {incremental}" in out
    assert f"incremental: {incremental} (equal)" in out
    assert "rebuilt 1 items from 4 events (4 entries)" in out


def test_rebuild_says_when_the_projection_had_drifted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "data"
    asyncio.run(_fill(folder))
    import sqlite3

    with sqlite3.connect(folder / "ledger.db") as conn:
        conn.execute("UPDATE engine_items SET text = 'tampered'")
        conn.execute("UPDATE engine_meta SET value = '0' WHERE key = 'state_sum'")
    assert _run(["rebuild", "--data", str(folder)]) == 0
    assert "DIFFERENT" in capsys.readouterr().out
    assert _run(["rebuild", "--data", str(folder)]) == 0
    assert "(equal)" in capsys.readouterr().out


def test_rebuild_usage_and_io_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["rebuild", "--data", str(tmp_path / "nowhere")]) == 2
    assert "not a memseal data folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert _run(["rebuild", "--data", str(tmp_path / "empty")]) == 2
    folder = tmp_path / "data"
    asyncio.run(_fill(folder))
    shutil.rmtree(folder / "keys")
    assert _run(["rebuild", "--data", str(folder)]) == 2
    assert "keys" in capsys.readouterr().err


async def test_an_open_that_rebuilds_reports_its_progress(tmp_path: Path) -> None:
    import memseal

    folder = tmp_path / "data"
    expected = await _fill(folder)
    async with memseal.open(folder, embedder=None) as memory:
        size = await memory.ledger.size()
        # An older projection layout: the next open rebuilds from the log.
        await memory.ledger.store.run(
            lambda txn: txn.execute("DELETE FROM engine_meta WHERE key = 'projection'")
        )
    seen: list[tuple[int, int]] = []
    async with memseal.open(folder, embedder=None, progress=lambda *p: seen.append(p)) as memory:
        await asyncio.sleep(0)  # progress calls are scheduled on the loop
        assert await memory.engine.state_hash() == expected
    assert seen and seen[-1] == (size, size)
    assert all(done <= total == size for done, total in seen)
    with pytest.raises(memseal.InvalidRequest, match="`progress`"):
        await memseal.open(folder, embedder=None, progress=42)  # type: ignore[arg-type]
