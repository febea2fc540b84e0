"""Failing background jobs over a real memory: each failed attempt a signed marker, retried
after a deterministic backoff read from an injected clock, capped, then ``failed`` until an
admin re-queues it (a signed note); from Python and from the CLI. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.apps.lifecycle import Belief, JobQueue, RetryPolicy, SourceTurn
from memseal.apps.lifecycle._retry import stamp
from memseal.engine import Reach
from memseal.memory import STORE_ENV
from memseal.tools import ToolScope

MEMSEAL = Path(sys.executable).parent / "memseal"
AGENT = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(AGENT, reach=Reach.subtree(AGENT))
THREAD = ToolScope.placed_at(f"{AGENT}/thread:t1")
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
POLICY = RetryPolicy(max_attempts=3, base_seconds=10, max_seconds=15)


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class Raising:
    """An extractor that raises, as a model whose service is down does."""

    def __init__(self, failures: int = 10**6) -> None:
        self.failures = failures
        self.calls = 0

    async def extract(self, turns: Sequence[SourceTurn]) -> list[Belief]:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"the model is down (call {self.calls})")
        return [Belief(text="The user likes tea.", sources=(turns[0].item,))]


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


async def _turn(memory: memseal.Memory, said: str) -> str:
    turns = [{"role": "user", "text": said}, {"role": "assistant", "text": "Noted."}]
    stored = await memory.tools(THREAD).call("memory_store", {"conversation": {"turns": turns}})
    return str(stored["id"])


async def _kinds_since(memory: memseal.Memory, start: int) -> Counter[str]:
    size = await memory.ledger.size()
    return Counter([(await memory.ledger.read(seq)).entry().kind for seq in range(start, size)])


async def _queue_texts(memory: memseal.Memory, queue: JobQueue, tag: str) -> list[str]:
    page = await memory.tools(queue.queue_scope).call(
        "memory_list", {"filter": {"tags_any": [tag]}, "limit": 50}
    )
    return [item["text"] for item in page["items"]]


async def test_a_failing_job_is_marked_retried_with_backoff_capped_and_requeued(
    tmp_path: Path,
) -> None:
    clock = Clock()
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I like tea.")
        raising = Raising()
        queue = JobQueue(memory, SCOPE, extractor=raising, retry=POLICY, clock=clock)
        job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])

        # Attempt 1 fails: a signed marker naming the job, the attempt and the error.
        before = await memory.ledger.size()
        (first,) = await queue.run_pending()
        assert (first.state, first.attempt, first.run_id) == ("failed", 1, f"job-{job.id}")
        assert "the model is down (call 1)" in (first.error or "")
        # Base 10 s after the failure, moved by the job's own jitter (at most a quarter).
        wait = POLICY.delay(1, job=job.id)
        assert 7.5 <= wait <= 12.5 and wait != 10
        due = T0 + timedelta(seconds=wait)
        assert first.retry_at == stamp(due)
        kinds = await _kinds_since(memory, before)
        assert kinds["memory_stored"] == 1  # the marker; the job stored no belief
        (marker,) = await _queue_texts(memory, queue, "memseal-job-failed")
        mark = msgspec.json.decode(marker)
        assert (mark["job"], mark["attempt"], mark["round"]) == (job.id, 1, 0)
        assert "the model is down" in mark["error"] and mark["at"] == "2026-12-01T09:00:00.000000Z"
        (pending,) = (await queue.status()).pending
        assert (pending.attempts, pending.not_before) == (1, first.retry_at)
        assert pending.run_id == f"job-{job.id}.0.2"  # the next attempt is a run of its own

        # Not due yet: nothing runs, nothing is written but the status reads.
        clock.now = due - timedelta(milliseconds=1)
        before = await memory.ledger.size()
        assert await queue.run_pending() == []
        assert "memory_stored" not in await _kinds_since(memory, before)
        assert raising.calls == 1

        # Attempt 2 at its time; its backoff doubles, capped at max_seconds (15 s).
        clock.now = due
        (second,) = await queue.run_pending()
        assert (second.state, second.attempt, second.run_id) == (
            "failed",
            2,
            f"job-{job.id}.0.2",
        )
        # 20 s doubled, capped at 15, jittered: the same draw the marker holds.
        due = due + timedelta(seconds=POLICY.delay(2, job=job.id))
        assert second.retry_at == stamp(due)
        assert 11.25 <= POLICY.delay(2, job=job.id) <= 18.75
        clock.now = due
        (third,) = await queue.run_pending()
        assert (third.state, third.attempt, third.retry_at) == ("failed", 3, None)

        # The cap: failed, never run again, whatever the time; the status says why.
        clock.now = T0 + timedelta(days=30)
        status = await queue.status()
        assert status.pending == () and status.done == ()
        (failed,) = status.failed
        assert (failed.id, failed.attempts, failed.state) == (job.id, 3, "failed")
        assert "the model is down (call 3)" in (failed.last_error or "")
        before = await memory.ledger.size()
        assert await queue.run_pending() == []
        refused = await queue.run_job(job)
        assert refused.state == "failed" and "re-queue" in (refused.error or "")
        assert "memory_stored" not in await _kinds_since(memory, before)
        assert raising.calls == 3

        # An admin re-queues it: a signed note, and the job is pending again, due now.
        before = await memory.ledger.size()
        requeued = await queue.requeue(job.id, reason="the model is back")
        assert (requeued.job.state, requeued.job.round, requeued.job.attempts) == (
            "pending",
            1,
            0,
        )
        assert requeued.job.not_before is None
        kinds = await _kinds_since(memory, before)
        assert kinds["memory_stored"] == 1 and kinds["memory_tool_call"] >= 1
        (note,) = await _queue_texts(memory, queue, "memseal-job-requeued")
        assert msgspec.json.decode(note)["reason"] == "the model is back"

        # Its next attempt runs in a fresh run, and this time the build succeeds.
        raising.failures = 0
        (done,) = await queue.run_pending()
        assert (done.state, done.run_id, len(done.learned)) == ("done", f"job-{job.id}.1.1", 1)
        (finished,) = (await queue.status()).done
        assert (finished.run_id, finished.round, finished.attempts) == (done.run_id, 1, 0)
        # The finishing run replays strictly, found by the run the status names.
        assert await queue.replay_job(finished) == done
        await memory.verify(deep=True)


async def test_a_job_that_fails_once_is_built_once_on_its_retry(tmp_path: Path) -> None:
    clock = Clock()
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I like tea.")
        queue = JobQueue(memory, SCOPE, extractor=Raising(failures=1), retry=POLICY, clock=clock)
        job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        (failed,) = await queue.run_pending()
        assert failed.state == "failed"
        clock.now += timedelta(seconds=POLICY.delay(1, job=job.id))
        (done,) = await queue.run_pending()
        assert done.state == "done" and done.attempt == 2
        page = await memory.tools(SCOPE).call(
            "memory_list", {"filter": {"tags_any": ["belief"]}, "limit": 50}
        )
        assert [item["text"] for item in page["items"]] == ["The user likes tea."]
        # A stale JobInfo (from enqueue) runs the job's current attempt, not the first again.
        before = await memory.ledger.size()
        again = await queue.run_job(job)
        assert again.run_id == done.run_id and again.learned == done.learned
        assert "memory_forgotten" not in await _kinds_since(memory, before)
        await memory.verify(deep=True)


async def test_bad_requeues_and_policies_are_refused_and_change_nothing(tmp_path: Path) -> None:
    clock = Clock()
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I like tea.")
        queue = JobQueue(memory, SCOPE, retry=POLICY, clock=clock)
        never = await queue.enqueue("beliefs", thread="t1", source_ids=["0" * 32])
        fresh = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        before = await memory.ledger.size()
        with pytest.raises(memseal.NotFound, match="no job"):
            await queue.requeue("f" * 32, reason="why not")
        with pytest.raises(memseal.InvalidRequest, match="has not failed"):
            await queue.requeue(fresh.id, reason="why not")
        with pytest.raises(memseal.InvalidRequest, match="`reason`"):
            await queue.requeue(never.id, reason="  ")
        with pytest.raises(memseal.InvalidRequest, match="`job`"):
            await queue.requeue("", reason="why not")
        assert "memory_stored" not in await _kinds_since(memory, before)
        await queue.run_job(fresh)
        with pytest.raises(memseal.InvalidRequest, match="is done"):
            await queue.requeue(fresh.id, reason="again")
        for bad in (
            {"max_attempts": 0},
            {"max_attempts": True},
            {"base_seconds": -1.0},
            {"base_seconds": float("nan")},
            {"base_seconds": 20.0, "max_seconds": 10.0},
        ):
            with pytest.raises(memseal.InvalidRequest, match=r"`(max_attempts|base_seconds|max_s)"):
                RetryPolicy(**bad)
        with pytest.raises(memseal.InvalidRequest, match="`retry`"):
            JobQueue(memory, SCOPE, retry=3)  # type: ignore[arg-type]
        naive = JobQueue(memory, SCOPE, clock=lambda: datetime(2026, 1, 1))
        with pytest.raises(memseal.InvalidRequest, match="`clock`"):
            await naive.run_pending()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MEMSEAL), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_cli_shows_a_failed_job_with_its_error_and_requeues_it(tmp_path: Path) -> None:
    data = tmp_path / "d"

    async def queue_two() -> tuple[str, str]:
        async with _open(data) as memory:
            queue = JobQueue(memory, SCOPE)
            good = await queue.enqueue(
                "beliefs", thread="t1", source_ids=[await _turn(memory, "I like tea.")]
            )
            gone = await queue.enqueue("beliefs", thread="t1", source_ids=["0" * 32])
            return good.id, gone.id

    import asyncio

    good, gone = asyncio.run(queue_two())
    ran = _cli("worker", "--place", AGENT, "--once", "--max-attempts", "1", "--data", str(data))
    assert ran.returncode == 2, ran.stderr  # a job failed
    lines = ran.stdout.splitlines()
    assert lines[0].startswith(f"job {good}: done, 1 learned")
    assert lines[1].startswith(f"job {gone}: failed (attempt 1, no more retries): job {gone}")
    listed = _cli("jobs", "status", "--place", AGENT, "--data", str(data))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[-1] == f"{AGENT}: 0 pending, 1 failed, 1 done"
    (failed,) = [line for line in lines if line.startswith("failed ")]
    assert failed.split()[1] == gone and "attempts=1" in failed
    assert "error=job " in failed and "source turns not in reach or gone" in failed
    requeued = _cli(
        "jobs", "requeue", gone, "--place", AGENT, "--reason", "turn restored", "--data", str(data)
    )
    assert requeued.returncode == 0, requeued.stderr
    assert requeued.stdout.startswith(f"job {gone}: pending again (round 1, note ")
    listed = _cli("jobs", "status", "--place", AGENT, "--data", str(data))
    assert listed.stdout.splitlines()[-1] == f"{AGENT}: 1 pending, 0 failed, 1 done"
    for bad in (
        ("jobs", "requeue", good, "--place", AGENT),  # done
        ("jobs", "requeue", "f" * 32, "--place", AGENT),  # no such job
        ("worker", "--place", AGENT, "--once", "--max-attempts", "0"),
    ):
        refused = _cli(*bad, "--data", str(data))
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr


class Crash(BaseException):
    """The process dying mid-build (no error the queue handles, so no marker)."""


class CrashingMemory:
    """The memory, but a job's first belief write raises :class:`Crash` once it commits."""

    def __init__(self, memory: memseal.Memory) -> None:
        self.memory = memory

    def tools(self, scope: ToolScope | None = None, **options: Any) -> Any:
        return _CrashingTools(self.memory.tools(scope, **options))


