"""Attacks on the files at rest: another local user reading the ledger, its WAL, tokens, keys.

A data folder is 0700; every database file in it (ledger.db with its -wal and
-shm, the writer's turn file ledger.db.writer, tokens.db with its -wal and -shm)
and every private key file is 0600. SQLite makes -wal and -shm itself with the
mode of the database file, so these tests look at the real files while a store
holds them open, on SQLite and, for the folder and its keys, on PostgreSQL.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from integration.test_service_support import ServerThread

import memseal
from memseal.errors import StorageError
from memseal.service.tokens import TokenStore

BIN = Path(sys.executable).parent
DATABASE_FILES = ("ledger.db", "ledger.db-wal", "ledger.db-shm", "ledger.db.writer")
TOKEN_FILES = ("tokens.db", "tokens.db-wal", "tokens.db-shm")
SECRETS = ("keys/ledger.skey", "keys/instance.secret")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder`` (itself as ``.``) and its mode, in octal."""
    found = {".": f"{mode(folder):04o}"}
    for path in sorted(folder.rglob("*")):
        found[str(path.relative_to(folder))] = f"{mode(path):04o}"
    return found


def assert_private(folder: Path, names: tuple[str, ...]) -> None:
    seen = modes(folder)
    assert seen["."] == "0700", seen
    assert seen["keys"] == "0700", seen
    for name in names:
        assert seen.get(name) == "0600", (name, seen)
    # Nothing in the folder is open to group or others but the public halves.
    public = {"keys/ledger.vkey", "keys/history", "ledger.location"}
    for name, text in seen.items():
        if name not in public:
            assert int(text, 8) & 0o077 == 0, (name, seen)


async def test_another_user_cannot_read_a_fresh_ledger_or_its_wal(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    async with memseal.open(
        folder, store=store_url, embedder=None, checkpoint_interval=None
    ) as memory:
        await memory.tools().call("memory_store", {"learning": {"text": "Dana's salary is 92k"}})
        # While the store holds the file open: its WAL and shared memory exist.
        names = SECRETS if store_url else SECRETS + DATABASE_FILES
        assert_private(folder, names)


def test_another_user_cannot_read_the_token_table_or_its_wal(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    with ServerThread(folder, store=store_url) as server:
        server.token("agent", "team:a/agent:x")
        with server.client(server.admin) as admin:
            assert admin.get("/v1/admin/tokens").status_code == 200
        names = SECRETS + TOKEN_FILES + (() if store_url else DATABASE_FILES)
        assert_private(folder, names)


@pytest.mark.parametrize("wide", [0o755, 0o777, 0o750])
async def test_world_open_existing_folder_is_tightened_before_anything_is_made(
    tmp_path: Path, store_url: str | None, wide: int
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(wide)
    async with memseal.open(folder, store=store_url, embedder=None, checkpoint_interval=None):
        assert mode(folder) == 0o700
    assert_private(folder, SECRETS)
    # The token table (first serve, memseal tokens add) tightens a wide folder too.
    other = tmp_path / "tokens-first"
    other.mkdir()
    other.chmod(wide)
    TokenStore(other).close()
    assert mode(other) == 0o700 and mode(other / "tokens.db") == 0o600


async def test_files_left_wide_by_an_older_memseal_are_tightened_on_open(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        await memory.tools().call("memory_store", {"learning": {"text": "kept"}})
    TokenStore(folder).close()
    # As an older memseal left them (ledger.db 0644, a WAL beside it), or a careless restore.
    for name in ("ledger.db", "ledger.db.writer", "tokens.db", *SECRETS):
        (folder / name).chmod(0o644)
    for side in ("ledger.db-wal", "ledger.db-shm", "tokens.db-wal"):
        (folder / side).touch(mode=0o644)
        (folder / side).chmod(0o644)
    (folder / "keys").chmod(0o755)
    folder.chmod(0o755)
    tokens = TokenStore(folder)  # as serve opens them: the tokens first, then the ledger
    try:
        async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
            listed = await memory.tools().call("memory_list", {})
            assert "kept" in str(listed)
            assert_private(folder, SECRETS + DATABASE_FILES + ("tokens.db", "tokens.db-wal"))
    finally:
        tokens.close()


def test_fresh_ledger_stays_private_under_an_open_umask(tmp_path: Path) -> None:
    # umask 0: without the 0600 file made first, SQLite would create ledger.db, -wal and
    # -shm 0644 (its default mode). A process of its own, as the umask is process-wide.
    folder = tmp_path / "data"
    script = (
        "import asyncio, os, sys, memseal\n"
        "os.umask(0)\n"
        "async def main():\n"
        "    async with memseal.open(sys.argv[1], embedder=None, checkpoint_interval=None) as m:\n"
        "        await m.tools().call('memory_store', {'learning': {'text': 'x'}})\n"
        "        print(sorted(os.listdir(sys.argv[1])))\n"
        "        for name in ('ledger.db', 'ledger.db-wal', 'ledger.db-shm'):\n"
        "            print(name, oct(os.stat(os.path.join(sys.argv[1], name)).st_mode & 0o777))\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, check=True
    ).stdout
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        assert f"{name} 0o600" in out, out


async def test_shared_sticky_folder_is_refused_and_nothing_is_made_in_it(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: closing it would break every other user of it
    with pytest.raises(StorageError, match="shared folder"):
        async with memseal.open(shared, embedder=None, checkpoint_interval=None):
            pass
    with pytest.raises(StorageError, match="shared folder"):
        TokenStore(shared)
    assert list(shared.iterdir()) == [] and mode(shared) == 0o1777


def test_shared_sticky_folder_is_refused_from_the_command_line_in_one_line(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    # tokens add refuses an empty folder before it looks at it: no keys, so no data folder.
    for argv, said in (
        (
            ["tokens", "add", "--data", str(shared), "--role", "agent", "--place", "team:a"],
            "not a memseal data folder",
        ),
        (["keys", "new", "--data", str(shared)], "shared folder"),
    ):
        done = subprocess.run([BIN / "memseal", *argv], capture_output=True, text=True)
        assert done.returncode in (1, 2), done
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert list(shared.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the folder to another user")
async def test_wide_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    theirs.chmod(0o755)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(StorageError, match="not this process's own"):
        async with memseal.open(theirs, embedder=None, checkpoint_interval=None):
            pass
    assert list(theirs.iterdir()) == [] and mode(theirs) == 0o755
