"""A write freeze reaches every layer, on SQLite and PostgreSQL.

A host freezes an agent (``frozen=True``) to stop its memory changing, for an
incident or an audit. The freeze held for the seven tools alone: a
``MemoryLayout`` had no freeze to hand its roles, a session's turns and
compactions went on being written, a ``JobQueue`` refused a frozen scope outright
(so a frozen agent's builds had nowhere to wait), and over MCP a frozen scope's
write tools were described and hinted as writes, so a client asked a person to
approve a call that could only be refused. Now every writer role of a frozen
layout is frozen, a frozen session writes nothing, a frozen queue holds its jobs
until a queue of the unfrozen scope runs them, and MCP says a refused tool is
refused, in its description, its hints and its ``_meta``.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp
import pytest
from _runs_support import ServerThread

from memseal.apps.lifecycle import AgentMemory, JobQueue, MemoryLayout
from memseal.memory import Memory
from memseal.service.mcp import stdio_server_for
from memseal.tools import Refusal, mcp_server

LIVE = MemoryLayout(tenant="acme")
AGENT = "writer"
TURN = "I live in Porto."


def _frozen() -> MemoryLayout:
    """The tenant's layout under a write freeze (built in each test: a layout had none)."""
    return MemoryLayout(tenant="acme", frozen=True)


async def _stored_since(memory: Memory, start: int) -> Counter[str]:
    size = await memory.ledger.size()
    kinds = [(await memory.ledger.read(seq)).entry().kind for seq in range(start, size)]
    return Counter(kind for kind in kinds if kind in ("memory_stored", "memory_forgotten"))


def test_every_writer_role_of_a_frozen_layout_is_frozen() -> None:
    frozen = _frozen()
    for scope in (
        frozen.agent_writer(AGENT),
        frozen.learnings_writer(AGENT),
        frozen.brain_writer("handbook"),
        frozen.thread_writer(AGENT, "t1"),
    ):
        assert scope.frozen and scope.writes
    assert not LIVE.agent_writer(AGENT).frozen
    # A reader never writes: frozen or not, it is the live layout's, so its runs are shared.
    assert frozen.brain_reader() == LIVE.brain_reader() and frozen.auditor() == LIVE.auditor()


async def test_a_frozen_session_reads_and_writes_nothing(memory: Memory) -> None:
    before = await memory.ledger.size()
    session = AgentMemory(memory, _frozen(), agent=AGENT, thread="t1")
    try:
        await session.start()
        await session.pre_turn("Where do I live?", turn=1)
        with pytest.raises(Refusal) as refused:
            await session.post_turn(turn=1, user=TURN, assistant="Noted.")
        assert refused.value.code == "frozen"
        with pytest.raises(Refusal) as refused:
            await session.compact(turn=1, keep=0)
        assert refused.value.code == "frozen"
        # The model's own tools: offered, refused before any approval, refused when called.
        toolset = session.tools.toolset()
        refusal = toolset.refusal_before_approval("memory_store")
        assert refusal is not None and refusal.code == "frozen"
        answer = await toolset.call("memory_store", {"learning": {"text": "a note"}})
        assert answer.startswith("error: memory_store:") and "frozen" in answer
        assert "Writes are frozen" in await session.briefing()
    finally:
        await session.close()
    assert await _stored_since(memory, before) == Counter()
    await memory.verify(deep=True)


async def test_a_frozen_queue_holds_its_jobs_until_the_live_scope_runs_them(
    memory: Memory,
) -> None:
    thread = memory.tools(LIVE.thread_writer(AGENT, "t1"))
    turn = await thread.call(
        "memory_store", {"conversation": {"turns": [{"role": "user", "text": TURN}]}}
    )
    held = JobQueue(memory, _frozen().learnings_writer(AGENT))
    job = await held.enqueue("beliefs", thread="t1", source_ids=[turn["id"]])
    before = await memory.ledger.size()
    (outcome,) = await held.run_pending()
    assert outcome.state == "held" and "frozen" in (outcome.error or "")
    assert (await held.run_job(job)).state == "held"
    with pytest.raises(Refusal) as refused:
        await held.retract(turn["id"], reason="a frozen agent takes nothing back")
    assert refused.value.code == "frozen"
    assert await _stored_since(memory, before) == Counter()
    (pending,) = (await held.status()).pending
    assert pending.id == job.id and pending.attempts == 0  # held: no attempt was spent
    # Unfrozen, the same job runs, once.
    (done,) = await JobQueue(memory, LIVE.learnings_writer(AGENT)).run_pending()
    assert done.state == "done" and len(done.learned) == 1
    # A strict replay writes nothing, so a frozen queue may check a job's run.
    (finished,) = (await held.status()).done
    assert await held.replay_job(finished) == done
    await memory.verify(deep=True)


def _assert_marked_refused(tools: list[Any]) -> None:
    by_name = {tool.name: tool for tool in tools}
    for name in ("memory_store", "memory_forget"):
        tool = by_name[name]
        assert tool.description.startswith("Refused: "), tool.description
        assert "frozen" in tool.description
        assert tool.annotations.read_only_hint is True  # no approval asked for a no-op
        assert tool.annotations.destructive_hint is False
        assert (tool.meta or {}).get("memseal/refusal") == "frozen"
    fetch = by_name["memory_fetch"]
    assert fetch.annotations.read_only_hint is True and not (fetch.meta or {})


async def test_mcp_marks_a_frozen_scopes_write_tools_refused(memory: Memory) -> None:
    frozen = _frozen().agent_writer(AGENT)
    async with mcp.Client(mcp_server(memory.tools(frozen).toolset())) as client:
        _assert_marked_refused((await client.list_tools()).tools)
        stored = await client.call_tool("memory_store", {"learning": {"text": "x"}})
        assert stored.is_error
    async with memory.run("frozen-stdio", frozen) as run:
        server = stdio_server_for(run, memory=memory, scope=frozen)
        async with mcp.Client(server) as client:
            _assert_marked_refused((await client.list_tools()).tools)
    # The live scope's writes stay writes: hinted so, and described as ever.
    async with mcp.Client(mcp_server(memory.tools(LIVE.agent_writer(AGENT)).toolset())) as client:
        store = {t.name: t for t in (await client.list_tools()).tools}["memory_store"]
        assert store.annotations is not None and store.annotations.read_only_hint is False
        assert not (store.description or "").startswith("Refused") and not store.meta


@contextlib.asynccontextmanager
async def _http(server: ServerThread, token: str) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        async with mcp.Client(transport, mode="legacy") as client:
            yield client


async def test_the_services_mcp_marks_a_frozen_tokens_write_tools_refused(
    tmp_path: Path, store_url: str | None
) -> None:
    with ServerThread(tmp_path / "d", store=store_url) as server:
        token = server.token("agent", LIVE.agent(AGENT), frozen=True)
        async with _http(server, token) as client:
            _assert_marked_refused((await client.list_tools()).tools)
            refused = await client.call_tool("memory_forget", {"ids": ["x"]})
            assert refused.is_error
