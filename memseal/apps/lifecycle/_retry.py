"""Retries of failing background jobs: the policy, the signed markers, and a job's state.

A job's attempt that fails (its turns are gone, its extractor raises) is
recorded as a *failure marker*: a ``scratch`` learning in the job's queue
whose text is canonical JSON (:class:`FailureMark`: the job, the round, the
attempt, the run it ran in, when, the error, and when it may run again). A
marker is a signed ``memory_stored`` entry behind its ``memory_tool_call``,
like the job itself, so what a worker did with a job is in the ledger, not in
a worker's memory.

A *round* is the life of a job between re-queues. An admin's re-queue is a
*re-queue marker* (:class:`RequeueMark`) opening the next round: its
attempts count from one again and nothing of the round before holds it back.

:func:`job_state` folds a job's markers into its state:

1. a ``done:<job>`` marker: ``done``;
2. otherwise the current round is the highest round a re-queue opened (0
   without one), and its attempts are its distinct attempt numbers (two
   workers that both recorded attempt 3, one of them on a stale view, count
   once);
3. the latest attempt's marker says when the job may run again
   (``retry_at``); a marker with none (the cap was reached) makes the job
   ``failed``, never retried until re-queued; otherwise it is ``pending``.

The backoff is deterministic: attempt ``n`` of a job waits
``base * 2 ** (n - 1)`` seconds from its failure, at most ``max_seconds``,
moved by a *jitter* of at most ``jitter`` (default a quarter) of it either
way. The jitter is drawn from keyed blake3 over the job id and the attempt,
not from a random source: the same job and attempt always wait the same
time (a replay, a second worker, a test all agree), while jobs that failed
together (a model down for everyone) spread out rather than all come back
in the same second. The clock is the queue's (injected in tests), and the
time it read is in the marker, so every reader of the queue agrees when a
job is due.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final, Literal

import blake3
import msgspec

from memseal.ledger.entry import format_time
from memseal.ledger.errors import InvalidRequest

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "FailureMark",
    "JobState",
    "RequeueMark",
    "RetryPolicy",
    "attempt_run",
    "decode_failure",
    "decode_requeue",
    "encode_mark",
    "jitter_of",
    "job_state",
    "parse_time",
    "stamp",
]

DEFAULT_MAX_ATTEMPTS: Final = 5
#: The longest error a marker keeps (the rest is cut: a marker is a note, not a log).
MAX_ERROR_CHARS: Final = 500
_MAX_ATTEMPTS_CAP: Final = 1_000
_MAX_DELAY: Final = 7 * 24 * 3_600.0
#: The default jitter: a quarter of the delay, either way.
DEFAULT_JITTER: Final = 0.25
_MAX_JITTER: Final = 0.5
# A fixed key, not a secret: every worker must draw the same jitter for a job, so that a
# replay and a second worker agree on when it is due. The key only keeps this use of
# blake3 apart from every other (derived from a context string, as blake3 intends).
_JITTER_KEY: Final = blake3.blake3(
    b"retry jitter", derive_key_context="memseal 2026-12 job retry jitter v1"
).digest()


def jitter_of(job: str, attempt: int) -> float:
    """The jitter draw of ``job``'s attempt ``attempt``: a number in [-1, 1), keyed blake3
    over both, so the same job and attempt always draw the same, and jobs spread."""
    data = f"{job}\n{attempt}".encode()
    draw = int.from_bytes(blake3.blake3(data, key=_JITTER_KEY).digest(8), "big")
    return draw / 2.0**63 - 1.0


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often a failing job is tried and how long it waits between tries.

    ``max_attempts`` attempts in a round (default 5), then the job is
    ``failed``; attempt ``n`` waits ``base_seconds * 2 ** (n - 1)``, at most
    ``max_seconds``, before the next, moved by at most ``jitter`` of that
    (0 to 0.5, default 0.25: 75% to 125%) either way, the same for the same
    job and attempt (see the module docstring; 0 turns it off).
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_seconds: float = 30.0
    max_seconds: float = 3_600.0
    jitter: float = DEFAULT_JITTER

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if (
            isinstance(attempts, bool)
            or not isinstance(attempts, int)
            or not 1 <= attempts <= _MAX_ATTEMPTS_CAP
        ):
            raise InvalidRequest(
                f"`max_attempts` must be a whole number from 1 to {_MAX_ATTEMPTS_CAP}"
            )
        for name in ("base_seconds", "max_seconds"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0 <= value <= _MAX_DELAY
            ):
                raise InvalidRequest(
                    f"`{name}` must be a number of seconds from 0 to {_MAX_DELAY:g}"
                )
        if self.max_seconds < self.base_seconds:
            raise InvalidRequest("`max_seconds` must be at least `base_seconds`")
        jitter = self.jitter
        if (
            isinstance(jitter, bool)
            or not isinstance(jitter, int | float)
            or not math.isfinite(jitter)
            or not 0 <= jitter <= _MAX_JITTER
        ):
            raise InvalidRequest(
                f"`jitter` must be a fraction of the delay from 0 to {_MAX_JITTER}"
            )

    def delay(self, attempt: int, *, job: str | None = None) -> float:
        """The seconds attempt ``attempt`` (from 1) of ``job`` waits after it failed: the
        doubled, capped base moved by the job's jitter (without ``job``, the base)."""
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise InvalidRequest("`attempt` counts from 1")
        # 2 ** 60 seconds is past any cap: stop doubling there rather than overflow a float.
        base = float(min(self.base_seconds * 2.0 ** min(attempt - 1, 60), self.max_seconds))
        if job is None:
            return base
        return base * (1.0 + self.jitter * jitter_of(job, attempt))

    def retry_at(
        self, attempt: int, failed_at: datetime, *, job: str | None = None
    ) -> datetime | None:
        """When ``job`` may run again after attempt ``attempt`` failed at ``failed_at``;
        None when that was the last attempt the policy allows."""
        if attempt >= self.max_attempts:
            return None
        return failed_at + timedelta(seconds=self.delay(attempt, job=job))


