"""The command line: plain output and the exit codes of DESIGN.md's table."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memseal.cli import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memseal.cli", *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert main(["demo", "--data", str(data)]) == 0
    return data


def test_demo_appends_verifies_and_prints_the_head(tmp_path: Path) -> None:
    done = run("demo", "--data", str(tmp_path / "d"))
    assert done.returncode == 0, done.stderr
    assert "ok: 1 entries verified" in done.stdout
    again = run("demo", "--data", str(tmp_path / "d"))
    assert "ok: 2 entries verified" in again.stdout


def test_keys_show_prints_the_vkey_and_new_refuses_to_overwrite(folder: Path) -> None:
    shown = run("keys", "show", "--data", str(folder))
    assert shown.returncode == 0
    assert shown.stdout.strip() == (folder / "keys" / "ledger.vkey").read_text().strip()
    refused = run("keys", "new", "--data", str(folder))
    assert refused.returncode == 2
    assert "never overwrites" in refused.stderr


def test_keys_show_of_a_missing_folder_says_it_is_not_a_data_folder(tmp_path: Path) -> None:
    # As verify says, not "restore it from a backup": a mistyped --data lost no key.
    for argv in (
        ["keys", "show", "--data", str(tmp_path / "nothere")],
        ["verify", str(tmp_path / "nothere"), "--trust", "x+00000000+AA"],
    ):
        done = run(*argv)
        assert done.returncode == 2, done
        assert done.stderr.strip().endswith("is not a memseal data folder"), done.stderr
        assert "backup" not in done.stderr


def test_tokens_add_outside_a_data_folder_refuses_naming_data(tmp_path: Path) -> None:
    # Run where no server ever ran: no memseal-data/ made, no token the server would refuse.
    for where in (tmp_path, tmp_path / "empty"):
        where.mkdir(exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "memseal.cli", "tokens", "add", "--place", "team:a"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done
        assert done.stdout == "" and "--data" in done.stderr, done.stderr
        assert "not a memseal data folder" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["empty"]
    assert list((tmp_path / "empty").iterdir()) == []
    done = run("tokens", "add", "--data", str(tmp_path / "empty"), "--place", "team:a")
    assert done.returncode == 2 and list((tmp_path / "empty").iterdir()) == []


def test_tokens_add_in_a_data_folder_prints_a_token(folder: Path) -> None:
    done = run("tokens", "add", "--data", str(folder), "--place", "team:a")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ms_")


def test_keys_new_makes_a_key_in_an_empty_folder(tmp_path: Path) -> None:
    made = run("keys", "new", "--data", str(tmp_path / "fresh"), "--name", "audit-test")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("audit-test+")


def test_verify_exits_0_with_a_summary(folder: Path) -> None:
    vkey = (folder / "keys" / "ledger.vkey").read_text().strip()
    done = run("verify", str(folder), "--trust", vkey)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: 1 entries verified")
    by_file = run("verify", str(folder), "--trust", str(folder / "keys" / "ledger.vkey"))
    assert by_file.returncode == 0


def test_verify_needs_no_private_key(folder: Path, tmp_path: Path) -> None:
    vkey = (folder / "keys" / "ledger.vkey").read_text().strip()
    (folder / "keys" / "ledger.skey").unlink()
    done = run("verify", str(folder), "--trust", vkey)
    assert done.returncode == 0, done.stderr


def test_verify_exits_1_naming_the_seq_and_step(folder: Path) -> None:
    vkey = (folder / "keys" / "ledger.vkey").read_text().strip()
    with sqlite3.connect(folder / "ledger.db") as conn:
        conn.execute("UPDATE entries SET sig = zeroblob(64) WHERE seq = 0")
    done = run("verify", str(folder), "--trust", vkey)
    assert done.returncode == 1
    assert "seq 0: signature" in done.stderr


def test_verify_with_another_key_exits_1(folder: Path, tmp_path: Path) -> None:
    other = run("keys", "new", "--data", str(tmp_path / "other")).stdout.strip()
    done = run("verify", str(folder), "--trust", other)
    assert done.returncode == 1
    assert "unknown key" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "/nonexistent/memseal"],
        ["verify", "{folder}", "--trust", "not-a-vkey"],
        ["frobnicate"],
        ["keys", "show", "--data", "/nonexistent/memseal"],
    ],
)
def test_usage_and_io_errors_exit_2(folder: Path, args: list[str]) -> None:
    argv = [a.replace("{folder}", str(folder)) for a in args]
    if argv[0] == "verify" and "--trust" not in argv:
        argv += ["--trust", "x+00000000+AA"]
    done = run(*argv)
    assert done.returncode == 2, done
    assert done.stderr.strip()
    assert "Traceback" not in done.stderr


def test_checkpoint_and_prove_print_c2sp_text(folder: Path) -> None:
    from memseal.ledger.checkpoint import parse_tlog_proof
    from memseal.ledger.merkle import verify_consistency
    from memseal.ledger.note import parse_vkey
    from memseal.ledger.transparency import open_checkpoint

    assert main(["demo", "--data", str(folder)]) == 0  # two entries now
    vkey = parse_vkey((folder / "keys" / "ledger.vkey").read_text().strip())
    note = run("checkpoint", "--data", str(folder))
    assert note.returncode == 0, note.stderr
    assert open_checkpoint(note.stdout, [vkey]).size == 2
    proof = run("prove", "--data", str(folder), "--seq", "1")
    assert proof.returncode == 0, proof.stderr
    parsed = parse_tlog_proof(proof.stdout)
    assert parsed.index == 1 and parsed.checkpoint == note.stdout
    sized = run("prove", "--data", str(folder), "--seq", "0", "--size", "2")
    assert sized.returncode == 0, sized.stderr
    consistency = run("prove", "--data", str(folder), "--from", "1", "--to", "2")
    assert consistency.returncode == 0, consistency.stderr
    lines = consistency.stdout.splitlines()
    assert lines[0] == "memseal/consistency-proof@v1"
    import base64

    old_root = base64.b64decode(lines[1].split()[2])
    new_root = base64.b64decode(lines[2].split()[2])
    verify_consistency(1, 2, old_root, new_root, [base64.b64decode(x) for x in lines[3:]])


@pytest.mark.parametrize(
    "args",
    [
        ["prove"],
        ["prove", "--seq", "0", "--from", "1"],
        ["prove", "--to", "2"],
        ["prove", "--seq", "99"],
        ["prove", "--seq", "0", "--size", "1"],
    ],
)
def test_prove_usage_errors_exit_2(folder: Path, args: list[str]) -> None:
    done = run(*args, "--data", str(folder))
    assert done.returncode == 2
    assert done.stderr.strip() and "Traceback" not in done.stderr


def test_keys_rotate_then_verify_from_the_first_key(folder: Path) -> None:
    first = (folder / "keys" / "ledger.vkey").read_text().strip()
    rotated = run("keys", "rotate", "--data", str(folder))
    assert rotated.returncode == 0, rotated.stderr
    assert first in rotated.stdout
    assert main(["demo", "--data", str(folder)]) == 0
    assert run("verify", str(folder), "--trust", first).returncode == 0
    newer = (folder / "keys" / "ledger.vkey").read_text().strip()
    assert newer != first
    assert run("verify", str(folder), "--trust", newer).returncode == 1


def test_verify_against_a_kept_checkpoint_detects_truncation(folder: Path, tmp_path: Path) -> None:
    assert main(["demo", "--data", str(folder)]) == 0
    kept = tmp_path / "kept.note"
    kept.write_text(run("checkpoint", "--data", str(folder)).stdout)
    with sqlite3.connect(folder / "ledger.db") as conn:
        for table in ("checkpoints", "tree"):
            conn.execute(f"DELETE FROM {table}")
        conn.execute("DELETE FROM entries WHERE seq = 1")
        conn.execute("DELETE FROM payloads WHERE seq = 1")
        conn.execute("INSERT INTO tree SELECT 0, hash FROM entries WHERE seq = 0")
    vkey = (folder / "keys" / "ledger.vkey").read_text().strip()
    assert run("verify", str(folder), "--trust", vkey).returncode == 0
    done = run("verify", str(folder), "--trust", vkey, "--checkpoint", str(kept))
    assert done.returncode == 1
    assert "truncated" in done.stderr


@pytest.mark.parametrize(
    "verb",
    [
        ["checkpoint"],
        ["prove", "--seq", "0"],
        ["keys", "rotate"],
        ["rebuild"],
        ["export", "--run", "r", "-o", "out.bundle"],
        ["verify", "{folder}", "--trust", "x+00000000+AA"],
    ],
)
def test_every_verb_refuses_a_bad_store_naming_what_gave_it(
    folder: Path,
    verb: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # One resolver for every verb: the variable and the flag are each named when wrong.
    argv = [a.replace("{folder}", str(folder)) for a in verb]
    if argv[0] != "verify":
        argv += ["--data", str(folder)]
    monkeypatch.setenv("MEMSEAL_STORE", "mysql://db/mem")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "`MEMSEAL_STORE` must be a postgresql:// URL" in err, err
    if argv[0] != "verify":
        assert main([*argv, "--store", "not-a-url"]) == 2
        err = capsys.readouterr().err
        assert "`--store` must be a postgresql:// URL" in err, err
    assert len(err.strip().splitlines()) == 1


async def test_store_sqlite_opens_the_folders_own_file_whatever_memseal_store_says(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # How migrate opens its source without rewriting os.environ: an unreachable store
    # in the variable would fail the open if it were followed.
    import memseal
    from memseal.memory import FOLDER_STORE

    monkeypatch.setenv("MEMSEAL_STORE", "postgresql://ann:pw@127.0.0.1:1/mem")
    async with memseal.open(folder, store=FOLDER_STORE, embedder=None) as memory:
        assert memory.ledger.store.dialect == "sqlite"
        assert await memory.ledger.size() == 1
    with pytest.raises(memseal.StorageError, match="cannot reach the store"):
        await memseal.open(folder, embedder=None)
