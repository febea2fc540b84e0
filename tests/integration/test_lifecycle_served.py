"""The job queue served: post-turn queues over HTTP, ``GET /v1/jobs``, the admin's
``POST /v1/admin/jobs/run``, ``serve --worker`` running jobs in the service's loop,
and ``memseal jobs status``; through a real uvicorn server.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from memseal.ledger.errors import InvalidRequest
from memseal.service.app import create_app

MEMSEAL = Path(sys.executable).parent / "memseal"
AGENT = "team:acme/agent:helper"
AT = "2026-12-01T09:00:00Z"


def _turns(c: object, said: list[str]) -> list[str]:
    import httpx

    assert isinstance(c, httpx.Client)
    jobs = []
    for turn, message in enumerate(said):
        r = c.post("/v1/sessions/t1/post-turn", json={"turn": turn, "user": message})
        assert r.status_code == 200, r.text
        jobs.append(r.json()["build"]["job"])
    return jobs


def test_post_turn_queues_its_build_once_and_an_admin_runs_the_queue(tmp_path: Path) -> None:
    from test_service_support import ServerThread, assert_error

    with ServerThread(tmp_path / "data") as server:
        token = server.token("agent", AGENT, reach="subtree:team:acme")
        narrow = server.token("agent", "team:acme/agent:other")
        with server.client(token) as c:
            jobs = _turns(c, ["I live in Berlin.", "I moved to Lisbon."])
            assert all(jobs) and len(set(jobs)) == 2
            # The request repeated after a lost answer: the recorded job, nothing queued.
            assert _turns(c, ["I live in Berlin."]) == jobs[:1]
            status = c.get("/v1/jobs").json()
            assert [job["id"] for job in status["pending"]] == jobs and status["done"] == []
            assert_error(c.post("/v1/admin/jobs/run", json={"place": AGENT}), 403)
        with server.client(narrow) as c:
            r = assert_error(c.get("/v1/jobs"), 403)
            assert "subtree:team:acme/agent:other" in r["error"]["message"]
        with server.client(server.admin) as c:
            assert_error(c.post("/v1/admin/jobs/run", json={"place": "team:acme"}), 400)
            assert_error(c.post("/v1/admin/jobs/run", json={"place": AGENT, "x": 1}), 400)
            r = c.post("/v1/admin/jobs/run", json={"place": AGENT})
            assert r.status_code == 200, r.text
            outcomes = r.json()["outcomes"]
            assert [o["state"] for o in outcomes] == ["done", "done"]
            assert len(outcomes[1]["superseded"]) == 1  # Lisbon supersedes Berlin
            again = c.post("/v1/admin/jobs/run", json={"place": AGENT})
            assert again.json() == {"outcomes": []}
        with server.client(token) as c:
            status = c.get("/v1/jobs").json()
            assert status["pending"] == [] and [j["id"] for j in status["done"]] == jobs

    listed = subprocess.run(
        [str(MEMSEAL), "jobs", "status", "--place", AGENT, "--data", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[-1] == f"{AGENT}: 0 pending, 0 failed, 2 done"
    assert [line.split()[:2] for line in lines[:-1]] == [["done", job] for job in jobs]
    bad = subprocess.run(
        [str(MEMSEAL), "jobs", "status", "--place", "not a place", "--data", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr


def test_an_admin_requeues_a_failed_job_over_http(tmp_path: Path) -> None:
    import asyncio

    from test_service_support import ServerThread, assert_error

    import memseal
    from memseal.apps.lifecycle import JobQueue, MemoryLayout, RetryPolicy

    data = tmp_path / "data"

    async def fail_one() -> str:
        # A job whose turn is gone, given one attempt: failed, with its error, before serving.
        async with memseal.open(data, embedder=None, checkpoint_interval=None) as memory:
            scope = MemoryLayout(tenant="team:acme").learnings_writer("helper")
            queue = JobQueue(memory, scope, retry=RetryPolicy(max_attempts=1))
            job = await queue.enqueue("beliefs", thread="t1", source_ids=["0" * 32])
            (outcome,) = await queue.run_pending()
            assert outcome.state == "failed" and outcome.retry_at is None
            return job.id

    job = asyncio.run(fail_one())
    with ServerThread(data) as server:
        token = server.token("agent", AGENT, reach="subtree:team:acme")
        with server.client(token) as c:
            status = c.get("/v1/jobs").json()
            assert status["pending"] == [] and [j["id"] for j in status["failed"]] == [job]
            assert "source turns not in reach or gone" in status["failed"][0]["last_error"]
            assert_error(c.post("/v1/admin/jobs/requeue", json={"place": AGENT, "job": job}), 403)
        with server.client(server.admin) as c:
            for bad, code in (
                ({"place": AGENT}, 400),
                ({"place": AGENT, "job": job, "reason": ""}, 400),
                ({"place": "team:acme", "job": job}, 400),
                ({"place": AGENT, "job": "f" * 32}, 404),
            ):
                assert_error(c.post("/v1/admin/jobs/requeue", json=bad), code)
            r = c.post(
                "/v1/admin/jobs/requeue", json={"place": AGENT, "job": job, "reason": "restored"}
            )
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["job"]["state"] == "pending" and body["job"]["round"] == 1
            assert body["note"] and body["run_id"].startswith("requeue-")
            # Pending and never failed again in this round: a second re-queue is refused.
            assert_error(c.post("/v1/admin/jobs/requeue", json={"place": AGENT, "job": job}), 400)
        with server.client(token) as c:
            status = c.get("/v1/jobs").json()
            assert [j["id"] for j in status["pending"]] == [job] and status["failed"] == []


def test_serve_with_a_worker_runs_the_queued_jobs_in_the_background(tmp_path: Path) -> None:
    from test_service_support import ServerThread

    with ServerThread(tmp_path / "data", workers=[AGENT], worker_interval=0.1) as server:
        token = server.token("agent", AGENT, reach="subtree:team:acme")
        with server.client(token) as c:
            jobs = _turns(c, ["My favourite editor is vim."])
            deadline = time.monotonic() + 60
            while True:
                status = c.get("/v1/jobs").json()
                if [job["id"] for job in status["done"]] == jobs:
                    break
                assert time.monotonic() < deadline, status
                time.sleep(0.1)
            assert status["pending"] == []
            found = c.post("/v1/tools/memory_list", json={"filter": {"tags_any": ["belief"]}})
            assert found.status_code == 200, found.text
            assert any("vim" in item["text"] for item in found.json()["result"]["items"])


@pytest.mark.parametrize(
    ("workers", "interval", "message"),
    [
        (["team:acme"], 1.0, "agent node"),
        ("team:acme/agent:a", 1.0, "not one string"),
        ([AGENT], 0.0, "worker_interval"),
        ([f"{AGENT},reach=subtree:team:acme"], 1.0, "another agent's beliefs"),
        ([f"{AGENT},reach=all"], 1.0, f"must be subtree:{AGENT}"),
        ([f"{AGENT},reach=exact:{AGENT}"], 1.0, f"must be subtree:{AGENT}"),
        ([f"{AGENT},reach=nowhere"], 1.0, "reach` must be of:NS"),
        ([f"{AGENT},trust=gold"], 1.0, "`trust` 'gold'"),
        ([f"{AGENT},attempts=0"], 1.0, "`max_attempts`"),
        ([f"{AGENT},attempts=many"], 1.0, "`attempts`"),
        ([f"{AGENT},colour=red"], 1.0, "is not one of reach="),
        ([f"{AGENT},attempts=2,attempts=3"], 1.0, "given twice"),
        ([""], 1.0, "agent node"),
    ],
)
def test_a_bad_worker_is_refused_naming_it(
    tmp_path: Path, workers: object, interval: float, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        create_app(tmp_path, workers=workers, worker_interval=interval)  # type: ignore[arg-type]


def test_a_workers_explicit_scope_is_the_one_its_builds_run_under(tmp_path: Path) -> None:
    from memseal.service.workers import parse_worker

    worker = parse_worker(f"{AGENT},reach=subtree:{AGENT},trust=verified,attempts=2")
    assert (worker.place, worker.retry.max_attempts) == (AGENT, 2)
    assert worker.scope.place == AGENT and worker.scope.default_trust == "verified"
    assert worker.describe() == (
        f"builds beliefs at {AGENT}, reads subtree:{AGENT} at trust verified and above, "
        f"queue {AGENT}/queue:jobs, at most 2 attempts a job"
    )
    assert parse_worker(AGENT).scope == parse_worker(f"{AGENT},reach=subtree:{AGENT}").scope
    from test_service_support import ServerThread

    # A worker reading only verified turns: an unverified turn's build fails, once, signed.
    with ServerThread(
        tmp_path / "data", workers=[f"{AGENT},trust=verified,attempts=1"], worker_interval=0.1
    ) as server:
        token = server.token("agent", AGENT, reach="subtree:team:acme")
        with server.client(token) as c:
            (job,) = _turns(c, ["My favourite editor is vim."])
            deadline = time.monotonic() + 60
            while True:
                status = c.get("/v1/jobs").json()
                if status["failed"]:
                    break
                assert time.monotonic() < deadline, status
                time.sleep(0.1)
            (failed,) = status["failed"]
            assert failed["id"] == job and failed["attempts"] == 1
            assert "not in reach or gone" in failed["last_error"]
            found = c.post("/v1/tools/memory_list", json={"filter": {"tags_any": ["belief"]}})
            assert found.json()["result"]["items"] == []


def test_serve_refuses_a_bad_worker_before_making_anything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = subprocess.run(
        [str(MEMSEAL), "serve", "--data", str(data), "--worker", "team:acme", "--port", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "agent node" in done.stderr
    # No admin token made and left behind (nothing but the start-up lock's folder).
    assert not (data / "tokens.db").exists()
