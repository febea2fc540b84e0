"""The records of the job queue: a job as queued, as it stands, what running it did.

The queue's own items are read through the strict decoders here (a job's
text is :class:`JobSpec`, canonical JSON); what the queue hands a host is
the frozen structs :class:`JobInfo`, :class:`JobOutcome`,
:class:`QueueStatus`, :class:`Requeued` and :class:`Retraction`. The checks
of the values a host hands :class:`~.jobs.JobQueue` live here too, each
naming its field.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final, Literal

import blake3
import msgspec

from memseal.engine.items import MAX_IDS
from memseal.ledger.errors import InvalidRequest

from ._retry import JobState, parse_time

__all__ = [
    "MAX_REASON",
    "JobInfo",
    "JobOutcome",
    "JobSpec",
    "QueueStatus",
    "Requeued",
    "Retraction",
    "check_id",
    "check_sources",
    "check_thread",
    "digest",
    "due",
    "encoder",
    "info_of",
    "spec_decoder",
    "tag",
]

MAX_REASON: Final = 2_000
#: The tag a belief carries for each turn it was drawn from: ``tag(SOURCE_TAG, id)``.
SOURCE_TAG: Final = "turn"
JobKind = Literal["beliefs"]


class JobSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A queued job as its stored text says (decoded strictly)."""

    v: Literal[1]
    kind: JobKind
    thread: str
    source_ids: tuple[str, ...]


class JobInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One queued job: its id (the queue item's), kind, thread, source ids, state.

    ``attempts`` counts the failed attempts of its current ``round`` (a re-queue
    starts the next), ``last_error`` is the latest one's error, ``not_before``
    when a pending job that failed may run again, and ``run_id`` the run of its
    next attempt (pending), its last (failed) or the one that finished it (done).
    ``plan_run`` is the run of the round's latest failed attempt that recorded a
    model's plan: the next attempt takes its beliefs from there, not from the model.
    """

    id: str
    kind: str
    thread: str
    source_ids: tuple[str, ...]
    state: Literal["pending", "failed", "done"]
    replayed: bool = False
    round: int = 0
    attempts: int = 0
    last_error: str | None = None
    failed_at: str | None = None
    not_before: str | None = None
    run_id: str | None = None
    plan_run: str | None = None


class JobOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What running one job did: beliefs stored and superseded, or why it did not run.

    A ``failed`` outcome names its ``attempt`` and, when the job will be tried
    again, ``retry_at``; without one the job is ``failed`` until re-queued. A ``held``
    job did not run: its queue's scope is frozen (no attempt is spent).
    """

    id: str
    run_id: str
    state: Literal["done", "failed", "busy", "held"]
    learned: tuple[str, ...] = ()
    superseded: tuple[str, ...] = ()
    error: str | None = None
    attempt: int = 1
    retry_at: str | None = None


class QueueStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The queue now: pending, failed and done jobs, and queue items that are not jobs."""

    pending: tuple[JobInfo, ...] = ()
    done: tuple[JobInfo, ...] = ()
    invalid: tuple[str, ...] = ()
    failed: tuple[JobInfo, ...] = ()


class Requeued(msgspec.Struct, frozen=True, kw_only=True):
    """A re-queue: the signed note's id, the job as it is now, and the note's run."""

    note: str
    job: JobInfo
    run_id: str


class Retraction(msgspec.Struct, frozen=True, kw_only=True):
    """A retraction: the note's id, the item taken back, and whether it was forgotten."""

    note: str
    item: str
    forgotten: bool
    run_id: str


encoder = msgspec.json.Encoder(order="deterministic")
spec_decoder = msgspec.json.Decoder(JobSpec)


def digest(text: str) -> str:
    """A short blake3 digest of ``text`` (hex, 24 characters), for keys and tags."""
    return blake3.blake3(text.encode("utf-8")).hexdigest(length=12)


def tag(prefix: str, value: str) -> str:
    """``prefix:value`` if it fits a tag (64 characters), else ``prefix:#<digest>``."""
    tag = f"{prefix}:{value}"
    return tag if len(tag) <= 64 else f"{prefix}:#{digest(value)}"


def check_thread(value: object) -> str:
    """``value`` if it is a job's thread name, else :class:`InvalidRequest` naming it."""
    if not isinstance(value, str) or not 1 <= len(value) <= 200 or not value.isprintable():
        raise InvalidRequest("`thread` must be 1 to 200 printable characters")
    return value


def check_sources(value: object) -> tuple[str, ...]:
    """``value`` as a job's source ids (unique, in order), else :class:`InvalidRequest`."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidRequest("`source_ids` must be a list of the turns' item ids")
    ids = tuple(dict.fromkeys(value))
    if not 1 <= len(ids) <= MAX_IDS:
        raise InvalidRequest(f"`source_ids` must list 1 to {MAX_IDS} item ids")
    for item in ids:
        if not isinstance(item, str) or not 1 <= len(item) <= 128 or not item.isascii():
            raise InvalidRequest(f"`source_ids`: {item!r:.40} is not an item id")
    return ids


def check_id(value: object, field: str) -> str:
    """``value`` if it looks like an item id, else :class:`InvalidRequest` naming ``field``."""
    if not isinstance(value, str) or not 1 <= len(value) <= 128 or not value.isascii():
        raise InvalidRequest(f"`{field}` must be an item id")
    return value


def due(job: JobInfo, now: datetime) -> bool:
    """Whether a pending job may run at ``now`` (a marker whose time does not parse is
    read as due: a job is never held back by a time nobody can read)."""
    if job.not_before is None:
        return True
    when = parse_time(job.not_before)
    return when is None or when <= now


def info_of(job: str, spec: JobSpec, state: JobState) -> JobInfo:
    """The :class:`JobInfo` of a job from its queued spec and its markers' state."""
    return JobInfo(
        id=job,
        kind=spec.kind,
        thread=spec.thread,
        source_ids=spec.source_ids,
        state=state.state,
        round=state.round,
        attempts=state.attempts,
        last_error=state.last_error,
        failed_at=state.failed_at,
        not_before=state.not_before,
        run_id=state.run_id,
        plan_run=state.plan_run,
    )
