"""A point of the log (``?as_of=``...) is honoured or refused on every route, and on /mcp.

``POST /v1/runs/{run_id}/tools/{name}?as_of=N`` once ignored the point: a list
read the live memory and was recorded, and ``memory_store?as_of=N`` wrote, where
``/v1/tools/{name}?as_of=N`` refused the write. Now every route either honours
the point (it says so in the OpenAPI document: a read of the memory as of then,
nothing recorded) or refuses it with a 400 naming the parameter, before anything
is read or written. The walk below covers every path and method the document
lists, so a route added later is covered too. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _runs_support import ServerThread
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

AGENT = "team:acme/agent:x"
#: A point that names a size, a time and a recorded call (run r1 is made below).
POINTS = ["as_of=1", "as_of_time=2000-01-01T00:00:00Z", "as_of_run=r1&as_of_step=0"]
#: Points no route may take: not a size, a week date, a parameter given twice.
BAD = [
    ("as_of=x", "as_of"),
    ("as_of_time=2026-W01-1T00:00:00Z", "as_of_time"),
    ("as_of=1&as_of=2", "as_of"),
    ("as_of_step=0&as_of_step=0&as_of_run=r1", "as_of_step"),
]


class World:
    """A served memory with a run, a session, an item and a spare token to act on."""

    def __init__(self, server: ServerThread) -> None:
        self.server = server
        self.agent = server.token("agent", AGENT, reach="subtree:team:acme")
        self.auditor = server.token("auditor", "team:acme")
        assert server.admin is not None
        self.admin = server.admin
        with server.client(self.agent) as c:
            stored = c.post(
                "/v1/runs/r1/tools/memory_store", json={"learning": {"text": "ships on monday"}}
            )
            assert stored.status_code == 200, stored.text
            self.item = stored.json()["result"]["id"]
            read = c.post("/v1/runs/r1/tools/memory_fetch", json={"query": "ships"})
            assert read.status_code == 200, read.text
            turn = c.post("/v1/sessions/t1/post-turn", json={"turn": 0, "user": "I live here."})
            assert turn.status_code == 200, turn.text
        with server.client(self.admin) as c:
            made = c.post("/v1/admin/tokens", json={"role": "agent", "place": "team:acme/agent:y"})
            assert made.status_code in (200, 201), made.text
            self.spare = made.json()["info"]["id"]

    def token(self, path: str) -> str | None:
        if path in ("/healthz", "/metrics"):
            return None
        if path.startswith("/v1/admin"):
            return self.admin
        if path.startswith("/v1/ledger"):
            return self.auditor
        return self.agent

    def state(self) -> tuple[int, list[dict[str, Any]]]:
        """What a request could change: the log's size, and the tokens (revoked or not)."""
        with self.server.client(self.admin) as c:
            size = c.get("/v1/ledger")
            tokens = c.get("/v1/admin/tokens")
        assert size.status_code == 200 and tokens.status_code == 200, (size.text, tokens.text)
        return int(size.json()["size"]), sorted(tokens.json()["tokens"], key=lambda t: t["id"])

    def requests(self, document: dict[str, Any]) -> Iterator[tuple[str, str, Any, bool]]:
        """Every path and method of the document, filled in to act if it could: (method,
        url, body, whether the document says it takes a point)."""
        values = {
            "run_id": "r1",
            "step": "1",
            "thread": "t1",
            "token_id": self.spare,
            "item_id": self.item,
            "seq": "0",
            "path": "tile/0/000",
        }
        for path, methods in document["paths"].items():
            for method, operation in methods.items():
                takes = any(p["name"] == "as_of" for p in operation.get("parameters", []))
                names = ["memory_store", "memory_list"] if "{name}" in path else [""]
                for name in names:
                    url = path.format(**values, name=name)
                    yield method.upper(), url, self.body(url), takes

    def body(self, url: str) -> Any:
        bodies: dict[str, Any] = {
            "memory_store": {"learning": {"text": "written despite the point"}},
            "/v1/admin/tokens": {"role": "agent", "place": "team:acme/agent:z"},
            "/forget": {"confirm": self.item, "reason": "gone"},
            "/promote": {"reason": "checked"},
            "/reject": {"reason": "checked"},
            "/stale": {"reason": "checked"},
            "/pre-turn": {"message": "where do I live?", "turn": 3},
            "/post-turn": {"turn": 3, "user": "written despite the point"},
            "/compact": {"turn": 3, "keep": 0},
            "/jobs/run": {"place": AGENT},
            "/jobs/requeue": {"place": AGENT, "job": "0" * 32},
        }
        return next((b for k, b in bodies.items() if url.endswith(k)), {})


