"""An MCP session takes over a run while an HTTP call of that run is still in flight.

A session's first call closes the run any other client holds, so its steps never
interleave with theirs. It used to fail at once ("has calls in flight") when
another client's call was still running: under load the same-key race of
test_keyed_review failed so. The takeover now waits for those calls to finish.
The HTTP call is held in flight by an embedder that blocks until released (a
real embedder of the protocol, a real server on loopback, a real MCP client).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _runs_support import ServerThread
from test_mcp_service import _http, _text

from memseal.engine.embedders import HashingEmbedder


class _HeldEmbedder:
    """HashingEmbedder that holds any text saying "hold" until ``release`` is set."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder(dim=32)
        self.id = f"held/{self._inner.id}"
        self.dim = self._inner.dim
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if any("hold" in t for t in texts):
            self.entered.set()
            assert self.release.wait(30), "the test never released the held call"
        return self._inner.embed(texts)


@pytest.fixture
def held() -> _HeldEmbedder:
    return _HeldEmbedder()


@pytest.fixture
def server(tmp_path: Path, store_url: str | None, held: _HeldEmbedder) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "svc", store=store_url, embedder=held) as running:
        yield running


async def test_a_session_waits_for_another_clients_call_in_flight(
    server: ServerThread, held: _HeldEmbedder
) -> None:
    token = server.token("agent", "team:k/agent:x")
    body = {"learning": {"text": "hold this one, stored once"}}

    def over_http() -> Any:
        with server.client(token) as c:
            r = c.post(
                "/v1/tools/memory_store",
                json=body,
                headers={"X-Memseal-Run": "shared", "X-Memseal-Key": "call_1"},
            )
            assert r.status_code == 200, r.text
            assert r.json()["step"] == 0
            return r.json()["result"]

    in_flight = asyncio.create_task(asyncio.to_thread(over_http))
    assert await asyncio.to_thread(held.entered.wait, 30), "the HTTP call never started"
    async with _http(server, token, run="shared") as client:
        first = asyncio.create_task(
            client.call_tool("memory_store", body, meta={"memseal/key": "call_1"})
        )
        await asyncio.sleep(0.3)  # the takeover has begun and is waiting, not refused
        assert not first.done()
        held.release.set()
        done = await first
        assert not done.is_error, _text(done)
    assert await in_flight == json.loads(_text(done))
    with server.client(token) as c:
        run = c.get("/v1/runs/shared").json()
        listed = c.post("/v1/tools/memory_list", json={}).json()["result"]
    assert run["recorded_steps"] == 1
    assert json.dumps(listed).count("stored once") == 1
