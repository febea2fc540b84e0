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
   a belief with a subject lists the beliefs already held on it;
3. it stores each belief, citing its source turn ids in ``evidence`` and as
   ``turn:<id>`` tags, and forgets the beliefs it supersedes (a signed
   ``memory_forgotten`` entry each);
4. a ``done:<job id>`` marker is stored in the queue: the job is not run
   again.

:meth:`JobQueue.retract` is the learning layer's writeBack: a write it does
not keep is taken back by a signed retraction, a recorded note naming the
item and the reason, then a recorded forget of the item; never a silent
delete.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence
from typing import Any, Final, Literal

import blake3
import msgspec

from memseal.engine import Reach
from memseal.engine.items import MAX_IDS, MAX_TAGS
from memseal.ledger.errors import Conflict, InvalidRequest, MemsealError, StorageError

from ..scope import ToolScope
from ._extract import Belief, Extractor, RuleExtractor, SourceTurn, parse_turns
from .brain import RecordedCalls, RecordingMemory
from .pack import Recorder

__all__ = [
    "JOB_KINDS",
    "JobInfo",
    "JobOutcome",
    "JobQueue",
    "QueueStatus",
    "Retraction",
]

JobKind = Literal["beliefs"]
JOB_KINDS: Final[tuple[str, ...]] = ("beliefs",)
JOB_TAG: Final = "memseal-job"
DONE_TAG: Final = "memseal-job-done"
RETRACTION_TAG: Final = "memseal-retraction"
BELIEF_TAG: Final = "belief"
_LIST_LIMIT: Final = 50
_MAX_REASON: Final = 2_000


class JobSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A queued job as its stored text says (decoded strictly)."""

    v: Literal[1]
    kind: JobKind
    thread: str
    source_ids: tuple[str, ...]


class JobInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One queued job: its id (the queue item's), kind, thread, source ids, state."""

    id: str
    kind: str
    thread: str
    source_ids: tuple[str, ...]
    state: Literal["pending", "done"]
    replayed: bool = False


class JobOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What running one job did: beliefs stored and superseded, or why it did not run."""

    id: str
    run_id: str
    state: Literal["done", "failed", "busy"]
    learned: tuple[str, ...] = ()
    superseded: tuple[str, ...] = ()
    error: str | None = None


class QueueStatus(msgspec.Struct, frozen=True, kw_only=True):
    """The queue now: pending and done jobs, and queue items that are not jobs."""

    pending: tuple[JobInfo, ...] = ()
    done: tuple[JobInfo, ...] = ()
    invalid: tuple[str, ...] = ()


class Retraction(msgspec.Struct, frozen=True, kw_only=True):
    """A retraction: the note's id, the item taken back, and whether it was forgotten."""

    note: str
    item: str
    forgotten: bool
    run_id: str


_encoder = msgspec.json.Encoder(order="deterministic")
_spec_decoder = msgspec.json.Decoder(JobSpec)


def _digest(text: str) -> str:
    return blake3.blake3(text.encode("utf-8")).hexdigest(length=12)


def _tag(prefix: str, value: str) -> str:
    """``prefix:value`` if it fits a tag (64 characters), else ``prefix:#<digest>``."""
    tag = f"{prefix}:{value}"
    return tag if len(tag) <= 64 else f"{prefix}:#{_digest(value)}"