@pytest.fixture
def world(tmp_path: Path, store_url: str | None) -> Iterator[World]:
    with ServerThread(tmp_path / "svc", store=store_url) as server:
        yield World(server)


def _names(response: httpx.Response, parameter: str) -> bool:
    return f"`{parameter}" in response.json()["error"]["message"]


def test_every_route_honours_a_point_or_refuses_it_by_name(world: World) -> None:
    document = world.server.app.openapi()
    honoured: set[str] = set()
    before = world.state()
    for method, url, body, takes in world.requests(document):
        with world.server.client(world.token(url)) as c:
            for point in POINTS:
                r = c.request(method, f"{url}?{point}", json=body if method == "POST" else None)
                parameter = point.split("=")[0]
                assert r.status_code < 500, (method, url, point, r.text)
                if not takes:
                    assert r.status_code == 400 and _names(r, parameter), (method, url, r.text)
                elif r.status_code < 300:
                    assert "as_of" in r.json(), (method, url, r.text)
                    honoured.add(f"{method} {url}")
                else:  # a write on a read route: refused as the past's, naming the point
                    assert 400 <= r.status_code < 500 and _names(r, "as_of"), (url, r.text)
                assert world.state() == before, (method, url, point, "changed something")
    assert honoured == {
        "GET /v1/tools",
        "POST /v1/tools/memory_list",
        "GET /v1/ledger/items",
        "POST /v1/sessions/t1/start",
        "POST /v1/sessions/t1/pre-turn",
    }


def test_a_bad_point_is_a_400_naming_it_on_every_route(world: World) -> None:
    document = world.server.app.openapi()
    before = world.state()
    for method, url, body, _ in world.requests(document):
        with world.server.client(world.token(url)) as c:
            for point, parameter in BAD:
                r = c.request(method, f"{url}?{point}", json=body if method == "POST" else None)
                assert r.status_code == 400 and _names(r, parameter), (method, url, r.text)
    assert world.state() == before


@contextlib.asynccontextmanager
async def _mcp(world: World, query: str) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {world.agent}"}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(f"{world.server.url}/mcp?{query}", http_client=http)
        async with Client(transport, mode="legacy") as client:
            yield client


async def test_mcp_honours_a_point_in_every_method_and_records_nothing(world: World) -> None:
    before = await asyncio.to_thread(world.state)
    for point in POINTS:
        async with _mcp(world, point) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert "memory_store" not in listed and "memory_list" in listed
            for name in ("memory_store", "memory_forget"):
                refused = await client.call_tool(name, {"ids": [world.item]})
                assert refused.is_error, name
            assert not (await client.call_tool("memory_list", {})).is_error
            await client.read_resource("memory://context")
            await client.get_prompt("session_start", {"thread": "t1"})
    for point, parameter in BAD:
        async with _mcp(world, point) as client:
            with pytest.raises(MCPError, match=f"`{parameter}"):
                await client.list_tools()
            called = await client.call_tool("memory_store", {"learning": {"text": "x"}})
            assert called.is_error and f"`{parameter}" in str(called.content), called
            with pytest.raises(MCPError, match=f"`{parameter}"):
                await client.read_resource("memory://context")
            with pytest.raises(MCPError, match=f"`{parameter}"):
                await client.get_prompt("session_start", {"thread": "t1"})
    assert await asyncio.to_thread(world.state) == before


#: Each parameter longer than HTTP's bound on it; a size or step of 5,000 digits once
#: reached int() through /mcp and came back as an internal error (code 0, Python's text).
LONG = [
    ("as_of=" + "1" * 5000, "as_of"),
    ("as_of_run=r1&as_of_step=" + "9" * 5000, "as_of_step"),
    ("as_of=" + "1" * 41, "as_of"),
    ("as_of_time=2000-01-01T00:00:00" + "0" * 60 + "Z", "as_of_time"),
    ("as_of_run=" + "r" * 201 + "&as_of_step=0", "as_of_run"),
]


async def test_mcp_refuses_an_over_long_point_by_name_as_http_does(world: World) -> None:
    before = await asyncio.to_thread(world.state)
    for point, parameter in LONG:
        refusal = f"`{parameter}` is longer than"
        async with _mcp(world, point) as client:
            with pytest.raises(MCPError, match=refusal) as raised:
                await client.list_tools()
            assert raised.value.error.code == -32602, raised.value.error
            called = await client.call_tool("memory_list", {})
            assert called.is_error and refusal in str(called.content), called
    assert await asyncio.to_thread(world.state) == before
