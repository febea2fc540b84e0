"""The lifecycle never widens a token's reach, and no body names one.

A session reads the thread, the agent's and the team's learnings and the
brain. Served over HTTP, the token must already reach all of them; a
token placed at one agent never reads a sibling agent's conversation,
whatever thread name it asks for; and a body that names a namespace or a
reach is refused with nothing written.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from integration.test_service_support import ServerThread, assert_error

import memseal
from memseal.apps.lifecycle import MemoryLayout
from memseal.engine import Reach

AT = "2026-12-01T09:00:00Z"


def test_an_agent_token_of_its_own_branch_cannot_read_the_brain_through_a_session(
    tmp_path: Path,
) -> None:
    with ServerThread(tmp_path / "data") as server:
        narrow = server.token("agent", "team:acme/agent:helper")  # Reach.of its node
        with server.client(narrow) as c:
            for moment, body in (
                ("start", {}),
                ("pre-turn", {"message": "what does the handbook say?", "turn": 0}),
            ):
                refused = assert_error(c.post(f"/v1/sessions/t1/{moment}", json=body), 403)
                assert "reach" in refused["error"]["message"]


def test_a_sibling_agent_never_reads_anothers_thread_of_the_same_name(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "data") as server:
        helper = server.token("agent", "team:acme/agent:helper", reach="subtree:team:acme")
        other = server.token("agent", "team:acme/agent:other", reach="subtree:team:acme")
        with server.client(helper) as c:
            r = c.post("/v1/sessions/t1/post-turn", json={"turn": 0, "user": "my pin is 4711."})
            assert r.status_code == 200, r.text
        with server.client(other) as c:
            r = c.post(
                "/v1/sessions/t1/pre-turn", json={"message": "what is my pin?", "turn": 0, "at": AT}
            )
            assert r.status_code == 200, r.text
            assert "4711" not in r.text
            r = c.post("/v1/sessions/t1/start", json={})
            assert r.status_code == 200 and "4711" not in r.text


def test_a_session_body_naming_a_reach_or_namespace_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    with ServerThread(tmp_path / "data") as server:
        token = server.token("agent", "team:acme/agent:helper", reach="subtree:team:acme")
        with server.client(token) as c:
            for body in (
                {"turn": 0, "user": "x", "namespace": "team:other"},
                {"turn": 0, "user": "x", "reach": "subtree:"},
                {"turn": 0, "messages": [{"role": "user", "text": "x", "namespace": "team:b"}]},
            ):
                assert_error(c.post("/v1/sessions/t1/post-turn", json=body), 400)

    # Nothing was stored under any thread.
    async def stored() -> int:
        async with memseal.open(tmp_path / "data", embedder=None) as memory:
            page = await memory.engine.list(
                reach=Reach.subtree(MemoryLayout(tenant="acme").agent("helper"))
            )
            return len(page.items)

    assert asyncio.run(stored()) == 0
