"""A ``keys/history`` that no longer matches the signed chain of keys is refused, plainly.

The attack (or the accident): the history file cut to its first line, or a key in it
replaced, after two rotations. Before, nothing warned: exports listed too few keys,
``keys rotate`` appended to the broken file, and a resumed step answered a 500 that
did not mention keys. Now every open for writing (serve, export, keys rotate, mcp,
Python) refuses, names the file and the chain it should hold, and changes nothing.
And ``--trust`` given a file of several keys says so instead of "not valid base64".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import memseal
from memseal.cli import main
from memseal.ledger.errors import KeyFileError
from memseal.ledger.note import NoteSigner

STEPS = [("memory_store", {"learning": {"text": "recorded before the rotations"}})]


async def _rotated_twice(folder: Path, store_url: str | None) -> list[str]:
    scope = memseal.ToolScope.placed_at("team:keys/agent:x")
    async with memseal.open(folder, store=store_url, embedder=None) as memory:
        async with memory.run("r1", scope) as run:
            for name, arguments in STEPS:
                await run.call(name, arguments)
        await memory.rotate_key()
        await memory.rotate_key()
    return (folder / "keys" / "history").read_text().splitlines()


async def test_a_history_cut_to_its_first_line_is_refused_at_open(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    lines = await _rotated_twice(folder, store_url)
    history = folder / "keys" / "history"
    history.write_text(lines[0] + "\n")
    with pytest.raises(KeyFileError, match=r"history lists 1 key\(s\).* has 3") as refused:
        await memseal.open(folder, store=store_url, embedder=None)
    assert all(line in str(refused.value) for line in lines)  # what to write back
    assert history.read_text() == lines[0] + "\n"
    history.write_text("\n".join(lines) + "\n")  # restored as the message says: opens again
    async with memseal.open(folder, store=store_url, embedder=None) as memory:
        await memory.ledger.verify(memory.trust_root)


async def test_a_history_with_a_foreign_key_in_place_of_a_rotated_one_is_refused(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    lines = await _rotated_twice(folder, store_url)
    foreign = NoteSigner.generate("memseal-foreign").verifier.text
    (folder / "keys" / "history").write_text("\n".join([lines[0], foreign, lines[2]]) + "\n")
    with pytest.raises(KeyFileError, match="cut or edited"):
        await memseal.open(folder, store=store_url, embedder=None)


@pytest.fixture
def cut_folder(tmp_path: Path) -> tuple[Path, list[str]]:
    import asyncio

    folder = tmp_path / "data"
    lines = asyncio.run(_rotated_twice(folder, None))
    (folder / "keys" / "history").write_text(lines[0] + "\n")
    return folder, lines


@pytest.mark.parametrize(
    "verb",
    [
        ["keys", "rotate"],
        ["export", "--run", "r1", "-o", "OUT"],
        ["mcp", "--place", "team:keys/agent:x"],
    ],
    ids=lambda verb: verb[0],
)
def test_every_writing_verb_refuses_a_cut_history_and_extends_nothing(
    cut_folder: tuple[Path, list[str]],
    verb: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, lines = cut_folder
    out = folder.parent / "r1.bundle"
    argv = [str(out) if a == "OUT" else a for a in verb] + ["--data", str(folder)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "history" in err and "cut or edited" in err, err
    assert (folder / "keys" / "history").read_text() == lines[0] + "\n"
    assert not out.exists()


def test_serve_refuses_a_cut_history_and_exits(cut_folder: tuple[Path, list[str]]) -> None:
    folder, _ = cut_folder
    # A subprocess with a deadline: a serve that wrongly starts must fail this test, not hang it.
    done = subprocess.run(
        [sys.executable, "-m", "memseal.cli", "serve", "--data", str(folder), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "cut or edited" in done.stderr


def test_trust_given_a_history_file_of_several_keys_says_so(
    cut_folder: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, lines = cut_folder
    trust = folder.parent / "history-copy"
    trust.write_text("\n".join(lines) + "\n")
    assert main(["verify", str(folder), "--trust", str(trust)]) == 2
    err = capsys.readouterr().err
    assert "holds 3 keys" in err and "head -n 1" in err, err
    trust.write_text(lines[0] + "\n")  # the first line alone: the trust root
    assert main(["verify", str(folder), "--trust", str(trust)]) == 0


def test_a_running_server_refuses_to_export_a_history_cut_after_it_opened(
    tmp_path: Path, store_url: str | None
) -> None:
    import asyncio

    sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
    from test_service_support import ServerThread

    folder = tmp_path / "data"
    lines = asyncio.run(_rotated_twice(folder, store_url))
    history = folder / "keys" / "history"
    server = ServerThread(folder, store=store_url)
    with server, server.client(server.token("agent", "team:keys/agent:x")) as client:
        before = client.get("/v1/runs/r1/export")
        assert before.status_code == 200, before.text
        assert before.json()["keys"] == lines
        history.write_text(lines[0] + "\n")  # cut while the server runs
        cut = client.get("/v1/runs/r1/export")
        assert cut.status_code == 503, cut.text
        assert "history lists 1 key(s)" in cut.json()["error"]["message"]
        history.write_text("\n".join(lines) + "\n")
        again = client.get("/v1/runs/r1/export")
        assert again.status_code == 200, again.text
        assert again.json()["keys"] == lines
