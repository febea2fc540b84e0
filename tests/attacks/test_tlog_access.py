"""The /tlog/ files: who reads what, what they disclose, and no hostile path reaches a 5xx.

Hash tiles and the checkpoint disclose hashes and a size; entry bundles the signed bodies.
By default every /tlog/ file takes an auditor's or admin's token; an agent's token reads
none, and ``tlog_public`` opens the hash tiles and checkpoint only, never the bundles
unless ``tlog_public_entries`` says so. A cache must never share what a token fetched.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from integration.test_service_support import ServerThread, assert_error

import memseal
from memseal.ledger.tiles import encode_index
from memseal.tools import ToolScope

SECRET = "the vault code is 0451"
PLACE = "team:acme/agent:writer"


async def _log(folder: Path, store: str | None) -> None:
    async with memseal.open(folder, store=store, embedder=None, checkpoint_interval=None) as m:
        tools = m.tools(ToolScope.placed_at(PLACE))
        stored = await tools.call("memory_store", {"learning": {"text": SECRET}})
        for i in range(300):
            await m.ledger.append("note", {"i": i}, {"text": f"payload {i}"})
        await tools.call("memory_forget", {"ids": [stored["id"]]})
        await m.ledger.checkpoint()


@pytest.fixture
def folder(tmp_path: Path, store_url: str | None) -> tuple[Path, str | None]:
    asyncio.run(_log(tmp_path / "d", store_url))
    return tmp_path / "d", store_url


BUNDLES = ["tile/entries/000", "signatures/000", "tile/entries/001.p/48"]
HASHES = ["checkpoint", "tile/0/000", "tile/1/000.p/1"]


def test_an_agent_token_reads_no_tlog_file_by_default(folder: tuple[Path, str | None]) -> None:
    data, store = folder
    with ServerThread(data, store=store) as server, ExitStack() as stack:
        agent = stack.enter_context(server.client(server.token("agent", PLACE)))
        nobody = stack.enter_context(server.client(None))
        auditor = stack.enter_context(server.client(server.token("auditor", "/")))
        for path in BUNDLES + HASHES:
            assert_error(agent.get(f"/tlog/{path}"), 403, "forbidden")
            assert_error(nobody.get(f"/tlog/{path}"), 401)
            got = auditor.get(f"/tlog/{path}")
            assert got.status_code == 200, (path, got.text)
            if path != "checkpoint":
                # Fetched with a token: no shared cache may keep it.
                assert got.headers["cache-control"] == "private, max-age=31536000, immutable"
        assert auditor.get("/tlog/checkpoint").headers["cache-control"] == "no-store"
        # Bad paths: refused before the token is even looked at by nobody's request.
        assert_error(agent.get("/tlog/tile/0/1000"), 403)


def test_public_hash_tiles_never_open_the_bundles(folder: tuple[Path, str | None]) -> None:
    data, store = folder
    with ServerThread(data, store=store, tlog_public=True) as server, ExitStack() as stack:
        nobody = stack.enter_context(server.client(None))
        agent = stack.enter_context(server.client(server.token("agent", PLACE)))
        for path in HASHES:
            got = nobody.get(f"/tlog/{path}")
            assert got.status_code == 200, (path, got.text)
        assert nobody.get("/tlog/tile/0/000").headers["cache-control"] == (
            "public, max-age=31536000, immutable"
        )
        assert nobody.get("/tlog/checkpoint").headers["cache-control"] == "public, max-age=5"
        for path in BUNDLES:
            assert_error(nobody.get(f"/tlog/{path}"), 401)
            assert_error(agent.get(f"/tlog/{path}"), 403, "forbidden")
    with (
        ServerThread(data, store=store, tlog_public=True, tlog_public_entries=True) as server,
        ExitStack() as stack,
    ):
        nobody = stack.enter_context(server.client(None))
        bundles = b"".join(nobody.get(f"/tlog/{p}").content for p in BUNDLES)
        assert len(bundles) > 300 * 64
        # Bodies only: no payload, and nothing of the forgotten text.
        assert SECRET.encode() not in bundles and b"payload 7" not in bundles


MALFORMED = [
    "tile/0/1000",
    "tile/0/x000/001",
    "tile/0/000.p/256",
    "tile/0/000.p/0",
    "tile/99/000",
    "tile/-1/000",
    "tile/0/" + "x999/" * 10 + "999",
    "tile/entries/../../etc/passwd",
    "tile/entries/%00",
    "tile/0/000.p/abc",
    "tile/0//000",
    "nothing",
    "",
]


def test_a_malformed_tile_path_is_a_4xx(folder: tuple[Path, str | None]) -> None:
    data, store = folder
    with (
        ServerThread(data, store=store, tlog_public=True, tlog_public_entries=True) as server,
        ExitStack() as stack,
    ):
        client = stack.enter_context(server.client(None))
        for path in MALFORMED:
            got = client.get(f"/tlog/{path}")
            assert got.status_code in (400, 404), (path, got.status_code, got.text)
            assert_error(got, got.status_code)


def test_a_tile_the_tree_lacks_is_a_404(folder: tuple[Path, str | None]) -> None:
    data, store = folder
    with (
        ServerThread(data, store=store, tlog_public=True, tlog_public_entries=True) as server,
        ExitStack() as stack,
    ):
        client = stack.enter_context(server.client(None))
        size = int(client.get("/tlog/checkpoint").text.split("\n")[1])
        beyond = [
            "tile/0/002",
            f"tile/0/001.p/{size - 256 + 1}",
            "tile/1/000",
            "tile/2/000.p/1",
            "tile/entries/001",
            "signatures/002.p/3",
            f"tile/0/{encode_index(2**63 - 1)}",
            f"tile/7/{encode_index(2**40)}.p/255",
        ]
        for path in beyond:
            assert_error(client.get(f"/tlog/{path}"), 404, "not_found")
        # And below the size, every width of a partial tile is served (older checkpoints').
        assert client.get("/tlog/tile/0/001.p/1").status_code == 200
        assert httpx.get(f"{server.url}/tlog/tile/0/000", timeout=10).content[:32] == (
            client.get("/tlog/tile/0/000.p/1").content
        )
