"""The job queue served never crosses a token's reach.

An agent's token reads only its own agent's queue; an admin runs only the
queues inside its reach; a job run never reads or writes another agent's
memory; and a body that names another queue or an extra field is refused
with nothing run.
"""

from __future__ import annotations

from pathlib import Path

from integration.test_service_support import ServerThread, assert_error

HELPER = "team:acme/agent:helper"


def _queue_one(server: ServerThread, token: str) -> str:
    with server.client(token) as c:
        r = c.post("/v1/sessions/t1/post-turn", json={"turn": 0, "user": "I live in Porto."})
        assert r.status_code == 200, r.text
        return str(r.json()["build"]["job"])


def test_an_admin_outside_the_tenant_cannot_run_its_jobs(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "data") as server:
        helper = server.token("agent", HELPER, reach="subtree:team:acme")
        job = _queue_one(server, helper)
        other_admin = server.token("admin", "team:other", reach="subtree:team:other")
        with server.client(other_admin) as c:
            refused = assert_error(c.post("/v1/admin/jobs/run", json={"place": HELPER}), 403)
            assert "subtree:team:acme/agent:helper" in refused["error"]["message"]
        with server.client(helper) as c:
            assert [j["id"] for j in c.get("/v1/jobs").json()["pending"]] == [job]


def test_an_agent_token_cannot_read_a_sibling_agents_queue(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "data") as server:
        helper = server.token("agent", HELPER, reach="subtree:team:acme")
        _queue_one(server, helper)
        sibling = server.token("agent", "team:acme/agent:other", reach="subtree:team:acme")
        with server.client(sibling) as c:
            status = c.get("/v1/jobs").json()
            # Its own queue, empty: the helper's job is not in it.
            assert status == {"pending": [], "failed": [], "done": [], "invalid": []}
            assert_error(c.get("/v1/jobs", params={"place": HELPER}), 400)


def test_an_agent_token_cannot_run_jobs_through_the_admin_route(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "data") as server:
        helper = server.token("agent", HELPER, reach="subtree:team:acme")
        job = _queue_one(server, helper)
        with server.client(helper) as c:
            assert_error(c.post("/v1/admin/jobs/run", json={"place": HELPER}), 403)
            assert [j["id"] for j in c.get("/v1/jobs").json()["pending"]] == [job]
