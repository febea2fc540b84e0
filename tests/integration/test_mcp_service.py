"""A real MCP client (the ``mcp`` package) over stdio (``memseal mcp``) and streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_service_support import ServerThread

BIN = Path(sys.executable).parent


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def _stdio(folder: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "memseal"),
        args=["mcp", "--data", str(folder), "--embedder", "none", *extra],
    )


async def test_stdio_lists_calls_and_resumes_its_run(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    params = _stdio(folder, "--place", "team:acme/agent:writer", "--run", "stdio-run")
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "memory_store" in names and "memory_fetch" in names
        stored = await client.call_tool(
            "memory_store", {"learning": {"text": "Dana prefers dark mode"}}
        )
        assert not stored.is_error
        first = json.loads(_text(stored))
        found = await client.call_tool("memory_fetch", {"query": "dark mode", "mode": "exact"})
        assert first["id"] in _text(found)
        bad = await client.call_tool("memory_fetch", {"query": "x", "namespace": "team:other"})
        assert bad.is_error and "namespace" in _text(bad)
    # A resumed session (same run) replays its recorded steps: same results, no new memory.
    async with Client(params) as client:
        again = await client.call_tool(
            "memory_store", {"learning": {"text": "Dana prefers dark mode"}}
        )
        assert json.loads(_text(again)) == first
        # A different call at a recorded step fails closed, as an isError result.
        diverged = await client.call_tool("memory_list", {})
        assert diverged.is_error or "error" in _text(diverged)


async def test_stdio_read_only_scope_offers_no_writes(tmp_path: Path) -> None:
    params = _stdio(tmp_path / "data", "--place", "team:acme/agent:reader", "--read-only")
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "memory_store" not in names and "memory_forget" not in names
        refused = await client.call_tool("memory_store", {"learning": {"text": "x"}})
        assert refused.is_error


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "data") as running:
        yield running


@contextlib.asynccontextmanager
async def _http(server: ServerThread, token: str, run: str | None = None) -> AsyncIterator[Any]:
    """An MCP client over streamable HTTP with the bearer token (and a run) in its headers."""
    headers = {"Authorization": f"Bearer {token}"}
    if run is not None:
        headers["X-Memseal-Run"] = run
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:
            yield client


async def test_streamable_http_is_scoped_by_the_bearer_token(server: ServerThread) -> None:
    a = server.token("agent", "team:a/agent:x")
    b = server.token("agent", "team:b/agent:y", read_only=True)
    async with _http(server, a) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "memory_store" in names
        stored = await client.call_tool("memory_store", {"learning": {"text": "A's memory"}})
        assert not stored.is_error
        item = json.loads(_text(stored))["id"]
        bad = await client.call_tool("memory_get", {"ids": "nope"})
        assert bad.is_error and _text(bad).startswith("error:")
    async with _http(server, b) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "memory_store" not in names
        got = await client.call_tool("memory_get", {"ids": [item]})
        assert item not in json.loads(_text(got)).get("items", []) and "A's memory" not in _text(
            got
        )


def test_streamable_http_refuses_bad_tokens_and_other_roles(server: ServerThread) -> None:
    import httpx

    auditor = server.token("auditor", "team:a")
    with httpx.Client(base_url=server.url) as c:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        r = c.post("/mcp", json=body)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = c.post("/mcp", json=body, headers={"Authorization": f"Bearer {auditor}"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


async def test_an_mcp_session_is_a_run_and_a_resumed_session_replays_it(
    server: ServerThread,
) -> None:
    token = server.token("agent", "team:a/agent:x")
    async with _http(server, token, run="mcp-resume") as client:
        first = await client.call_tool("memory_store", {"learning": {"text": "resume me"}})
        listed = await client.call_tool("memory_list", {})
    with server.client(token) as c:
        status = c.get("/v1/runs/mcp-resume").json()
        assert status["recorded_steps"] == 2
        c.delete("/v1/runs/mcp-resume")  # the next session opens the run afresh
    with server.client(server.admin) as admin:
        size = admin.get("/v1/ledger").json()["size"]
    async with _http(server, token, run="mcp-resume") as client:
        again = await client.call_tool("memory_store", {"learning": {"text": "resume me"}})
        relisted = await client.call_tool("memory_list", {})
    assert _text(again) == _text(first) and _text(relisted) == _text(listed)
    with server.client(server.admin) as admin:
        page = admin.get("/v1/ledger/entries", params={"start": size}).json()["entries"]
    # Replayed from the memo: no new tool call and no new memory (a run_started at most).
    assert {e["kind"] for e in page} <= {"run_started"}


async def test_the_modern_protocol_maps_the_run_header_to_a_run(server: ServerThread) -> None:
    token = server.token("agent", "team:m/agent:x")
    headers = {"Authorization": f"Bearer {token}", "X-Memseal-Run": "modern-run"}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        async with Client(transport) as client:  # mode="auto": the newest protocol it can
            stored = await client.call_tool("memory_store", {"learning": {"text": "modern"}})
            assert not stored.is_error
            bad = await client.call_tool("memory_get", {"ids": "x"})
            assert bad.is_error
    with server.client(token) as c:
        assert c.get("/v1/runs/modern-run").json()["recorded_steps"] == 2
