"""A damaged ledger.db makes every CLI verb exit 1 or 2 with one line, never a traceback.

The damage: a byte of the schema (sqlite_master's SQL text) flipped, which
makes SQLite quote bytes that are not UTF-8 in its error message (the
driver then raised UnicodeDecodeError, a traceback from `memseal verify`
and `memseal replay`); a header byte; the file cut short; a file that is
not a database at all; and byte flips sampled across the whole file.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import memseal
from memseal.cli import main

BIN = Path(sys.executable).parent
SCOPE = memseal.ToolScope.placed_at("team:corrupt/agent:a")


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A data folder with a recorded run (its WAL folded into the file), its bundle, its key."""
    root = tmp_path_factory.mktemp("corrupt")
    folder = root / "data"

    async def fill() -> str:
        async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
            run = memory.run("r1", SCOPE, mode="record")
            for text in ("dark mode", "tabs over spaces", "ship on fridays"):
                await run.call("memory_store", {"learning": {"text": text}})
            await run.call("memory_fetch", {"query": "mode", "mode": "exact"})
            await run.close()
            return memory.trust_root

    trust = asyncio.run(fill())
    bundle = root / "r1.bundle"
    assert main(["export", "--data", str(folder), "--run", "r1", "-o", str(bundle)]) == 0
    conn = sqlite3.connect(folder / "ledger.db")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    for extra in ("ledger.db-wal", "ledger.db-shm"):
        (folder / extra).unlink(missing_ok=True)
    return folder, bundle, trust


def _damaged(sound: tuple[Path, Path, str], where: Path, damage: Callable[[Path], None]) -> Path:
    folder = where / "data"
    shutil.copytree(sound[0], folder)
    damage(folder / "ledger.db")
    return folder


def _flip(*positions: int) -> Callable[[Path], None]:
    def damage(db: Path) -> None:
        data = bytearray(db.read_bytes())
        for p in positions:
            data[p] ^= 0xFF
        db.write_bytes(bytes(data))

    return damage


def _verbs(folder: Path, bundle: Path, trust: str, out: Path) -> list[list[str]]:
    d = str(folder)
    return [
        ["verify", d, "--trust", trust],
        ["replay", str(bundle), "--against", d],
        ["checkpoint", "--data", d],
        ["prove", "--data", d, "--seq", "1"],
        ["prove", "--data", d, "--from", "1", "--to", "2"],
        ["rebuild", "--data", d],
        ["export", "--data", d, "--run", "r1", "-o", str(out)],
        ["keys", "rotate", "--data", d],
        ["demo", "--data", d],
    ]


def _run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)  # an exception escaping here is the traceback a user would see
    err = capsys.readouterr().err
    assert "Traceback" not in err, (argv, err)
    lines = [line for line in err.splitlines() if line.strip()]
    if code != 0:
        assert len(lines) == 1, (argv, err)
    return code, err


def _schema_positions(db: Path) -> list[int]:
    """Every byte of sqlite_master's SQL text (the schema) in the file."""
    data = db.read_bytes()
    positions: list[int] = []
    start = data.find(b"CREATE ")
    while start != -1:
        end = data.find(b")", start)
        positions.extend(range(start, end))
        start = data.find(b"CREATE ", end)
    return positions


def test_a_flipped_schema_byte_gives_one_line_and_exit_2_from_every_verb(
    sound: tuple[Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    positions = _schema_positions(sound[0] / "ledger.db")
    assert len(positions) > 500
    chosen = random.Random(13).sample(positions, 24)
    failed = 0
    for i, position in enumerate(chosen):
        folder = _damaged(sound, tmp_path / str(i), _flip(position))
        for argv in _verbs(folder, sound[1], sound[2], tmp_path / f"{i}.bundle")[:7]:
            code, _ = _run_in_process(argv, capsys)
            assert code in (0, 1, 2, 3), argv
            failed += code != 0
    assert failed  # the sample did hit the schema


@pytest.mark.parametrize(
    "damage",
    ["page size byte", "cut short", "not a database", "schema text not utf-8"],
)
def test_a_damaged_ledger_file_fails_every_verb_with_one_line(
    sound: tuple[Path, Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: str,
) -> None:
    db = sound[0] / "ledger.db"
    size = db.stat().st_size
    schema = _schema_positions(db)

    def harm(path: Path) -> None:
        if damage == "page size byte":
            _flip(16)(path)
        elif damage == "cut short":
            with path.open("r+b") as f:
                f.truncate(size // 3)
        elif damage == "not a database":
            path.write_bytes(b"this is not a database, only text that a user saved there\n" * 40)
        else:
            # Each statement's first word, broken with bytes that are not UTF-8.
            data = bytearray(path.read_bytes())
            for p in schema:
                if data[p : p + 6] == b"CREATE":
                    data[p + 1] = 0xFF
            path.write_bytes(bytes(data))

    folder = _damaged(sound, tmp_path, harm)
    for argv in _verbs(folder, sound[1], sound[2], tmp_path / "out.bundle"):
        code, err = _run_in_process(argv, capsys)
        assert code in (1, 2), (argv, err)
        assert err.startswith("memseal ") or err.startswith("FAILED"), err
    # The real processes too. `memseal serve` also says the admin token it printed is
    # withdrawn (and uvicorn that its start-up failed): no traceback either way.
    for argv in (
        ["verify", str(folder), "--trust", sound[2]],
        ["serve", "--data", str(folder), "--port", "0", "--embedder", "none"],
    ):
        done = subprocess.run(
            [str(BIN / "memseal"), *argv], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, (argv, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        ours = [line for line in done.stderr.splitlines() if line.startswith(f"memseal {argv[0]}")]
        assert ours and "ledger" in ours[0], done.stderr
        if argv[0] == "verify":
            assert done.stderr.strip() == ours[0]


def test_byte_flips_across_the_file_never_give_a_traceback(
    sound: tuple[Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = (sound[0] / "ledger.db").stat().st_size
    for i, position in enumerate(random.Random(6).sample(range(size), 16)):
        folder = _damaged(sound, tmp_path / str(i), _flip(position))
        for argv in _verbs(folder, sound[1], sound[2], tmp_path / f"{i}.bundle")[:7]:
            code, _ = _run_in_process(argv, capsys)
            assert code in (0, 1, 2, 3), argv
