""":class:`JobQueue`: durable background belief builds, each job its own recorded run.

A job is queued as a recorded ``memory_store`` of a ``scratch`` learning in
the queue's own namespace (default ``<place>/queue:jobs``): its text is the
job's canonical JSON (kind, thread, source item ids), so the job is a signed
``memory_stored`` entry behind a signed ``memory_tool_call``, and the same
job queued twice is one job (the content-id dedupe of the store). Why a
store and not a new engine event: a store is already signed, verified,
redactable, exported in bundles and rebuilt by ``rebuild``; a new entry kind
would need all of that again, for a queue that is only items in a namespace
no agent reads (a reach never includes it unless a host gives a subtree of
the agent's node).

Running a job (:meth:`JobQueue.run_pending`, from the host's loop or
``memseal worker``):

1. the run ``job-<job id>`` opens in ``resume`` mode under the learnings
   scope the queue was built with: a job killed halfway and run again
   replays its recorded steps from their memos and goes live where it
   stopped, so it never writes twice; its writes are keyed too
   (``learn:<digest>``, ``supersede:<id>``);
2. it reads its source turns (``memory_get``), draws beliefs from them with
   the extractor (offline rules by default, a model as a plug-in), and for
   a belief with a subject lists the beliefs already held on it (the build
   is :mod:`._belief_build`'s; this module keeps the queue's books);
3. it stores each belief, citing its source turn ids in ``evidence`` and as
   ``turn:<id>`` tags, and forgets the beliefs it supersedes (a signed
   ``memory_forgotten`` entry each);
4. a ``done:<job id>`` marker is stored in the queue: the job is not run
   again.

An attempt that fails (its turns are gone, the extractor raises) stores a
signed failure marker in the queue naming the job, the attempt and the
error (see :mod:`._retry`); the job is tried again after a deterministic
backoff, each attempt in a run of its own (``job-<id>.<round>.<n>``), and
after :attr:`RetryPolicy.max_attempts` it is ``failed`` and left alone
until an admin re-queues it (:meth:`JobQueue.requeue`, a signed marker too).

:meth:`JobQueue.retract` is the learning layer's writeBack: a write it does
not keep is taken back by a signed retraction, a recorded note naming the
item and the reason, then a recorded forget of the item; never a silent
delete.

Under a write freeze (a frozen ``scope``: ``MemoryLayout(..., frozen=True)``)
the queue holds its jobs: they are queued (the queue's own namespace is not
the agent's memory), but none runs, each comes back ``held`` with no attempt
spent, and a retraction is a ``frozen`` refusal; a queue of the unfrozen scope
runs them. A strict replay writes nothing, so it runs under a freeze too.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from memseal.engine import Reach
from memseal.ledger.errors import Conflict, InvalidRequest, MemsealError, NotFound
from memseal.memory import Memory, RecordedTools
from memseal.tools.policy import check_unfrozen
from memseal.tools.scope import ToolScope

from ._belief_build import Attempt, BeliefBuild, list_all
from ._extract import Extractor, RuleExtractor
from ._job_records import (
    MAX_REASON,
    JobInfo,
    JobOutcome,
    JobSpec,
    QueueStatus,
    Requeued,
    Retraction,
    check_id,
    check_sources,
    check_thread,
    due,
    encoder,
    info_of,
    spec_decoder,
)
from ._retry import (
    MAX_ERROR_CHARS,
    FailureMark,
    RequeueMark,
    RetryPolicy,
    decode_failure,
    decode_requeue,
    encode_mark,
    job_state,
    stamp,
)
from .pack import Recorder

__all__ = [
    "JOB_KINDS",
    "JobInfo",
    "JobOutcome",
    "JobQueue",
    "QueueStatus",
    "Requeued",
    "Retraction",
    "RetryPolicy",
]

JOB_KINDS: Final[tuple[str, ...]] = ("beliefs",)
JOB_TAG: Final = "memseal-job"
DONE_TAG: Final = "memseal-job-done"
FAILED_TAG: Final = "memseal-job-failed"
REQUEUE_TAG: Final = "memseal-job-requeued"
RETRACTION_TAG: Final = "memseal-retraction"
_HELD: Final = (
    "the learnings scope is frozen: the job is held until a queue of the unfrozen scope runs it"
)


class JobQueue:
    """Durable belief builds for one agent (see the module docstring).

    ``scope`` is the agent's learnings writer: beliefs are stored at its place,
    and its reach must include the threads whose turns jobs read (for example
    ``Reach.subtree`` of the agent's node). ``queue_place`` is where jobs are
    queued (default ``<place>/queue:jobs``); ``extractor`` draws beliefs from
    turns (default :class:`RuleExtractor`). ``retry`` caps and spaces the
    attempts of a failing job (default :class:`RetryPolicy`: 5 attempts, 30 s
    doubling to at most an hour); ``clock`` is the time the queue reads (an
    aware datetime; default the current UTC time), for backoff and markers.
    """

    def __init__(
        self,
        memory: Memory,
        scope: ToolScope,
        *,
        queue_place: str | None = None,
        extractor: Extractor | None = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not callable(getattr(memory, "tools", None)):
            raise InvalidRequest("`memory` must be an open memseal memory (memseal.open)")
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be the agent's learnings writer ToolScope")
        if not scope.writes:
            raise InvalidRequest("`scope` must allow writes: a job stores what it learns")
        if extractor is not None and not isinstance(extractor, Extractor):
            raise InvalidRequest("`extractor` must have an async extract(turns) method")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidRequest("`retry` must be a RetryPolicy")
        if clock is not None and not callable(clock):
            raise InvalidRequest("`clock` must be a function returning an aware datetime")
        place = queue_place if queue_place is not None else _child(scope.place, "queue:jobs")
        self._memory = memory
        self._scope = scope
        self._queue = ToolScope.placed_at(
            place, reach=Reach.exact(place), floor="stale", default_trust="stale"
        )
        self._builder = BeliefBuild(
            memory, scope, extractor if extractor is not None else RuleExtractor()
        )
        self._retry = retry if retry is not None else RetryPolicy()
        self._clock = clock if clock is not None else _utc_now

    @property
    def queue_scope(self) -> ToolScope:
        """The scope the queue's own entries are recorded under."""
        return self._queue

    @property
    def retry(self) -> RetryPolicy:
        """How failing jobs are retried."""
        return self._retry

    def _now(self) -> datetime:
        now = self._clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise InvalidRequest("`clock` must return an aware datetime")
        return now

    # -- queueing -----------------------------------------------------------------------

    @property
    def scope(self) -> ToolScope:
        """The learnings writer scope the jobs run under."""
        return self._scope

    async def enqueue(
        self,
        kind: str,
        *,
        thread: str,
        source_ids: Sequence[str],
        via: Recorder | None = None,
        key: str | None = None,
    ) -> JobInfo:
        """Queue a job (a recorded store); the same job queued again is the same job.

        ``via`` records the store in a run the caller holds (bound to
        :attr:`queue_scope`), under ``key``: a session resumed after a crash gets the
        recorded job back from its memo and queues nothing (what :class:`AgentMemory`
        does). Without it the store is recorded in a fresh run of its own.
        """
        if kind not in JOB_KINDS:
            raise InvalidRequest(f"`kind` {kind!r:.40} is not one of {', '.join(JOB_KINDS)}")
        spec = JobSpec(
            v=1, kind="beliefs", thread=check_thread(thread), source_ids=check_sources(source_ids)
        )
        text = encoder.encode(spec).decode()
        tools: Recorder = via if via is not None else self._memory.tools(self._queue)
        stored = await tools.call(
            "memory_store",
            {
                "learning": {"text": text, "learning_kind": "scratch", "confidence": 1.0},
                "tags": [JOB_TAG, f"job-kind:{kind}"],
            },
            key=key,
        )
        return JobInfo(
            id=stored["id"],
            kind=spec.kind,
            thread=spec.thread,
            source_ids=spec.source_ids,
            state="pending",
            replayed=bool(stored.get("replayed")),
            run_id=f"job-{stored['id']}",
        )

    async def status(self) -> QueueStatus:
        """The pending, failed and done jobs (recorded reads of the queue)."""
        tools = self._memory.tools(
            self._queue, run_id=f"queue-{secrets.token_hex(8)}", lifecycle="job-queue"
        )
        try:
            return await self._status(tools)
        finally:
            await tools.close()

    async def _status(self, tools: RecordedTools) -> QueueStatus:
        # One listing of the queue's items (jobs and markers): an idle worker's look at
        # its queue is one recorded page, not one a kind.
        everything = await list_all(tools, JOB_TAG, DONE_TAG, FAILED_TAG, REQUEUE_TAG)
        queued: list[dict[str, Any]] = []
        done: dict[str, str | None] = {}
        failures: list[FailureMark] = []
        requeues: list[RequeueMark] = []
        for item in everything:
            tags = [t for t in item.get("meta", {}).get("tags", ()) if isinstance(t, str)]
            if JOB_TAG in tags:
                queued.append(item)
            elif DONE_TAG in tags:
                run = next((t[len("run:") :] for t in tags if t.startswith("run:")), None)
                for label in tags:
                    if label.startswith("done:"):
                        done[label[len("done:") :]] = run
            elif FAILED_TAG in tags:
                failure = decode_failure(item.get("text"))
                if failure is not None:
                    failures.append(failure)
            elif REQUEUE_TAG in tags:
                requeue = decode_requeue(item.get("text"))
                if requeue is not None:
                    requeues.append(requeue)
        pending: list[JobInfo] = []
        failed: list[JobInfo] = []
        finished: list[JobInfo] = []
        invalid: list[str] = []
        # Oldest first: a listing is newest first.
        for item in reversed(queued):
            try:
                spec = spec_decoder.decode(item.get("text", ""))
            except (msgspec.DecodeError, TypeError):
                invalid.append(str(item.get("id")))
                continue
            job = str(item["id"])
            state = job_state(
                job,
                done=job in done,
                done_run=done.get(job),
                failures=failures,
                requeues=requeues,
            )
            info = info_of(job, spec, state)
            {"pending": pending, "failed": failed, "done": finished}[state.state].append(info)
        return QueueStatus(
            pending=tuple(pending),
            failed=tuple(failed),
            done=tuple(finished),
            invalid=tuple(invalid),
        )

    async def job(self, job_id: str) -> JobInfo:
        """One job of the queue as it is now, or :class:`NotFound`."""
        check_id(job_id, "job")
        status = await self.status()
        for info in (*status.pending, *status.failed, *status.done):
            if info.id == job_id:
                return info
        raise NotFound(f"no job {job_id} in the queue {self._queue.place}")

    # -- running ------------------------------------------------------------------------

    async def run_pending(self, *, limit: int | None = None) -> list[JobOutcome]:
        """Run the pending jobs that are due, oldest first (at most ``limit``); each its
        own run. A job that failed waits until its ``not_before``; a ``failed`` one is
        never run (re-queue it)."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise InvalidRequest("`limit` must be a whole number >= 1, or None")
        now = self._now()
        runnable = [job for job in (await self.status()).pending if due(job, now)]
        outcomes: list[JobOutcome] = []
        for job in runnable[:limit]:
            outcomes.append(await self._run_job(job, "resume"))
        return outcomes

    async def run_job(self, job: JobInfo) -> JobOutcome:
        """Run one job now (due or not) in the run of its next attempt, then mark it done.

        The job's state is read first, so a stale ``job`` runs the right attempt. A job
        another process is running (its run's lease is held) comes back ``busy``; one
        whose turns are gone or whose extractor fails comes back ``failed``: the attempt
        is recorded as a signed marker and the job stays pending until the cap, then is
        ``failed``. A ``failed`` job is not run (its outcome says so; re-queue it).
        """
        if not isinstance(job, JobInfo):
            raise InvalidRequest("`job` must be a JobInfo (from enqueue or status)")
        return await self._run_job(await self.job(job.id), "resume")

    async def replay_job(self, job: JobInfo) -> JobOutcome:
        """Replay a job's recorded run (``job.run_id``) strictly (every call from its memo,
        nothing live, every recorded step consumed): what CI checks. Writes nothing; a
        divergence or a missing step comes back ``failed`` naming it."""
        return await self._run_job(job, "strict")

    async def _run_job(self, job: JobInfo, mode: str) -> JobOutcome:
        run_id = job.run_id or f"job-{job.id}"
        attempt = job.attempts + 1
        if mode != "strict" and job.state == "failed":
            return JobOutcome(
                id=job.id,
                run_id=run_id,
                state="failed",
                attempt=job.attempts,
                error=f"gave up after {job.attempts} attempts ({job.last_error}); re-queue it",
            )
        if mode != "strict" and self._scope.frozen:
            return JobOutcome(id=job.id, run_id=run_id, state="held", error=_HELD, attempt=attempt)
        # Every recorded job ran unfrozen (a frozen queue runs none): its replay opens so.
        scope = self._scope.replace(frozen=False) if mode == "strict" else self._scope
        try:
            tools = self._memory.tools(scope, run_id=run_id, mode=mode, lifecycle="job")
        except Conflict as exc:
            return JobOutcome(
                id=job.id, run_id=run_id, state="busy", error=str(exc), attempt=attempt
            )
        notes = Attempt()
        try:
            learned, superseded = await self._builder.build(tools, job, mode, run_id, notes)
        except Conflict as exc:
            return JobOutcome(
                id=job.id, run_id=run_id, state="busy", error=str(exc), attempt=attempt
            )
        except MemsealError as exc:
            if mode == "strict":
                return JobOutcome(id=job.id, run_id=run_id, state="failed", error=str(exc))
            return await self._failed(job, run_id, attempt, str(exc), planned=notes.planned)
        finally:
            # The lease lapses by itself; the outcome already says what happened.
            if mode == "strict":
                # The strict check (every recorded step replayed) is the replay's verdict.
                await tools.close()
            else:
                with contextlib.suppress(MemsealError):
                    await tools.close()
        if mode == "strict":
            return JobOutcome(
                id=job.id,
                run_id=run_id,
                state="done",
                learned=tuple(learned),
                superseded=tuple(superseded),
                attempt=attempt,
            )
        marker = self._memory.tools(self._queue)
        # The run that finished the job is named, so a replay after retries finds it.
        tags = [DONE_TAG, f"done:{job.id}"]
        if run_id != f"job-{job.id}":
            tags.append(f"run:{run_id}"[:64])
        await marker.call(
            "memory_store",
            {
                "learning": {"text": f"job {job.id} done", "learning_kind": "scratch"},
                "tags": tags,
            },
        )
        return JobOutcome(
            id=job.id,
            run_id=run_id,
            state="done",
            learned=tuple(learned),
            superseded=tuple(superseded),
            attempt=attempt,
        )

    async def _failed(
        self, job: JobInfo, run_id: str, attempt: int, error: str, *, planned: bool = False
    ) -> JobOutcome:
        """Record a failed attempt (a signed marker in the queue) and say when it retries;
        ``planned``: its run recorded a model's plan, which the next attempt reuses."""
        now = self._now()
        retry_at = self._retry.retry_at(attempt, now, job=job.id)
        mark = FailureMark(
            v=1,
            job=job.id,
            round=job.round,
            attempt=attempt,
            run=run_id,
            at=stamp(now),
            error=error[:MAX_ERROR_CHARS],
            retry_at=None if retry_at is None else stamp(retry_at),
            planned=planned,
        )
        await self._memory.tools(self._queue).call(
            "memory_store",
            {
                "learning": {"text": encode_mark(mark), "learning_kind": "scratch"},
                "tags": [FAILED_TAG, f"failed:{job.id}", f"attempt:{job.round}.{attempt}"],
            },
        )
        return JobOutcome(
            id=job.id,
            run_id=run_id,
            state="failed",
            error=mark.error,
            attempt=attempt,
            retry_at=mark.retry_at,
        )

    async def requeue(self, job_id: str, *, reason: str) -> Requeued:
        """Make a failed job pending again: a signed note in the queue opening its next
        round (its attempts count from one, no backoff holds it). A pending job that has
        failed may be re-queued too (its backoff is cleared); a done one, or one that never
        failed, is refused."""
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise InvalidRequest(f"`reason` must be 1 to {MAX_REASON} characters")
        job = await self.job(job_id)
        if job.state == "done":
            raise InvalidRequest(f"job {job_id} is done: there is nothing to re-queue")
        if job.attempts == 0:
            raise InvalidRequest(f"job {job_id} is pending and has not failed: nothing to re-queue")
        mark = RequeueMark(
            v=1, job=job.id, round=job.round + 1, at=stamp(self._now()), reason=reason.strip()
        )
        run_id = f"requeue-{secrets.token_hex(8)}"
        tools = self._memory.tools(self._queue, run_id=run_id, lifecycle="job-queue")
        try:
            note = await tools.call(
                "memory_store",
                {
                    "learning": {"text": encode_mark(mark), "learning_kind": "scratch"},
                    "tags": [REQUEUE_TAG, f"requeued:{job.id}", f"round:{mark.round}"],
                },
            )
        finally:
            await tools.close()
        return Requeued(note=note["id"], job=await self.job(job_id), run_id=run_id)

    # -- writeBack ----------------------------------------------------------------------

    async def retract(self, item_id: str, *, reason: str) -> Retraction:
        """Take back a learning this layer does not keep: a signed note naming the item and
        ``reason`` in the queue, then a recorded, signed forget of it (never a silent delete)."""
        check_unfrozen(self._scope, "retract", "the learning is not taken back")
        check_id(item_id, "item_id")
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise InvalidRequest(f"`reason` must be 1 to {MAX_REASON} characters")
        note = await self._memory.tools(self._queue).call(
            "memory_store",
            {
                "learning": {
                    "text": f"retracted {item_id}: {reason.strip()}",
                    "learning_kind": "scratch",
                },
                "tags": [RETRACTION_TAG, f"retracted:{item_id}"[:64]],
            },
        )
        run_id = f"retract-{secrets.token_hex(8)}"
        tools = self._memory.tools(self._scope, run_id=run_id, lifecycle="retraction")
        try:
            result = await tools.call("memory_forget", {"ids": [item_id]}, key=f"retract:{item_id}")
        finally:
            await tools.close()
        return Retraction(
            note=note["id"],
            item=item_id,
            forgotten=item_id in result.get("forgotten", ()),
            run_id=run_id,
        )


def _child(place: str, segment: str) -> str:
    return segment if not place else f"{place}/{segment}"


def _utc_now() -> datetime:
    return datetime.now(UTC)
