"""``memseal tiles DIR`` and ``memseal verify --tiles`` from the command line, over a folder
and over the service's /tlog/ URL, on each store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_service_support import ServerThread

import memseal
from memseal import cli


async def _log(folder: Path, store: str | None, count: int) -> tuple[str, str]:
    async with memseal.open(folder, store=store, embedder=None, checkpoint_interval=None) as m:
        for i in range(count):
            await m.ledger.append("note", {"i": i}, {"text": f"cli tiles {i}"})
        return m.trust_root, await m.ledger.checkpoint()


def test_verify_tiles_reads_a_folder_and_the_service(
    tmp_path: Path, store_url: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d"
    vkey, kept = asyncio.run(_log(data, store_url, 40))
    (tmp_path / "kept").write_text(kept)
    asyncio.run(_log(data, store_url, 260))
    store = ["--store", store_url] if store_url else []
    mirror = tmp_path / "mirror"
    assert cli.main(["tiles", str(mirror), "--data", str(data), *store]) == 0
    assert "the tiles of 300 entries" in capsys.readouterr().out
    since = ["--since", str(tmp_path / "kept")]
    assert cli.main(["verify", "--tiles", str(mirror), "--trust", vkey, *since]) == 0
    out = capsys.readouterr().out
    assert (
        "ok: 300 entries verified" in out
        and "consistent with the kept checkpoint of size 40" in out
    )

    with ServerThread(data, store=store_url) as server:
        url = f"{server.url}/tlog"
        token = tmp_path / "token"
        token.write_text(server.token("auditor", "/") + "\n")
        # Served and exported tiles are the same files.
        assert (
            cli.main(["verify", "--tiles", url, "--trust", vkey, "--token-file", str(token)]) == 0
        )
        assert "ok: 300 entries verified" in capsys.readouterr().out
        assert cli.main(["verify", "--tiles", url, "--trust", vkey]) == 2
        assert "--token-file" in capsys.readouterr().err
        agent = tmp_path / "agent"
        agent.write_text(server.token("agent", "team:acme/agent:writer"))
        assert (
            cli.main(["verify", "--tiles", url, "--trust", vkey, "--token-file", str(agent)]) == 2
        )

    # Usage: --tiles takes no PATH; PATH or --tiles is needed; --since goes with --tiles.
    assert cli.main(["verify", str(data), "--tiles", str(mirror), "--trust", vkey]) == 2
    assert cli.main(["verify", "--trust", vkey]) == 2
    assert cli.main(["verify", str(data), "--trust", vkey, *since]) == 2
    # An entry bundle cut short on the mirror: exit 1, naming the file.
    bundle = mirror / "tile/entries/000"
    bundle.write_bytes(bundle.read_bytes()[:-1])
    assert cli.main(["verify", "--tiles", str(mirror), "--trust", vkey]) == 1
    assert "tile/entries/000" in capsys.readouterr().err
