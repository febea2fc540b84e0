"""Steps never leave a gap: a step named beyond the next is refused, a failed call gives its back.

An exported run must hold every step from 0 to its last (a bundle with a gap
fails ``completeness``), so a gap is refused where it would be made:

* a call that names a step beyond the next unrecorded one (``X-Memseal-Step``
  over HTTP, ``run.call_at`` in Python) gets a 409 / :class:`Conflict`
  naming the step expected, and records nothing;
* a call the store refuses (a storage error: nothing committed) consumes no
  step: the next call takes it, and the run's bundle verifies.

MCP clients cannot name a step (the server numbers them), so only the second
rule applies there. Every test runs on each store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _runs_support import FailOnce, ServerThread, assert_error, exported

from memseal import Conflict, StorageError, ToolScope
from memseal.memory import Memory
from memseal.replay.evidence.bundle import verify_bundle

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
PLACE = "team:acme/agent:writer"


def _store(text: str) -> dict[str, object]:
    return {"learning": {"text": text}}


@pytest.fixture
def server(tmp_path: Path, store_url: str | None) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "svc", store=store_url) as running:
        yield running


def test_http_step_beyond_the_next_is_refused_and_the_export_verifies(
    server: ServerThread,
) -> None:
    with server.client(server.token("agent", PLACE)) as c, server.client(server.admin) as admin:
        r = c.post(
            "/v1/tools/memory_store",
            json=_store("step zero"),
            headers={"X-Memseal-Run": "gappy", "X-Memseal-Step": "0"},
        )
        assert r.status_code == 200, r.text
        size = admin.get("/v1/ledger").json()["size"]
        for step in (5, 1_000_000, 2):
            r = c.post(
                "/v1/runs/gappy/tools/memory_list",
                json={},
                headers={"X-Memseal-Step": str(step)},
            )
            body = assert_error(r, 409, "conflict")
            assert "the next step is 1" in body["error"]["message"], body
        assert admin.get("/v1/ledger").json()["size"] == size, "a refused step wrote something"
        # The next step, and a step already recorded (replayed), are served.
        r = c.post("/v1/runs/gappy/tools/memory_list", json={}, headers={"X-Memseal-Step": "1"})
        assert r.status_code == 200 and r.json()["step"] == 1, r.text
        r = c.post("/v1/runs/gappy/tools/memory_store", json=_store("step zero"))
        assert r.json()["step"] == 2
        r = c.post(
            "/v1/runs/gappy/tools/memory_store",
            json=_store("step zero"),
            headers={"X-Memseal-Step": "0"},
        )
        assert r.status_code == 200, r.text
        exported = c.get("/v1/runs/gappy/export")
        assert exported.status_code == 200, exported.text
        verified = verify_bundle(exported.content, server.app.state.service.memory.trust_root)
        assert [call.call.step for call in verified.calls] == [0, 1, 2]


async def test_python_call_at_beyond_the_next_step_is_refused(memory: Memory) -> None:
    async with memory.run("explicit", SCOPE) as run:
        await run.call_at(0, "memory_list", {})
        size = (await memory.ledger.head()).size
        with pytest.raises(Conflict, match="step 7 would leave a gap; the next step is 1"):
            await run.call_at(7, "memory_list", {})
        assert (await memory.ledger.head()).size == size
        await run.call_at(1, "memory_list", {})
    # Reopened, the run continues at its next unrecorded step, and no further.
    async with memory.run("explicit", SCOPE) as run:
        with pytest.raises(Conflict, match="the next step is 2"):
            await run.call_at(3, "memory_list", {})
        await run.call_at(2, "memory_list", {})
    verified = await exported(memory, "explicit")
    assert [call.call.step for call in verified.calls] == [0, 1, 2]


async def test_storage_failure_mid_run_consumes_no_step(memory: Memory) -> None:
    with FailOnce(memory) as fault:
        async with memory.run("faulty", SCOPE) as run:
            await run.call("memory_store", _store("first memory"))
            await run.call("memory_list", {})
            fault.armed = True
            with pytest.raises(StorageError, match="injected"):
                await run.call("memory_store", _store("second memory"))
            assert fault.fired == 1
            assert run.next_step == 2
            # The run goes on at the step the failed call gave back.
            await run.call("memory_store", _store("second memory"))
            await run.call("memory_fetch", {"query": "memory", "mode": "exact"})
    verified = await exported(memory, "faulty")
    assert [call.call.step for call in verified.calls] == [0, 1, 2, 3]
    # A strict replay of the whole run passes.
    async with memory.run("faulty", SCOPE, mode="strict") as replay:
        await replay.call("memory_store", _store("first memory"))
        await replay.call("memory_list", {})
        await replay.call("memory_store", _store("second memory"))
        await replay.call("memory_fetch", {"query": "memory", "mode": "exact"})


async def test_storage_failure_among_calls_in_flight_is_refilled(memory: Memory) -> None:
    # Three steps taken at once; the first one's write fails after the others were taken.
    with FailOnce(memory) as fault:
        async with memory.run("gathered", SCOPE) as run:
            await run.call("memory_list", {})
            fault.armed = True
            failing = run.call("memory_store", _store("fails once"))
            later = [run.call("memory_list", {}), run.call("memory_list", {})]
            with pytest.raises(StorageError):
                await failing
            for call in later:
                await call
            # The retried call takes the step its failure handed back.
            assert run.next_step == 1
            await run.call("memory_store", _store("fails once"))
    verified = await exported(memory, "gathered")
    assert [call.call.step for call in verified.calls] == [0, 1, 2, 3]


def test_http_storage_failure_consumes_no_step(server: ServerThread) -> None:
    service = server.app.state.service
    with (
        server.client(server.token("agent", PLACE)) as c,
        FailOnce(service.memory) as fault,
    ):
        headers = {"X-Memseal-Run": "http-faulty"}
        r = c.post("/v1/tools/memory_store", json=_store("one"), headers=headers)
        assert r.json()["step"] == 0
        fault.armed = True
        assert_error(
            c.post("/v1/tools/memory_store", json=_store("two"), headers=headers),
            503,
            "storage_unavailable",
        )
        r = c.post("/v1/tools/memory_store", json=_store("two"), headers=headers)
        assert r.status_code == 200 and r.json()["step"] == 1, r.text
        r = c.post("/v1/tools/memory_list", json={}, headers=headers)
        assert r.json()["step"] == 2
        exported = c.get("/v1/runs/http-faulty/export")
        assert exported.status_code == 200, exported.text
        verified = verify_bundle(exported.content, service.memory.trust_root)
        assert [call.call.step for call in verified.calls] == [0, 1, 2]


async def test_mcp_storage_failure_consumes_no_step(server: ServerThread) -> None:
    from test_mcp_service import _http

    service = server.app.state.service
    token = server.token("agent", PLACE)
    with FailOnce(service.memory) as fault:
        async with _http(server, token, run="mcp-faulty") as client:
            assert not (await client.call_tool("memory_store", _store("one"))).is_error
            fault.armed = True
            failed = await client.call_tool("memory_store", _store("two"))
            assert failed.is_error
            assert not (await client.call_tool("memory_store", _store("two"))).is_error
            assert not (await client.call_tool("memory_list", {})).is_error
    with server.client(token) as c:
        bundle = c.get("/v1/runs/mcp-faulty/export")
    assert bundle.status_code == 200, bundle.text
    verified = verify_bundle(bundle.content, service.memory.trust_root)
    assert [call.call.step for call in verified.calls] == [0, 1, 2]
