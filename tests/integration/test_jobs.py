"""Background belief builds over a real memory: queued, run, superseded, retracted, crash-safe.

A job is a signed entry in the queue; running it is its own recorded run,
which a process SIGKILLed mid-job resumes without writing any belief twice.
Each belief cites its source turns; a later build supersedes a belief with a
signed forget; a retraction is a signed note and a signed forget.
``memseal verify`` passes after each. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.apps.lifecycle import Belief, JobQueue, SourceTurn
from memseal.engine import Reach
from memseal.memory import STORE_ENV
from memseal.tools import ToolScope

MEMSEAL = Path(sys.executable).parent / "memseal"
AGENT = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(AGENT, reach=Reach.subtree(AGENT))
THREAD = ToolScope.placed_at(f"{AGENT}/thread:t1")


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


async def _turn(memory: memseal.Memory, *said: str) -> str:
    turns = [{"role": "user", "text": text} for text in said]
    turns.append({"role": "assistant", "text": "Noted."})
    stored = await memory.tools(THREAD).call("memory_store", {"conversation": {"turns": turns}})
    return str(stored["id"])


async def _beliefs(memory: memseal.Memory) -> list[dict[str, Any]]:
    page = await memory.tools(SCOPE).call(
        "memory_list", {"filter": {"tags_any": ["belief"]}, "limit": 50}
    )
    return list(page["items"])


async def kinds_since(memory: memseal.Memory, start: int) -> Counter[str]:
    size = await memory.ledger.size()
    return Counter([(await memory.ledger.read(seq)).entry().kind for seq in range(start, size)])


async def test_a_job_is_queued_run_once_and_cites_its_turns(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I live in Porto. I prefer dark mode. We decided to use Go.")
        queue = JobQueue(memory, SCOPE)
        job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        again = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        assert again.id == job.id and again.replayed  # the same job queued twice is one job
        assert [j.id for j in (await queue.status()).pending] == [job.id]
        (outcome,) = await queue.run_pending()
        assert outcome.state == "done" and len(outcome.learned) == 3
        assert outcome.run_id == f"job-{job.id}"
        status = await queue.status()
        assert status.pending == () and [j.id for j in status.done] == [job.id]
        before = await memory.ledger.size()
        assert await queue.run_pending() == []  # done jobs never run again
        assert "memory_stored" not in await kinds_since(memory, before)
        beliefs = {item["text"]: item for item in await _beliefs(memory)}
        assert set(beliefs) == {
            "The user lives in Porto.",
            "The user prefers dark mode.",
            "Decided: use Go.",
        }
        for item in beliefs.values():
            assert f"turn:{turn}" in item["meta"]["tags"]
        got = await memory.tools(SCOPE).call(
            "memory_get", {"ids": [beliefs["Decided: use Go."]["id"]]}
        )
        assert got["items"][0]["kind"] == "decision"
        await memory.verify(deep=True)


async def test_a_job_replays_strictly_from_its_own_run(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "My name is Ana.")
        queue = JobQueue(memory, SCOPE)
        job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        (outcome,) = await queue.run_pending()
        before = await memory.ledger.size()
        # The job's run again, strictly: every call from its memo, nothing live or written.
        replayed = await queue.replay_job(job)
        assert replayed == outcome
        assert await memory.ledger.size() == before


async def test_a_later_build_supersedes_a_belief_with_a_signed_forget(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        queue = JobQueue(memory, SCOPE)
        porto = await _turn(memory, "I live in Porto.")
        await queue.enqueue("beliefs", thread="t1", source_ids=[porto])
        (first,) = await queue.run_pending()
        lisbon = await _turn(memory, "I moved to Lisbon.")
        await queue.enqueue("beliefs", thread="t1", source_ids=[lisbon])
        before = await memory.ledger.size()
        (second,) = await queue.run_pending()
        assert second.superseded == first.learned
        kinds = await kinds_since(memory, before)
        assert kinds["memory_forgotten"] == 1
        beliefs = await _beliefs(memory)
        assert [b["text"] for b in beliefs] == ["The user lives in Lisbon."]
        (item,) = (await memory.engine.get(list(second.learned))).items
        assert item.evidence is not None
        assert lisbon in item.evidence and f"supersedes {first.learned[0]}" in item.evidence
        assert f"turn:{lisbon}" in item.tags
        await memory.verify(deep=True)


async def test_a_retraction_is_a_signed_note_and_a_signed_forget(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        queue = JobQueue(memory, SCOPE)
        turn = await _turn(memory, "I like jazz.")
        await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        (outcome,) = await queue.run_pending()
        (learned,) = outcome.learned
        before = await memory.ledger.size()
        retraction = await queue.retract(learned, reason="the user was joking")
        assert retraction.forgotten and retraction.item == learned
        kinds = await kinds_since(memory, before)
        assert kinds["memory_stored"] == 1 and kinds["memory_forgotten"] == 1
        assert kinds["memory_tool_call"] == 2
        assert await _beliefs(memory) == []
        note = await memory.tools(queue.queue_scope).call("memory_get", {"ids": [retraction.note]})
        assert note["items"][0]["text"] == f"retracted {learned}: the user was joking"
        await memory.verify(deep=True)


class _Shouting:
    """A plug-in extractor: every user turn is a fact, shouted."""

    async def extract(self, turns: Sequence[SourceTurn]) -> list[Belief]:
        return [
            Belief(text=t.text.upper(), confidence=0.5, sources=(t.item,))
            for t in turns
            if t.role == "user"
        ]


async def test_a_model_extractor_plugs_in(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        queue = JobQueue(memory, SCOPE, extractor=_Shouting())
        turn = await _turn(memory, "hello there")
        await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        (outcome,) = await queue.run_pending()
        assert outcome.state == "done"
        assert [b["text"] for b in await _beliefs(memory)] == ["HELLO THERE"]


async def test_bad_jobs_are_refused_and_a_job_without_its_turns_fails_and_stays(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        queue = JobQueue(memory, SCOPE)
        before = await memory.ledger.size()
        with pytest.raises(memseal.InvalidRequest, match="`kind`"):
            await queue.enqueue("dreams", thread="t1", source_ids=["x"])
        with pytest.raises(memseal.InvalidRequest, match="`source_ids`"):
            await queue.enqueue("beliefs", thread="t1", source_ids=[])
        with pytest.raises(memseal.InvalidRequest, match="`thread`"):
            await queue.enqueue("beliefs", thread="", source_ids=["x"])
        assert await memory.ledger.size() == before
        job = await queue.enqueue("beliefs", thread="t1", source_ids=["0" * 32])
        (outcome,) = await queue.run_pending()
        assert outcome.state == "failed" and "source turns" in (outcome.error or "")
        assert [j.id for j in (await queue.status()).pending] == [job.id]
        with pytest.raises(memseal.InvalidRequest, match="writes"):
            JobQueue(memory, SCOPE.replace(writes=False))


_CRASHING_JOB = textwrap.dedent(
    """
    import asyncio, json, os, signal, sys
    import memseal
    from memseal.engine import Reach
    from memseal.apps.lifecycle import JobQueue

    AGENT = "team:acme/agent:writer"
    SCOPE = memseal.ToolScope.placed_at(AGENT, reach=Reach.subtree(AGENT))
    THREAD = memseal.ToolScope.placed_at(AGENT + "/thread:t1")
    KILL_AFTER = int(sys.argv[2])

    class Killing:
        # Counts the job's belief stores and SIGKILLs this process after the n-th commits.
        def __init__(self, memory):
            self.memory, self.stores = memory, 0
        def tools(self, scope=None, **options):
            return KillingTools(self, self.memory.tools(scope, **options))

    class KillingTools:
        def __init__(self, owner, inner):
            self.owner, self.inner = owner, inner
        def call(self, name, arguments=None, **options):
            async def go():
                result = await self.inner.call(name, arguments, **options)
                if str(options.get("key") or "").startswith("learn:"):
                    self.owner.stores += 1
                    if self.owner.stores == KILL_AFTER:
                        os.kill(os.getpid(), signal.SIGKILL)
                return result
            return go()
        async def close(self, *, check=True):
            await self.inner.close(check=check)

    async def main():
        async with memseal.open(sys.argv[1], embedder=None, checkpoint_interval=None) as memory:
            if KILL_AFTER:
                said = ("I live in Porto. I prefer tea. My name is Ana. We decided to use Go. "
                        "My editor is vim. I work at Acme.")
                turn = await memory.tools(THREAD).call(
                    "memory_store", {"conversation": {"turns": [{"role": "user", "text": said}]}})
                await JobQueue(memory, SCOPE).enqueue("beliefs", thread="t1",
                                                      source_ids=[turn["id"]])
                await JobQueue(Killing(memory), SCOPE).run_pending()
                print("not killed")
            else:
                outcomes = await JobQueue(memory, SCOPE).run_pending()
                print(json.dumps([[o.state, list(o.learned)] for o in outcomes]))
    asyncio.run(main())
    """
)


def test_a_job_sigkilled_mid_build_resumes_without_writing_twice(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(_CRASHING_JOB)
    data = str(tmp_path / "d")

    def run(kill_after: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), data, str(kill_after)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=dict(os.environ),
        )

    killed = run(3)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    resumed = run(0)
    assert resumed.returncode == 0, resumed.stderr
    ((state, learned),) = json.loads(resumed.stdout)
    assert state == "done" and len(learned) == 6
    assert json.loads(run(0).stdout) == []  # done: never run again

    async def check() -> None:
        async with _open(Path(data)) as memory:
            texts = [item["text"] for item in await _beliefs(memory)]
            assert len(texts) == len(set(texts)) == 6
            size = await memory.ledger.size()
            stored_beliefs = 0
            for seq in range(size):
                record = await memory.ledger.read(seq)
                entry = record.entry()
                if entry.kind == "memory_stored":
                    body = msgspec.json.decode(bytes(entry.body))
                    stored_beliefs += body["namespace"] == AGENT
            assert stored_beliefs == 6  # each belief written once, across the crash
            await memory.verify(deep=True)

    import asyncio

    asyncio.run(check())


def test_the_worker_runs_the_pending_jobs_once(tmp_path: Path) -> None:
    data = tmp_path / "d"

    async def queue_one() -> str:
        async with _open(data) as memory:
            turn = await _turn(memory, "My favourite colour is green.")
            job = await JobQueue(memory, SCOPE).enqueue("beliefs", thread="t1", source_ids=[turn])
            return job.id

    import asyncio

    job = asyncio.run(queue_one())
    env = dict(os.environ)
    done = subprocess.run(
        [str(MEMSEAL), "worker", "--place", AGENT, "--once", "--data", str(data)],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"job {job}: done, 1 learned, 0 superseded")
    idle = subprocess.run(
        [str(MEMSEAL), "worker", "--place", AGENT, "--once", "--data", str(data)],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert idle.returncode == 0 and idle.stdout == "no pending jobs\n"
    bad = subprocess.run(
        [str(MEMSEAL), "worker", "--place", "not a place", "--once", "--data", str(data)],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


async def test_a_belief_names_the_day_its_turn_meant_and_refers_to_finds_it(
    tmp_path: Path,
) -> None:
    from clock import Clock

    clock = Clock()  # the turn is said on Monday 2026-11-30
    async with memseal.open(
        tmp_path / "d", embedder=None, checkpoint_interval=None, clock=clock
    ) as memory:
        turn = await _turn(memory, "We decided yesterday to use Go.")
        queue = JobQueue(memory, SCOPE)
        await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        clock.set(datetime(2026, 12, 3, 9, 0, tzinfo=UTC))  # the job runs days later
        (outcome,) = await queue.run_pending()
        (belief,) = await _beliefs(memory)
        assert belief["text"] == "Decided: use Go (on 2026-11-29)."
        assert belief["meta"]["observed_at"].startswith("2026-12-03")
        found = await memory.tools(SCOPE).call(
            "memory_fetch",
            {
                "query": "decided Go",
                "refers_to": {"from": "2026-11-29", "to": "2026-11-29"},
                "filter": {"tags_any": ["belief"]},
            },
        )
        assert [hit["id"] for hit in found["hits"]][:1] == list(outcome.learned)


def test_the_worker_takes_the_explicit_scope_serve_does_and_names_a_bad_field(
    tmp_path: Path,
) -> None:
    data = tmp_path / "d"

    def worker(*place: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(MEMSEAL), "worker", "--once", "--data", str(data), *place],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    async def queue_one() -> str:
        async with _open(data) as memory:
            turn = await _turn(memory, "My favourite colour is green.")
            job = await JobQueue(memory, SCOPE).enqueue("beliefs", thread="t1", source_ids=[turn])
            return job.id

    async def size() -> int:
        async with _open(data) as memory:
            return await memory.ledger.size()

    import asyncio

    job = asyncio.run(queue_one())
    # The scope as serve --worker states it: an agent's turn is unverified, so a worker
    # reading verified turns only fails the job, and with attempts=1 gives up at once.
    ran = worker("--place", f"{AGENT},reach=subtree:{AGENT},trust=verified,attempts=1")
    assert ran.returncode == 2, ran.stderr
    assert ran.stdout.startswith(f"job {job}: failed (attempt 1, no more retries)"), ran.stdout
    before = asyncio.run(size())
    for place, named in [
        (f"{AGENT},reach=subtree:team:acme", "the reach must be subtree:"),
        (f"{AGENT},reach=nowhere", "reach"),
        (f"{AGENT},trust=gossip", "`trust` 'gossip'"),
        (f"{AGENT},colour=red", "'colour=red' is not one of reach=..., trust=..., attempts=..."),
        (f"{AGENT},attempts=many", "`attempts` must be a whole number"),
        (f"{AGENT},trust=verified,trust=stale", "`trust` is given twice"),
        ("team:acme", "the place must be an agent node"),
    ]:
        bad = worker("--place", place)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, (place, bad.stderr)
        assert "`--place`" in bad.stderr and named in bad.stderr, (place, bad.stderr)
    both = worker("--place", f"{AGENT},attempts=2", "--max-attempts", "3")
    assert both.returncode == 2 and "`attempts` is given twice" in both.stderr, both.stderr
    assert asyncio.run(size()) == before  # a refused scope changes nothing
    # jobs status reads the same syntax and shows the failed attempt.
    listed = subprocess.run(
        [str(MEMSEAL), "jobs", "status", "--place", f"{AGENT},trust=verified", "--data", str(data)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1] == f"{AGENT}: 0 pending, 1 failed, 0 done"
