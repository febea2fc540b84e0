"""A run keeps the scope of whoever calls into it: never. It belongs to the scope that opened it.

A run records its whole scope (place, reach, writes, floor, default trust,
freeze, allow list) in its signed ``run_started`` entry. A call naming a run
that another scope at the same place opened is refused: 409 over HTTP, an
``isError`` result over MCP, :class:`Conflict` in Python; a caller placed
elsewhere is told there is no such run (404). Every call is checked against
its caller's own scope. Two tokens with exactly the same scope share a run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _runs_support import ServerThread, assert_error

import memseal
from memseal import Conflict, ToolScope
from memseal.memory import Memory

PLACE = "team:acme/agent:writer"
WRITER = ToolScope.placed_at(PLACE)
STORE = {"learning": {"text": "the release is on friday"}}


@pytest.fixture
def server(tmp_path: Path, store_url: str | None) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "svc", store=store_url) as running:
        yield running


def _size(server: ServerThread) -> int:
    with server.client(server.admin) as admin:
        return int(admin.get("/v1/ledger").json()["size"])


def _refused(r: httpx.Response) -> None:
    body = assert_error(r, 409, "conflict")
    message = body["error"]["message"]
    assert "belongs to another scope" in message and "join" not in message, message


@contextlib.contextmanager
def _open_run(server: ServerThread, run_id: str) -> Iterator[httpx.Client]:
    """A writer token's client that has opened ``run_id`` with one store."""
    with server.client(server.token("agent", PLACE)) as writer:
        r = writer.post("/v1/tools/memory_store", json=STORE, headers={"X-Memseal-Run": run_id})
        assert r.status_code == 200, r.text
        yield writer


@pytest.mark.parametrize(
    "limits",
    [
        {"read_only": True},
        {"frozen": True},
        {"allow": ["memory_fetch", "memory_get"]},
    ],
    ids=["read-only", "frozen", "allowlist"],
)
def test_limited_token_cannot_store_or_forget_through_anothers_run(
    server: ServerThread, limits: dict[str, Any]
) -> None:
    with _open_run(server, "r1") as writer:
        items = writer.post("/v1/tools/memory_list", json={}).json()["result"]["items"]
        limited = server.client(server.token("agent", PLACE, **limits))
        with limited:
            size = _size(server)
            for name, arguments in (
                ("memory_store", {"learning": {"text": "planted by a limited token"}}),
                ("memory_forget", {"ids": [items[0]["id"]]}),
                ("memory_fetch", {"query": "release"}),
            ):
                _refused(
                    limited.post(
                        f"/v1/tools/{name}", json=arguments, headers={"X-Memseal-Run": "r1"}
                    )
                )
                _refused(limited.post(f"/v1/runs/r1/tools/{name}", json=arguments))
                _refused(
                    limited.post(
                        f"/v1/runs/r1/tools/{name}", json=arguments, headers={"X-Memseal-Step": "0"}
                    )
                )
            assert _size(server) == size, "a refused call wrote something"
            # Its own scope still applies in a run of its own: the write is refused there too.
            r = limited.post(
                "/v1/tools/memory_store",
                json={"learning": {"text": "planted by a limited token"}},
                headers={"X-Memseal-Run": "limited-own"},
            )
            assert r.status_code in (400, 403), r.text
        after = writer.post("/v1/tools/memory_list", json={}).json()["result"]["items"]
        assert after == items
        assert "planted" not in writer.post("/v1/tools/memory_list", json={}).text


@pytest.mark.parametrize(
    "other",
    [{"default_trust": "verified"}, {"floor": "verified"}, {"reach": "subtree:team:acme"}],
    ids=["default-trust", "floor", "reach"],
)
def test_token_with_another_trust_or_reach_cannot_use_anothers_run(
    server: ServerThread, other: dict[str, Any]
) -> None:
    with _open_run(server, "r-trust"), server.client(server.token("agent", PLACE, **other)) as c:
        _refused(c.post("/v1/runs/r-trust/tools/memory_fetch", json={"query": "release"}))


def test_read_only_token_cannot_store_through_a_closed_or_restarted_run(
    server: ServerThread,
) -> None:
    with _open_run(server, "r-closed") as writer:
        assert writer.delete("/v1/runs/r-closed").json()["closed"] is True
    # The run is no longer held here: its signed run_started entry is what decides.
    with server.client(server.token("agent", PLACE, read_only=True)) as reader:
        size = _size(server)
        _refused(
            reader.post(
                "/v1/tools/memory_store",
                json={"learning": {"text": "planted"}},
                headers={"X-Memseal-Run": "r-closed"},
            )
        )
        assert _size(server) == size