class _CrashingTools:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def call(self, name: str, arguments: Any = None, **options: Any) -> Any:
        result = await self.inner.call(name, arguments, **options)
        if str(options.get("key") or "").startswith("learn:"):
            raise Crash
        return result

    async def close(self, *, check: bool = True) -> None:
        await self.inner.close(check=check)


class TwoFacts:
    """A deterministic extractor that fails its first call, then finds two beliefs."""

    deterministic = True

    def __init__(self) -> None:
        self.calls = 0

    async def extract(self, turns: Sequence[SourceTurn]) -> list[Belief]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("cold start")
        item = turns[0].item
        return [
            Belief(text="The user likes tea.", sources=(item,)),
            Belief(text="The user likes jazz.", sources=(item,)),
        ]


async def test_a_retry_killed_mid_build_resumes_its_own_run_and_writes_nothing_twice(
    tmp_path: Path,
) -> None:
    clock = Clock()
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I like tea and jazz.")
        extractor = TwoFacts()
        queue = JobQueue(memory, SCOPE, extractor=extractor, retry=POLICY, clock=clock)
        job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        (first,) = await queue.run_pending()
        assert first.state == "failed"
        clock.now += timedelta(seconds=POLICY.delay(1, job=job.id))
        crashing = JobQueue(
            CrashingMemory(memory),  # type: ignore[arg-type]
            SCOPE,
            extractor=extractor,
            retry=POLICY,
            clock=clock,
        )
        with pytest.raises(Crash):
            await crashing.run_pending()  # attempt 2 dies after its first belief
        # No marker for a killed attempt: it is still attempt 2, in the same run.
        (pending,) = (await queue.status()).pending
        assert (pending.attempts, pending.run_id) == (1, f"job-{job.id}.0.2")
        before = await memory.ledger.size()
        (done,) = await queue.run_pending()
        assert (done.state, done.run_id, len(done.learned)) == ("done", pending.run_id, 2)
        kinds = await _kinds_since(memory, before)
        assert kinds["memory_stored"] == 2  # the second belief and the done marker
        page = await memory.tools(SCOPE).call(
            "memory_list", {"filter": {"tags_any": ["belief"]}, "limit": 50}
        )
        assert sorted(item["text"] for item in page["items"]) == [
            "The user likes jazz.",
            "The user likes tea.",
        ]
        await memory.verify(deep=True)
