"""Go's golang.org/x/mod/sumdb/tlog follows memseal's log as C2SP tlog-tiles.

``tests/interop/gotiles`` opens the checkpoint with ``note.Open``, reads the hash
tiles through ``tlog.TileHashReader`` with height 8 (which checks each tile against
the checkpoint's root), proves the inclusion of sampled entries whose bytes it takes
from the entry bundles (``tlog.RecordHash``, ``ProveRecord``, ``CheckRecord``) and
the consistency of an older checkpoint (``ProveTree``, ``CheckTree``): over HTTP from
``memseal serve`` and from a folder ``memseal tiles`` wrote, on each store.

Built once per session in GOPATH mode from Debian's golang-golang-x-mod-dev; without
``go`` the tests skip (CI installs it).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.test_service_support import ServerThread

import memseal
from memseal import cli

SOURCE = Path(__file__).resolve().parent / "gotiles"
DEBIAN_GOPATH = "/usr/share/gocode"
OLD, NEW = 300, 1100

GoTiles = Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="session")
def gotiles(tmp_path_factory: pytest.TempPathFactory) -> GoTiles:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed: apt-get install golang-go golang-golang-x-mod-dev")
    out = tmp_path_factory.mktemp("gotiles")
    gopath = os.pathsep.join(p for p in (os.environ.get("GOPATH"), DEBIAN_GOPATH) if p)
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": gopath,
        "GOFLAGS": "",
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
    }
    if not any(env.get(v) for v in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
        env["GOCACHE"] = str(out / "cache")
    binary = out / "gotiles"
    built = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=SOURCE,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr

    def run(case: dict[str, Any]) -> dict[str, Any]:
        done = subprocess.run(
            [str(binary)], input=json.dumps(case), capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    return run


async def _log(folder: Path, store: str | None) -> tuple[str, str, str]:
    """A log of NEW entries with a checkpoint kept at OLD; (trust root, old, new)."""
    async with memseal.open(folder, store=store, embedder=None, checkpoint_interval=None) as m:
        for start in range(0, NEW, 100):
            if start == OLD:
                old = await m.ledger.checkpoint()
            await asyncio.gather(
                *(m.ledger.append("note", {"i": i}) for i in range(start, start + 100))
            )
        return m.trust_root, old, await m.ledger.checkpoint()


@pytest.fixture
def tiled(tmp_path: Path, store_url: str | None) -> Iterator[tuple[Path, str | None]]:
    yield tmp_path / "d", store_url


def _sample() -> list[int]:
    rng = random.Random(42)
    edges = {0, 1, 255, 256, 257, OLD - 1, OLD, 511, 512, 1023, 1024, NEW - 1}
    return sorted(edges | set(rng.sample(range(NEW), 40)))


def test_go_follows_the_served_tiles_and_the_exported_folder(
    gotiles: GoTiles, tiled: tuple[Path, str | None], tmp_path: Path
) -> None:
    folder, store = tiled
    vkey, old, new = asyncio.run(_log(folder, store))
    case = {"vkeys": [vkey], "old": old, "sample": _sample()}
    with ServerThread(folder, store=store) as server:
        url = f"{server.url}/tlog"
        token = server.token("auditor", "/")
        served = gotiles({**case, "base": url, "token": token})
        refused = gotiles({**case, "base": url})  # no token: the tiles are not public
    assert served == {
        "ok": True,
        "size": NEW,
        "root": new.split("\n")[2],
        "proved": len(_sample()),
        "consistent": True,
    }
    assert refused["ok"] is False and "401" in refused["error"]

    out = tmp_path / "tiles"
    args = ["tiles", str(out), "--data", str(folder)]
    assert cli.main([*args, *(["--store", store] if store else [])]) == 0
    exported = gotiles({**case, "base": str(out)})
    assert exported == served

    # A hash tile edited on the mirror: Go's TileHashReader refuses it against the root.
    tile = out / "tile/0/001"
    data = bytearray(tile.read_bytes())
    data[100] ^= 1
    tile.write_bytes(bytes(data))
    edited = gotiles({**case, "base": str(out)})
    assert edited["ok"] is False, edited
    tile.write_bytes(bytes(data[:100]) + bytes([data[100] ^ 1]) + bytes(data[101:]))
    # An entry edited in its bundle: its record hash is no longer in the tree.
    bundle = out / "tile/entries/001"
    raw = bundle.read_bytes()
    bundle.write_bytes(raw[:40] + bytes([raw[40] ^ 1]) + raw[41:])
    changed = gotiles({**case, "base": str(out), "old": ""})
    assert changed["ok"] is False and "entry 256" in changed["error"], changed