def test_tokens_with_the_same_scope_share_a_run(server: ServerThread) -> None:
    with _open_run(server, "shared") as first, server.client(server.token("agent", PLACE)) as c:
        r = c.post("/v1/tools/memory_list", json={}, headers={"X-Memseal-Run": "shared"})
        assert r.status_code == 200 and r.json()["step"] == 1, r.text
        r = first.post("/v1/tools/memory_list", json={}, headers={"X-Memseal-Run": "shared"})
        assert r.json()["step"] == 2


def test_another_tenant_is_told_there_is_no_such_run(server: ServerThread) -> None:
    other = server.token("agent", "team:other/agent:x")
    with _open_run(server, "tenant-run"), server.client(other) as c:
        r = c.post("/v1/runs/tenant-run/tools/memory_list", json={})
        assert_error(r, 404, "not_found")


async def test_read_only_token_cannot_store_through_anothers_run_over_mcp(
    server: ServerThread,
) -> None:
    from test_mcp_service import _http, _text

    with _open_run(server, "mcp-r1"):
        reader = server.token("agent", PLACE, read_only=True)
        size = _size(server)
        async with _http(server, reader, run="mcp-r1") as client:
            stored = await client.call_tool("memory_store", {"learning": {"text": "planted"}})
            assert stored.is_error and "belongs to another scope" in _text(stored)
            fetched = await client.call_tool("memory_fetch", {"query": "release"})
            assert fetched.is_error and "belongs to another scope" in _text(fetched)
        assert _size(server) == size


async def test_python_run_refuses_a_scope_other_than_the_one_that_opened_it(
    memory: Memory,
) -> None:
    async with memory.run("py-run", WRITER) as run:
        await run.call("memory_store", STORE)
    size = (await memory.ledger.head()).size
    for other in (
        WRITER.replace(writes=False),
        WRITER.replace(frozen=True),
        WRITER.replace(allowlist=("memory_fetch",)),
        WRITER.replace(default_trust="verified"),
    ):
        with pytest.raises(Conflict, match="belongs to another scope"):
            async with memory.run("py-run", other) as run:
                await run.call("memory_store", {"learning": {"text": "planted"}})
    assert (await memory.ledger.head()).size == size
    # The refused runs gave their lease back: the scope that opened it resumes it.
    async with memory.run("py-run", WRITER) as run:
        assert (await run.call("memory_store", STORE))["replayed"] is False


async def test_one_shot_call_cannot_take_over_an_existing_run(memory: Memory) -> None:
    # A one-shot run starts, calls and ends in one transaction: named after an existing
    # run, it would have recorded another scope's call as that run's step 0 (found in review).
    async with memory.run("owned", WRITER) as run:
        first = await run.call("memory_store", STORE)
    size = (await memory.ledger.head()).size
    for other in (WRITER, WRITER.replace(writes=False), WRITER.replace(frozen=True)):
        shot = memory.run("owned", other, mode="record", oneshot=True)
        with pytest.raises(Conflict, match="one-shot call takes a fresh run id"):
            await shot.call("memory_fetch", {"query": "release"})
        await shot.close(check=False)
    assert (await memory.ledger.head()).size == size
    await memory.verify()
    async with memory.run("owned", WRITER, mode="strict") as run:
        assert await run.call("memory_store", STORE) == first  # its step 0 is still its own


async def test_resumed_run_in_a_new_process_knows_the_scope_that_opened_it(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "d"
    async with (
        memseal.open(folder, store=store_url, embedder=None) as memory,
        memory.run("across", WRITER) as run,
    ):
        await run.call("memory_store", STORE)
    async with memseal.open(folder, store=store_url, embedder=None) as memory:
        with pytest.raises(Conflict, match="differs in writes"):
            async with memory.run("across", WRITER.replace(writes=False)) as run:
                await run.call("memory_list", {})
        async with memory.run("across", WRITER, mode="strict") as run:
            await run.call("memory_store", STORE)


async def test_run_recorded_before_whole_scopes_is_matched_on_its_four_fields(
    memory: Memory,
) -> None:
    from memseal.ledger.entry import make_draft
    from memseal.replay.runs.identity import ScopeIdentity
    from memseal.replay.runs.memo import acquire, release

    # A run_started entry as runs recorded it before: place, reach, writes and floor only.
    known = ScopeIdentity.of(WRITER)
    body = {
        "run_id": "legacy",
        "mode": "resume",
        "place": known.place,
        "reach": known.reach,
        "writes": known.writes,
        "floor": known.floor,
    }

    def command(txn: Any) -> None:
        acquire(txn, "legacy", "old-holder", 15.0)
        txn.append(make_draft("run_started", body))
        release(txn, "legacy", "old-holder")

    await memory.ledger.store.run(command)
    async with memory.run("legacy", WRITER) as run:
        await run.call("memory_list", {})
    with pytest.raises(Conflict, match="differs in writes"):
        async with memory.run("legacy", WRITER.replace(writes=False)) as run:
            await run.call("memory_list", {})