class FailureMark(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """One failed attempt, as its marker's text says (decoded strictly).

    ``planned`` says the attempt's run recorded a model's plan before it failed: the
    round's next attempt reuses that plan, read from the run's signed entry, rather than
    asking the model again (see :mod:`._model_extract`). Left out of the text when
    false, so a marker of an attempt without a plan is byte for byte as before.
    """

    v: Literal[1]
    job: str
    round: int
    attempt: int
    run: str
    at: str
    error: str
    retry_at: str | None
    planned: bool = False


class RequeueMark(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An admin's re-queue: the round it opens, when, and why."""

    v: Literal[1]
    job: str
    round: int
    at: str
    reason: str


class JobState(msgspec.Struct, frozen=True, kw_only=True):
    """What a job's markers say of it (see :func:`job_state`)."""

    state: Literal["pending", "failed", "done"]
    round: int = 0
    attempts: int = 0
    last_error: str | None = None
    failed_at: str | None = None
    not_before: str | None = None
    #: The run of the attempt to come (pending), the last one (failed), or the one that
    #: finished the job (done).
    run_id: str
    #: The run of the round's latest attempt that recorded a model's plan, or None.
    plan_run: str | None = None


_encoder = msgspec.json.Encoder(order="deterministic")
_failure_decoder = msgspec.json.Decoder(FailureMark)
_requeue_decoder = msgspec.json.Decoder(RequeueMark)


def encode_mark(mark: FailureMark | RequeueMark) -> str:
    """A marker's canonical text."""
    return _encoder.encode(mark).decode()


def decode_failure(text: object) -> FailureMark | None:
    """The failure marker ``text`` holds, or None when it holds none (a forged or foreign
    item in the queue is ignored, never trusted half-way)."""
    if not isinstance(text, str):
        return None
    try:
        mark = _failure_decoder.decode(text)
    except (msgspec.DecodeError, TypeError):
        return None
    return mark if mark.round >= 0 and mark.attempt >= 1 else None


def decode_requeue(text: object) -> RequeueMark | None:
    """The re-queue marker ``text`` holds, or None."""
    if not isinstance(text, str):
        return None
    try:
        mark = _requeue_decoder.decode(text)
    except (msgspec.DecodeError, TypeError):
        return None
    return mark if mark.round >= 1 else None


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time a marker holds, or None if it is not one."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def stamp(moment: datetime) -> str:
    """A marker's time text."""
    return format_time(moment)


def attempt_run(job: str, round: int, attempt: int) -> str:
    """The run id of a job's attempt: ``job-<id>`` for the first, ``job-<id>.<round>.<n>``
    after, so each attempt re-reads its turns live and a killed attempt resumes its own."""
    return f"job-{job}" if (round, attempt) == (0, 1) else f"job-{job}.{round}.{attempt}"


def job_state(
    job: str,
    *,
    done_run: str | None,
    done: bool,
    failures: Iterable[FailureMark],
    requeues: Iterable[RequeueMark],
) -> JobState:
    """The state of ``job`` from its markers (see the module docstring)."""
    mine = [mark for mark in failures if mark.job == job]
    current = max((mark.round for mark in requeues if mark.job == job), default=0)
    # 1. done is done, whatever failed before it.
    ours = [mark for mark in mine if mark.round == current]
    # The highest attempt, not a count: were a marker lost, a count would hand out an attempt
    # number already used, and its run (already holding a failure) would never reach the cap.
    attempts = max((mark.attempt for mark in ours), default=0)
    latest = _latest(ours)
    planned = [mark for mark in ours if mark.planned]
    plan_run = max(planned, key=lambda m: m.attempt).run if planned else None
    if done:
        # A done marker that names no run was written by the round's next attempt.
        run = done_run or attempt_run(job, current, attempts + 1)
        return JobState(
            state="done",
            round=current,
            attempts=attempts,
            last_error=None if latest is None else latest.error,
            run_id=run,
            plan_run=plan_run,
        )
    # 2. the round's distinct attempts: a duplicate marker of one attempt counts once.
    if latest is None:
        return JobState(state="pending", round=current, run_id=attempt_run(job, current, 1))
    # 3. the latest attempt says when the job may run again, or that it may not.
    if latest.retry_at is None:
        return JobState(
            state="failed",
            round=current,
            attempts=attempts,
            last_error=latest.error,
            failed_at=latest.at,
            run_id=latest.run,
            plan_run=plan_run,
        )
    return JobState(
        state="pending",
        round=current,
        attempts=attempts,
        last_error=latest.error,
        failed_at=latest.at,
        not_before=latest.retry_at,
        run_id=attempt_run(job, current, max(m.attempt for m in ours) + 1),
        plan_run=plan_run,
    )


def _latest(marks: Sequence[FailureMark]) -> FailureMark | None:
    # The highest (round, attempt); of two markers of one attempt, the one that gives up
    # (no retry_at) wins, so a cap reached by either worker holds.
    if not marks:
        return None
    return max(marks, key=lambda m: (m.round, m.attempt, m.retry_at is None))
