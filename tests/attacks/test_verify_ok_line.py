"""``memseal verify`` says which checks ran: without ``--deep`` its ok line never covers
the projections.

The attacker edits the folder's SQLite file (no keys) and moves an item of one
tenant into another's namespace: every read of the other tenant would now serve
it. The log, the memo table and the other derived tables are untouched, so plain
``verify`` passes, and said a bare "ok" as though the memory were whole. Its ok
line now names what it checked and that the projections need ``--deep``, which
fails naming the moved item.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest

import memseal
from memseal.cli import main

A = "team:acme/agent:writer"
B = "team:beta/agent:reader"


def recorded(folder: Path) -> tuple[str, str]:
    """A folder where each tenant stored a memory; A's item id and the trusted vkey."""

    async def make() -> tuple[str, str]:
        async with memseal.open(
            folder, store="sqlite", embedder=None, checkpoint_interval=None
        ) as memory:
            moved = await memory.engine.store(
                {"learning": {"text": "acme's deploy key"}}, namespace=A
            )
            await memory.engine.store({"learning": {"text": "beta's lunch menu"}}, namespace=B)
            return moved.id, memory.vkey

    return asyncio.run(make())


def verify(
    folder: Path, vkey: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["verify", str(folder), "--trust", vkey, *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    monkeypatch.delenv("MEMSEAL_STORE", raising=False)
    folder = tmp_path / "data"
    item, vkey = recorded(folder)
    with contextlib.closing(sqlite3.connect(folder / "ledger.db", isolation_level=None)) as db:
        changed = db.execute("UPDATE engine_items SET namespace = ? WHERE id = ?", (B, item))
        assert changed.rowcount == 1
    return folder, item, vkey


def test_plain_verify_after_a_namespace_move_does_not_claim_the_projections(
    moved: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _, vkey = moved
    code, out, err = verify(folder, vkey, capsys)
    assert code == 0, err
    (line,) = out.splitlines()
    assert line.startswith("ok: 2 entries verified"), line
    checked, _, unchecked = line.partition("not checked:")
    assert "projections" not in checked, line
    assert "projections" in unchecked and "--deep" in unchecked, line


def test_verify_deep_after_a_namespace_move_fails_naming_the_item(
    moved: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, item, vkey = moved
    code, out, err = verify(folder, vkey, capsys, "--deep")
    assert code == 1, (out, err)
    assert item in err and "FAILED" in err, err
    assert "ok:" not in out, out  # no line claims the projections were checked


def test_verify_deep_of_a_whole_folder_says_the_projections_were_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMSEAL_STORE", raising=False)
    folder = tmp_path / "data"
    _, vkey = recorded(folder)
    code, out, err = verify(folder, vkey, capsys, "--deep")
    assert code == 0, err
    line = out.splitlines()[0]
    assert "projections" in line and "not checked" not in line, line
    assert "projections: 2 items match" in out, out
