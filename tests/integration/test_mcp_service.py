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
        # A JSON-RPC error (so the SDK shows it), the service's code in its data.
        r = c.post("/mcp", json=body)
        assert r.status_code == 401 and r.json()["error"]["data"]["code"] == "unauthorized"
        assert r.json()["jsonrpc"] == "2.0" and r.headers["www-authenticate"] == "Bearer"
        r = c.post("/mcp", json=body, headers={"Authorization": f"Bearer {auditor}"})
        assert r.status_code == 403 and r.json()["error"]["data"]["code"] == "forbidden"
        assert "an auditor token cannot use MCP" in r.text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_auth_failure_reads_as_such_through_the_sdk(
    server: ServerThread, mode: str
) -> None:
    from mcp import MCPError

    auditor = server.token("auditor", "team:a")
    for token, words in (("ms_not-a-token", "unauthorized"), (auditor, "agent tokens only")):
        headers = {"Authorization": f"Bearer {token}"}
        with pytest.raises(BaseException) as caught:
            async with create_mcp_http_client(headers=headers) as http:
                transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
                async with Client(transport, mode=mode) as client:  # type: ignore[arg-type]
                    await client.list_tools()
        found: BaseException = caught.value
        while isinstance(found, BaseExceptionGroup):  # the SDK's task groups wrap it
            found = found.exceptions[0]
        assert isinstance(found, MCPError), repr(caught.value)
        assert words in str(found) and "Server returned an error response" not in str(found)


async def test_an_mcp_session_is_a_run_and_a_resumed_session_replays_it(
    server: ServerThread,
) -> None:
    token = server.token("agent", "team:a/agent:x")
    async with _http(server, token, run="mcp-resume") as client:
        first = await client.call_tool("memory_store", {"learning": {"text": "resume me"}})
        listed = await client.call_tool("memory_list", {})
    with server.client(token) as c:
        status = c.get("/v1/runs/mcp-resume").json()
        assert status["recorded_steps"] == 2 and status["held_here"]
    # No DELETE, no restart: the server still holds the run, and a new session replays.
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


async def test_a_new_session_replays_its_run_although_the_server_holds_it(
    server: ServerThread,
) -> None:
    token = server.token("agent", "team:a/agent:held")
    async with _http(server, token, run="held") as client:
        first = await client.call_tool("memory_store", {"learning": {"text": "held one"}})
    with server.client(server.admin) as admin:
        size = admin.get("/v1/ledger").json()["size"]
    async with _http(server, token, run="held") as client:
        again = await client.call_tool("memory_store", {"learning": {"text": "held one"}})
        assert _text(again) == _text(first)
        # Past the recording the session goes on live, as the run's next step.
        more = await client.call_tool("memory_store", {"learning": {"text": "held two"}})
        assert not more.is_error
    with server.client(token) as c:
        assert c.get("/v1/runs/held").json()["recorded_steps"] == 2
    async with _http(server, token, run="held") as client:
        # A different first call is a divergence from step 0, whatever the server held.
        diverged = await client.call_tool("memory_list", {})
        assert diverged.is_error and "step 0: a different call" in _text(diverged)
    with server.client(server.admin) as admin:
        page = admin.get("/v1/ledger/entries", params={"start": size}).json()["entries"]
    kinds = [e["kind"] for e in page]
    assert kinds.count("memory_stored") == 1, kinds


async def test_a_key_in_meta_answers_its_memo_in_any_order_in_a_new_session(
    server: ServerThread,
) -> None:
    token = server.token("agent", "team:k/agent:mcp")
    fetch = {"query": "keyed over mcp", "mode": "exact"}
    learned = {"learning": {"text": "keyed over mcp"}}

    def key(value: object) -> Any:
        return {"memseal/key": value}

    async with _http(server, token, run="mcp-keys") as client:
        first = await client.call_tool("memory_fetch", fetch, meta=key("call_f0"))
        stored = await client.call_tool("memory_store", learned, meta=key("call_s"))
        assert not first.is_error and json.loads(_text(first))["hits"] == []
    with server.client(server.admin) as admin:
        size = admin.get("/v1/ledger").json()["size"]
    async with _http(server, token, run="mcp-keys") as client:
        # A new session replays the run by key, in its own order: the memos.
        again = await client.call_tool("memory_store", learned, meta=key("call_s"))
        replayed = await client.call_tool("memory_fetch", fetch, meta=key("call_f0"))
        assert (_text(again), _text(replayed)) == (_text(stored), _text(first))
        with server.client(server.admin) as admin:
            page = admin.get("/v1/ledger/entries", params={"start": size}).json()["entries"]
        assert {e["kind"] for e in page} <= {"run_started"}
        # A new key with step 0's arguments runs live and finds the store.
        fresh = await client.call_tool("memory_fetch", fetch, meta=key("call_f1"))
        assert [h["text"] for h in json.loads(_text(fresh))["hits"]] == ["keyed over mcp"]
        diverged = await client.call_tool("memory_fetch", {"query": "x"}, meta=key("call_f0"))
        assert diverged.is_error and "call_f0" in _text(diverged)
        with server.client(server.admin) as admin:
            size = admin.get("/v1/ledger").json()["size"]
        for bad in ("", "k" * 201, 7):
            refused = await client.call_tool("memory_list", {}, meta=key(bad))
            assert refused.is_error and "`key`" in _text(refused), _text(refused)
        with server.client(server.admin) as admin:
            assert admin.get("/v1/ledger").json()["size"] == size