def _check_thread(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 200 or not value.isprintable():
        raise InvalidRequest("`thread` must be 1 to 200 printable characters")
    return value


def _check_sources(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidRequest("`source_ids` must be a list of the turns' item ids")
    ids = tuple(dict.fromkeys(value))
    if not 1 <= len(ids) <= MAX_IDS:
        raise InvalidRequest(f"`source_ids` must list 1 to {MAX_IDS} item ids")
    for item in ids:
        if not isinstance(item, str) or not 1 <= len(item) <= 128 or not item.isascii():
            raise InvalidRequest(f"`source_ids`: {item!r:.40} is not an item id")
    return ids


class JobQueue:
    """Durable belief builds for one agent (see the module docstring).

    ``scope`` is the agent's learnings writer: beliefs are stored at its place,
    and its reach must include the threads whose turns jobs read (for example
    ``Reach.subtree`` of the agent's node). ``queue_place`` is where jobs are
    queued (default ``<place>/queue:jobs``); ``extractor`` draws beliefs from
    turns (default :class:`RuleExtractor`).
    """

    def __init__(
        self,
        memory: RecordingMemory,
        scope: ToolScope,
        *,
        queue_place: str | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        if not callable(getattr(memory, "tools", None)):
            raise InvalidRequest("`memory` must be an open memseal memory (memseal.open)")
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be the agent's learnings writer ToolScope")
        if not scope.writes or scope.frozen:
            raise InvalidRequest("`scope` must allow writes: a job stores what it learns")
        if extractor is not None and not isinstance(extractor, Extractor):
            raise InvalidRequest("`extractor` must have an async extract(turns) method")
        place = queue_place if queue_place is not None else _child(scope.place, "queue:jobs")
        self._memory = memory
        self._scope = scope
        self._queue = ToolScope.placed_at(
            place, reach=Reach.exact(place), floor="stale", default_trust="stale"
        )
        self._extractor: Extractor = extractor if extractor is not None else RuleExtractor()

    @property
    def queue_scope(self) -> ToolScope:
        """The scope the queue's own entries are recorded under."""
        return self._queue

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
            v=1, kind="beliefs", thread=_check_thread(thread), source_ids=_check_sources(source_ids)
        )
        text = _encoder.encode(spec).decode()
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
        )

    async def status(self) -> QueueStatus:
        """The pending and done jobs (recorded reads of the queue)."""
        tools = self._memory.tools(self._queue, run_id=f"queue-{secrets.token_hex(8)}")
        try:
            return await self._status(tools)
        finally:
            await tools.close()

    async def _status(self, tools: RecordedCalls) -> QueueStatus:
        queued = await _list_all(tools, JOB_TAG)
        done = {
            tag[len("done:") :]
            for item in await _list_all(tools, DONE_TAG)
            for tag in item.get("meta", {}).get("tags", ())
            if isinstance(tag, str) and tag.startswith("done:")
        }
        pending: list[JobInfo] = []
        finished: list[JobInfo] = []
        invalid: list[str] = []
        # Oldest first: a listing is newest first.
        for item in reversed(queued):
            try:
                spec = _spec_decoder.decode(item.get("text", ""))
            except (msgspec.DecodeError, TypeError):
                invalid.append(str(item.get("id")))
                continue
            state: Literal["pending", "done"] = "done" if item["id"] in done else "pending"
            info = JobInfo(
                id=item["id"],
                kind=spec.kind,
                thread=spec.thread,
                source_ids=spec.source_ids,
                state=state,
            )
            (finished if state == "done" else pending).append(info)
        return QueueStatus(pending=tuple(pending), done=tuple(finished), invalid=tuple(invalid))

    # -- running ------------------------------------------------------------------------

    async def run_pending(self, *, limit: int | None = None) -> list[JobOutcome]:
        """Run the pending jobs, oldest first (at most ``limit``); each its own run."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise InvalidRequest("`limit` must be a whole number >= 1, or None")
        pending = (await self.status()).pending
        outcomes: list[JobOutcome] = []
        for job in pending[:limit]:
            outcomes.append(await self.run_job(job))
        return outcomes

    async def run_job(self, job: JobInfo) -> JobOutcome:
        """Run one job in its run ``job-<id>`` (resumed if it was cut short), then mark it done.

        A job another process is running (its run's lease is held) comes back ``busy``;
        one whose turns are gone or whose extractor fails comes back ``failed`` and
        stays pending.
        """
        return await self._run_job(job, "resume")

    async def replay_job(self, job: JobInfo) -> JobOutcome:
        """Replay a job's recorded run strictly (every call from its memo, nothing live,
        every recorded step consumed): what CI checks. Writes nothing; a divergence or
        a missing step comes back ``failed`` naming it."""
        return await self._run_job(job, "strict")

    async def _run_job(self, job: JobInfo, mode: str) -> JobOutcome:
        run_id = f"job-{job.id}"
        try:
            tools = self._memory.tools(self._scope, run_id=run_id, mode=mode)
        except Conflict as exc:
            return JobOutcome(id=job.id, run_id=run_id, state="busy", error=str(exc))
        try:
            learned, superseded = await self._build(tools, job)
        except Conflict as exc:
            return JobOutcome(id=job.id, run_id=run_id, state="busy", error=str(exc))
        except MemsealError as exc:
            return JobOutcome(id=job.id, run_id=run_id, state="failed", error=str(exc))
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
            )
        marker = self._memory.tools(self._queue)
        await marker.call(
            "memory_store",
            {
                "learning": {"text": f"job {job.id} done", "learning_kind": "scratch"},
                "tags": [DONE_TAG, f"done:{job.id}"],
            },
        )
        return JobOutcome(
            id=job.id,
            run_id=run_id,
            state="done",
            learned=tuple(learned),
            superseded=tuple(superseded),
        )

    async def _build(self, tools: RecordedCalls, job: JobInfo) -> tuple[list[str], list[str]]:
        got = await tools.call("memory_get", {"ids": list(job.source_ids)})
        missing = [*got.get("missing", ()), *got.get("filtered", ())]
        if missing:
            raise InvalidRequest(
                f"job {job.id}: source turns not in reach or gone: {', '.join(missing[:5])}"
            )
        turns: list[SourceTurn] = []
        for item in got.get("items", ()):
            text = item.get("text")
            if isinstance(text, str):
                turns.extend(parse_turns(item["id"], text))
        try:
            beliefs = list(await self._extractor.extract(turns))
        except MemsealError:
            raise
        except Exception as exc:
            raise StorageError(
                f"job {job.id}: extractor {type(self._extractor).__name__} failed: {exc}"
            ) from exc
        learned: list[str] = []
        superseded: list[str] = []
        for belief in beliefs:
            if not isinstance(belief, Belief):
                raise StorageError(f"job {job.id}: the extractor returned a non-Belief")
            old: list[str] = []
            if belief.subject is not None:
                held = await _list_all(tools, _tag(BELIEF_TAG, belief.subject))
                # A forgotten text comes back from a memo as a marker, never equal to it.
                old = [item["id"] for item in held if item.get("text") != belief.text]
            stored = await tools.call(
                "memory_store",
                self._store_args(belief, job, old),
                key=f"learn:{_digest(belief.text)}",
            )
            learned.append(stored["id"])
            for item in old:
                if item == stored["id"]:
                    continue
                result = await tools.call("memory_forget", {"ids": [item]}, key=f"supersede:{item}")
                superseded.extend(result.get("forgotten", ()))
        return learned, superseded

    def _store_args(self, belief: Belief, job: JobInfo, old: Sequence[str]) -> dict[str, Any]:
        sources = belief.sources or job.source_ids
        evidence = f"from turns {', '.join(sources)} of thread {job.thread} (job {job.id})"
        if old:
            evidence += f"; supersedes {', '.join(old)}"
        tags = [BELIEF_TAG, _tag("thread", job.thread)]
        if belief.subject is not None:
            tags.append(_tag(BELIEF_TAG, belief.subject))
        if belief.preference:
            tags.append("preference")
        tags += [_tag("turn", source) for source in sources]
        return {
            "learning": {
                "text": belief.text,
                "learning_kind": belief.kind,
                "confidence": belief.confidence,
                "evidence": evidence[:4_000],
            },
            "tags": list(dict.fromkeys(tags))[:MAX_TAGS],
        }

    # -- writeBack ----------------------------------------------------------------------

    async def retract(self, item_id: str, *, reason: str) -> Retraction:
        """Take back a learning this layer does not keep: a signed note naming the item and
        ``reason`` in the queue, then a recorded, signed forget of it (never a silent delete)."""
        if not isinstance(item_id, str) or not 1 <= len(item_id) <= 128 or not item_id.isascii():
            raise InvalidRequest("`item_id` must be an item id")
        if not isinstance(reason, str) or not reason.strip() or len(reason) > _MAX_REASON:
            raise InvalidRequest(f"`reason` must be 1 to {_MAX_REASON} characters")
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
        tools = self._memory.tools(self._scope, run_id=run_id)
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


async def _list_all(tools: RecordedCalls, tag: str) -> list[dict[str, Any]]:
    """Every item carrying ``tag`` in reach, newest first (recorded pages)."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        arguments: dict[str, Any] = {"filter": {"tags_any": [tag]}, "limit": _LIST_LIMIT}
        if cursor is not None:
            arguments["cursor"] = cursor
        page = await tools.call("memory_list", arguments)
        items.extend(item for item in page.get("items", ()) if isinstance(item, dict))
        cursor = page.get("next_cursor")
        if not isinstance(cursor, str):
            return items


def _child(place: str, segment: str) -> str:
    return segment if not place else f"{place}/{segment}"
