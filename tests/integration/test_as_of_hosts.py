"""The memory as of a point from every host surface: the blocking facade, the lifecycle's read
moments (Python and HTTP), MCP over HTTP (the endpoint's URL) and stdio (``--as-of``), and
the auditor's item route. A point is the host's: no tool schema changes, nothing is recorded.

Real data folders on tmp_path, ``memseal serve`` on loopback, the mcp package's own client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_service_support import ServerThread, assert_error

import memseal
from memseal import InvalidRequest, ToolScope, Unsupported
from memseal.apps.lifecycle import AgentMemory, MemoryLayout

READS = {"memory_recall", "memory_fetch", "memory_list", "memory_get", "memory_explore"}
BIN = Path(sys.executable).parent
LAYOUT = MemoryLayout(tenant="team:acme")


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


# -- the blocking facade -------------------------------------------------------------------


def test_the_sync_facade_reads_the_past_as_the_async_memory_does(tmp_path: Path) -> None:
    with memseal.open_sync(tmp_path / "data", embedder=None) as memory:
        kept = memory.call("memory_store", {"learning": {"text": "standup at 9:30"}})[1]["id"]
        gone = memory.call("memory_store", {"learning": {"text": "alarm code 5521"}})[1]["id"]
        point = memory.ledger.size()
        memory.call("memory_forget", {"ids": [gone]})
        size = memory.ledger.size()

        view = memory.as_of(point)
        assert view.size == point and repr(view) == f"SyncAsOfView(size={point})"
        tools = view.tools(ToolScope())
        assert set(tools.names()) == READS
        got = tools.call("memory_get", {"ids": [gone, kept]})
        assert set(got["items"][0]["text"]) == {"forgotten_at"}  # a later forget applies
        assert got["items"][1]["text"] == "standup at 9:30"
        # Exactly what the async view answers, for every read tool.
        past = asyncio.run_coroutine_threadsafe(memory.memory.as_of(point), memory.loop).result()
        for name, args in (
            ("memory_get", {"ids": [gone, kept]}),
            ("memory_list", {}),
            ("memory_fetch", {"query": "alarm code standup"}),
            ("memory_explore", {"facet": "kind"}),
        ):
            expected = asyncio.run_coroutine_threadsafe(
                past.tools(ToolScope()).call(name, args), memory.loop
            ).result()
            assert tools.call(name, args) == expected, name
        text = tools.toolset().call("memory_list", {})
        assert "standup at 9:30" in text and "5521" not in text
        with pytest.raises(Unsupported, match="read-only view"):
            tools.call("memory_store", {"learning": {"text": "rewrite history"}})
        with pytest.raises(InvalidRequest, match="`size`"):
            memory.as_of(size + 5)
        with pytest.raises(InvalidRequest, match="`at`"):
            memory.as_of(at="yesterday")
        assert memory.as_of(at="2000-01-01T00:00:00Z").size == 0
        assert memory.ledger.size() == size  # reads of the past record nothing


# -- the lifecycle's read moments -----------------------------------------------------------


async def test_the_session_start_and_pre_turn_packs_as_of_a_point(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "data", embedder=None) as memory:
        session = AgentMemory(memory, LAYOUT, agent="helper", thread="t1")
        try:
            await session.post_turn(turn=0, user="I live in Berlin.", assistant="Okay.")
            then = (await memory.ledger.store.head()).size
            await session.post_turn(turn=1, user="I moved to Lisbon.", assistant="Okay.")
            view = await memory.as_of(then)
            before = (await memory.ledger.store.head()).size

            past = await session.start(as_of=view)
            shown = past.markdown()
            assert "Berlin" in shown and "Lisbon" not in shown
            context = await session.pre_turn("Where do I live?", turn=2, as_of=view)
            assert "Berlin" in context.markdown() and "Lisbon" not in context.markdown()
            brief = await session.briefing(pack=past, as_of=view)
            assert "read-only here" in brief and "Berlin" in brief
            assert (await memory.ledger.store.head()).size == before  # unrecorded
            with pytest.raises(InvalidRequest, match="`as_of`"):
                await session.start(as_of=then)  # type: ignore[arg-type]

            live = await session.start()  # the recorded moment is untouched by the past reads
            assert "Lisbon" in live.markdown()
        finally:
            await session.close(check=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "data") as running:
        yield running


def _size(server: ServerThread) -> int:
    with server.client(server.token("auditor", "team:acme")) as c:
        return int(c.get("/v1/ledger").json()["size"])


def test_the_lifecycle_routes_take_a_point(server: ServerThread) -> None:
    token = server.token("agent", "team:acme/agent:helper", reach="subtree:team:acme")
    with server.client(token) as c:
        for turn, said in enumerate(["I live in Berlin.", "I moved to Lisbon."]):
            r = c.post("/v1/sessions/t1/post-turn", json={"turn": turn, "user": said})
            assert r.status_code == 200, r.text
            if turn == 0:
                then = _size(server)
        before = _size(server)
        r = c.post(f"/v1/sessions/t1/start?as_of={then}", json={})
        assert r.status_code == 200, r.text
        assert r.json()["as_of"] == then
        assert "Berlin" in r.json()["markdown"] and "Lisbon" not in r.json()["markdown"]
        assert "Berlin" in r.json()["brief"]
        asked = {"message": "Where do I live?", "turn": 2}
        r = c.post(f"/v1/sessions/t1/pre-turn?as_of={then}", json=asked)
        assert r.status_code == 200 and r.json()["as_of"] == then
        assert "Lisbon" not in r.json()["markdown"]
        assert _size(server) == before  # nothing recorded
        assert (
            "as_of"
            in assert_error(c.post("/v1/sessions/t1/start?as_of=x", json={}), 400)["error"][
                "message"
            ]
        )
        assert_error(c.post(f"/v1/sessions/t1/start?as_of={before + 9}", json={}), 400)
        r = c.post("/v1/sessions/t1/pre-turn", json=asked)
        assert "Lisbon" in r.json()["markdown"] and "as_of" not in r.json()


# -- the auditor's item route ------------------------------------------------------------------


def test_the_ledger_items_route_takes_a_point(server: ServerThread) -> None:
    agent = server.token("agent", "team:acme/agent:x")
    auditor = server.token("auditor", "team:acme")
    other = server.token("auditor", "team:other")
    with server.client(agent) as c:
        kept = c.post("/v1/tools/memory_store", json={"learning": {"text": "ships on monday"}})
        gone = c.post("/v1/tools/memory_store", json={"learning": {"text": "vault pin 8812"}})
        then = _size(server)
        c.post("/v1/tools/memory_store", json={"learning": {"text": "ships on tuesday now"}})
        c.post("/v1/tools/memory_forget", json={"ids": [gone.json()["result"]["id"]]})
    with server.client(auditor) as c:
        live = c.get("/v1/ledger/items").json()
        assert [i["text"] for i in live["items"]] == ["ships on tuesday now", "ships on monday"]
        past = c.get(f"/v1/ledger/items?as_of={then}").json()
        assert past["as_of"] == then
        assert [i["id"] for i in past["items"]] == [kept.json()["result"]["id"]]  # pin: gone
        hits = c.get(f"/v1/ledger/items?as_of={then}&query=ships").json()
        assert [h["text"] for h in hits["items"]] == ["ships on monday"] and hits["as_of"] == then
        assert c.get(f"/v1/ledger/items?as_of={then}&query=vault").json()["items"] == []
        assert_error(c.get("/v1/ledger/items?as_of=-1"), 400)
        assert_error(c.get("/v1/ledger/items?as_of_time=tomorrow"), 400)
        run = gone.json()["run_id"]
        at_run = c.get(f"/v1/ledger/items?as_of_run={run}&as_of_step=0").json()
        assert at_run["as_of"] == then - 2 and len(at_run["items"]) == 1  # before the pin
    with server.client(other) as c:  # another tenant's auditor: no run, no items
        assert_error(c.get(f"/v1/ledger/items?as_of_run={run}&as_of_step=0"), 400)
        assert c.get(f"/v1/ledger/items?as_of={then}").json()["items"] == []


# -- MCP ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _http(
    server: ServerThread, token: str, query: str = "", run: str | None = None
) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {token}"}
    if run is not None:
        headers["X-Memseal-Run"] = run
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(f"{server.url}/mcp{query}", http_client=http)
        async with Client(transport, mode="legacy") as client:
            yield client


async def test_mcp_over_http_serves_the_point_its_url_names(server: ServerThread) -> None:
    token = server.token("agent", "team:acme/agent:x")
    async with _http(server, token) as client:
        live = {t.name: t for t in (await client.list_tools()).tools}
        await client.call_tool("memory_store", {"learning": {"text": "lunch is at noon"}})
        then = await asyncio.to_thread(_size, server)
        await client.call_tool("memory_store", {"learning": {"text": "lunch moved to one"}})
    before = await asyncio.to_thread(_size, server)

    async with _http(server, token, f"?as_of={then}") as client:
        past = {t.name: t for t in (await client.list_tools()).tools}
        assert set(past) == READS
        for name, tool in past.items():  # the same tools, the same schemas: no point in them
            assert tool.input_schema == live[name].input_schema, name
            assert tool.description == live[name].description
        assert "as_of" not in json.dumps([t.input_schema for t in [*live.values()]])
        listed = await client.call_tool("memory_list", {})
        assert not listed.is_error
        assert "lunch is at noon" in _text(listed) and "one" not in _text(listed)
        refused = await client.call_tool("memory_store", {"learning": {"text": "x"}})
        assert refused.is_error and "read-only view" in _text(refused)
        brief = await client.read_resource("memory://context")
        assert "read-only here" in brief.contents[0].text
    async with _http(server, token, f"?as_of={then}", run="r-past") as client:
        named = await client.call_tool("memory_list", {})
        assert named.is_error and "not recorded" in _text(named)
    async with _http(server, token, "?as_of=soon") as client:
        with pytest.raises(MCPError, match="`as_of`"):
            await client.list_tools()
        bad = await client.call_tool("memory_list", {})
        assert bad.is_error and "`as_of`" in _text(bad)
    assert await asyncio.to_thread(_size, server) == before  # none of it recorded


async def test_mcp_stdio_as_of_serves_the_read_tools_of_then(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    async with memseal.open(folder, embedder=None) as memory:
        tools = memory.tools(ToolScope.placed_at("team:acme/agent:x"))
        await tools.call("memory_store", {"learning": {"text": "backups run nightly"}})
        then = (await memory.ledger.store.head()).size
        await tools.call("memory_store", {"learning": {"text": "backups run hourly now"}})
        size = (await memory.ledger.store.head()).size
    base = ["mcp", "--data", str(folder), "--embedder", "none", "--place", "team:acme/agent:x"]
    live_params = StdioServerParameters(command=str(BIN / "memseal"), args=base)
    async with Client(live_params) as client:
        live = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    params = StdioServerParameters(command=str(BIN / "memseal"), args=[*base, "--as-of", str(then)])
    async with Client(params) as client:
        past = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        assert set(past) == READS and all(past[n] == live[n] for n in past)
        found = await client.call_tool("memory_fetch", {"query": "backups", "mode": "exact"})
        assert "nightly" in _text(found) and "hourly" not in _text(found)
        refused = await client.call_tool("memory_forget", {"ids": ["0" * 32]})
        assert refused.is_error
    async with memseal.open(folder, embedder=None) as memory:
        assert (await memory.ledger.store.head()).size == size  # the past reads: unrecorded
