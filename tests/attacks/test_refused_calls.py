"""A refused or invalid call costs no storage and keeps nothing secret.

A failed call (refused by the scope, invalid arguments, arguments that are not
JSON, no such tool) is recorded as a signed error step whose payload keeps no
arguments: only their keyed input hash and size (in the body), a salted
digest (what a bundle replay matches the call against) and the bounded error.
So a stream of refused 500 KB stores grows the ledger by a size-independent
amount per call, and a text sent in a refused call is nowhere in the store.
Strict replay, bundle export, verification, the bundle replayer and regress
still work for runs with such steps. Every test runs on each store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from _runs_support import ServerThread, exported

import memseal
from memseal import InvalidRequest, MemsealError, ReplayDivergence, ToolScope
from memseal.memory import Memory
from memseal.replay.regress.regress import regress
from memseal.replay.regress.replayer import Replayer
from memseal.replay.runs.calls import decode_tool_call, decode_tool_call_payload

PLACE = "team:acme/agent:reader"
READER = ToolScope.placed_at(PLACE, writes=False)
WRITER = ToolScope.placed_at("team:acme/agent:writer")
# Per refused call: one signed entry, its small payload, its tree hashes, its memo row.
PER_CALL_BOUND = 4096


async def _stored_bytes(memory: Memory, start: int) -> int:
    """What the log keeps for its entries from ``start`` on: entry bytes and payloads."""
    total = 0
    async for record in memory.ledger.store.scan(start):
        total += len(record.leaf) + len(record.payload or b"")
    return total


def _file_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("ledger.db*"))


async def _refuse_many(memory: Memory, run_id: str, count: int, size: int) -> tuple[int, int]:
    """``count`` refused stores of ``size`` bytes: (entries, bytes) the log grew by."""
    start = (await memory.ledger.head()).size
    async with memory.run(run_id, READER) as run:
        for i in range(count):
            with pytest.raises(MemsealError):
                await run.call("memory_store", {"learning": {"text": f"{i} " + "q" * size}})
    end = (await memory.ledger.head()).size
    return end - start, await _stored_bytes(memory, start)


async def test_read_only_tokens_refused_500kb_stores_cost_bounded_storage(
    memory: Memory, store_url: str | None
) -> None:
    files_before = _file_bytes(memory.folder)
    entries, big = await _refuse_many(memory, "refused-big", 100, 500_000)
    files_after = _file_bytes(memory.folder)
    _, small = await _refuse_many(memory, "refused-small", 100, 5_000)
    print(
        f"\n100 refused 500 KB stores: {entries} entries, {big} bytes in the log "
        f"({big / 100:.0f} a call; 100 refused 5 KB stores: {small} bytes)"
        + ("" if store_url else f"; ledger.db and its WAL grew {files_after - files_before} bytes")
    )
    assert entries <= 101  # the run's start and one error step a call
    assert big <= 100 * PER_CALL_BOUND
    # Independent of what was sent: 100x the arguments, (nearly) the same bytes.
    assert abs(big - small) <= 100 * 64
    if store_url is None:
        # The files also hold the WAL's page images of each commit (a few pages, whatever
        # was sent); one kept copy of the arguments would be 500 KB a call.
        assert files_after - files_before <= 100 * 64 * 1024


def test_read_only_token_refused_500kb_stores_over_http_keep_no_copy(
    tmp_path: Path, store_url: str | None
) -> None:
    with ServerThread(tmp_path / "svc", store=store_url) as server:
        token = server.token("agent", PLACE, read_only=True)
        memory = server.app.state.service.memory
        with server.client(server.admin) as admin:
            start = admin.get("/v1/ledger").json()["size"]
        with server.client(token) as c:
            for i in range(20):
                r = c.post(
                    "/v1/tools/memory_store",
                    json={"learning": {"text": f"secret-{i} " + "z" * 500_000}},
                    headers={"X-Memseal-Run": "http-refused"},
                )
                assert r.status_code in (400, 403), r.text
            exported = c.get("/v1/runs/http-refused/export")
            assert exported.status_code == 200, exported.text
            assert len(exported.content) < 20 * PER_CALL_BOUND + 64 * 1024
            assert b"zzzzzzzz" not in exported.content
        with server.client(server.admin) as admin:
            entries = admin.get(
                "/v1/ledger/entries", params={"start": start, "stop": start + 100}
            ).json()
        assert "zzzzzzzz" not in str(entries)
        if store_url is None:
            raw = b"".join(p.read_bytes() for p in memory.folder.glob("ledger.db*"))
            assert b"zzzzzzzz" not in raw and b"secret-3 " not in raw


async def test_junk_arguments_leave_no_copy_in_the_ledger(memory: Memory) -> None:
    junk = '{"learning": {"text": "' + "hunter2-" * 60_000  # cut off: not JSON
    async with memory.run("junk", WRITER) as run:
        with pytest.raises(InvalidRequest, match="not valid JSON"):
            await run.call("memory_store", junk)
        with pytest.raises(InvalidRequest):
            await run.call("no such tool!", {"text": "hunter2-" * 10})
    seen = []
    async for record in memory.ledger.store.scan(0):
        entry = record.entry()
        if entry.kind != "memory_tool_call":
            continue
        body = decode_tool_call(bytes(entry.body))
        assert record.payload is not None
        payload = decode_tool_call_payload(record.payload)
        assert body.error and payload.arguments is None
        assert b"hunter2" not in record.payload and b"hunter2" not in record.leaf
        seen.append(body.input_size)
    assert seen == [len(junk.encode()), len(msgspec.json.encode({"text": "hunter2-" * 10}))]
    if memory.ledger.store.dialect == "sqlite":
        raw = b"".join(p.read_bytes() for p in memory.folder.glob("ledger.db*"))
        assert b"hunter2-hunter2" not in raw


SCRIPT: list[tuple[str, Any]] = [
    ("memory_store", {"learning": {"text": "the standup moved to ten"}}),
    ("memory_fetch", {"query": "standup", "limit": 0}),  # invalid: out of range
    ("memory_fetch", '{"query": "standup"'),  # not JSON
    ("memory_fetch", {"query": "standup", "namespace": "team:other"}),  # refused key
    ("memory_list", {}),
]


async def _play(run: Any, script: list[tuple[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for name, arguments in script:
        try:
            out.append(("ok", await run.call(name, arguments)))
        except (InvalidRequest, memseal.Unsupported, memseal.NotFound) as exc:
            out.append(("error", type(exc).__name__, str(exc)))
    return out


async def test_runs_with_refused_steps_replay_export_and_verify(memory: Memory) -> None:
    async with memory.run("mixed", WRITER) as run:
        recorded = await _play(run, SCRIPT)
    assert [o[0] for o in recorded] == ["ok", "error", "error", "error", "ok"]
    # Strict replay: the same outcomes, errors included; nothing written.
    size = (await memory.ledger.head()).size
    async with memory.run("mixed", WRITER, mode="strict") as run:
        assert await _play(run, SCRIPT) == recorded
    assert (await memory.ledger.head()).size == size
    # Another bad call at a failed step is a divergence, matched on the input hash.
    other = list(SCRIPT)
    other[1] = ("memory_fetch", {"query": "standup", "limit": 1000})
    with pytest.raises(ReplayDivergence, match="not kept"):
        async with memory.run("mixed", WRITER, mode="strict") as run:
            await _play(run, other)
    # The bundle verifies; the bundle replayer matches failed steps on their digest.
    verified = await exported(memory, "mixed")
    assert [c.call.error for c in verified.calls] == [False, True, True, True, False]
    assert all(c.arguments is None and c.withheld for c in verified.calls if c.call.error)

    async def agent(run: Any) -> list[Any]:
        return await _play(run, SCRIPT)

    assert await Replayer(verified).run(agent) == recorded

    async def other_agent(run: Any) -> list[Any]:
        return await _play(run, other)

    with pytest.raises(ReplayDivergence):
        await Replayer(verified).run(other_agent)
    report = await regress(verified)
    statuses = [(s.step, s.status) for s in report.steps]
    assert statuses == [(0, "skipped"), (1, "skipped"), (2, "skipped"), (3, "skipped"), (4, "same")]