def _key(value: str) -> Any:
    # The SDK types `_meta` as a TypedDict with open extra items; memseal's key is one.
    return {"memseal/key": value}


async def test_stdio_keys_a_call_by_its_meta_key(tmp_path: Path) -> None:
    params = _stdio(tmp_path / "data", "--place", "team:acme/agent:writer", "--run", "k-run")
    fetch = {"query": "stdio keyed", "mode": "exact"}
    async with Client(params) as client:
        first = await client.call_tool("memory_fetch", fetch, meta=_key("c0"))
        await client.call_tool(
            "memory_store", {"learning": {"text": "stdio keyed"}}, meta=_key("c1")
        )
    async with Client(params) as client:
        # Resumed out of order by key: step 0's own id gets step 0's result.
        again = await client.call_tool("memory_fetch", fetch, meta=_key("c0"))
        assert _text(again) == _text(first)
        fresh = await client.call_tool("memory_fetch", fetch, meta=_key("c2"))
        assert "stdio keyed" in _text(fresh) and _text(fresh) != _text(first)


async def test_a_session_whose_run_a_newer_session_took_is_told_so(
    server: ServerThread,
) -> None:
    token = server.token("agent", "team:a/agent:two")
    async with _http(server, token, run="shared") as old:
        await old.call_tool("memory_store", {"learning": {"text": "old session"}})
        async with _http(server, token, run="shared") as new:
            replayed = await new.call_tool("memory_store", {"learning": {"text": "old session"}})
            assert not replayed.is_error
        refused = await old.call_tool("memory_list", {})
        assert refused.is_error and "taken over by a newer MCP session" in _text(refused)


async def test_stdio_at_end_of_input_answers_every_call_in_flight(tmp_path: Path) -> None:
    import asyncio

    from memseal.memory import open as open_memory

    folder = tmp_path / "data"
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "pipe", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ] + [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "memory_store", "arguments": {"learning": {"text": f"fact {i}"}}},
        }
        for i in range(1, 6)
    ]
    process = await asyncio.create_subprocess_exec(
        str(BIN / "memseal"),
        *["mcp", "--data", str(folder), "--embedder", "none"],
        *["--place", "team:a/agent:pipe", "--run", "piped"],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    out, err = await asyncio.wait_for(process.communicate(data), timeout=120)  # stdin closed
    assert process.returncode == 0, err
    answers = {a["id"]: a for a in map(json.loads, out.decode().splitlines())}
    assert sorted(answers) == [0, 1, 2, 3, 4, 5], answers
    for i in range(1, 6):
        assert "result" in answers[i] and not answers[i]["result"]["isError"], answers[i]
    memory = await open_memory(folder, embedder=None)
    try:
        rows = await memory.ledger.store.rows(
            "SELECT count(*) FROM memos WHERE run_id = ?", ("piped",)
        )
    finally:
        await memory.close()
    assert int(rows[0][0]) == 5


async def test_stdio_serves_the_brief_as_a_resource_and_session_start_as_a_prompt(
    tmp_path: Path,
) -> None:
    agent = "team:acme/agent:helper"
    folder = tmp_path / "data"
    params = _stdio(folder, "--place", agent, "--reach", "subtree:team:acme", "--run", "model")
    async with Client(params) as client:
        stored = await client.call_tool(
            "memory_store", {"learning": {"text": "Ana prefers short answers."}}
        )
        assert not stored.is_error, _text(stored)
        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == ["memory://context"]
        read = await client.read_resource("memory://context")
        brief = read.contents[0].text  # type: ignore[union-attr]
        assert "# Your memory" in brief and "`memory_store`" in brief
        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["session_start"]
        got = await client.get_prompt("session_start", {"thread": "t1"})
        shown = got.messages[0].content.text  # type: ignore[union-attr]
        assert "# Memory at session start" in shown and "Ana prefers short answers." in shown
        # Asked again, the same start (its recorded memo), and the model's run is untouched.
        again = await client.get_prompt("session_start", {"thread": "t1"})
        assert again.messages[0].content.text == shown  # type: ignore[union-attr]
        with pytest.raises(Exception, match="`thread` is required"):
            await client.get_prompt("session_start", {})
        with pytest.raises(Exception, match="no resource"):
            await client.read_resource("memory://elsewhere")
    # The model's run holds only the model's own call: the brief and the start ran apart.
    async with Client(params) as client:
        replayed = await client.call_tool(
            "memory_store", {"learning": {"text": "Ana prefers short answers."}}
        )
        assert _text(replayed) == _text(stored)
    # A scope whose reach does not cover the session is told what to give it.
    narrow = _stdio(tmp_path / "data", "--place", agent, "--run", "narrow")
    async with Client(narrow) as client:
        with pytest.raises(Exception, match="reach"):
            await client.get_prompt("session_start", {"thread": "t1"})
