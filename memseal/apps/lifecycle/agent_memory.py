"""AgentMemory: the four moments of an agent session, each a recorded call.

=================  ========================================================
``start()``        the session-start brief: a :data:`SESSION_START` pack
``pre_turn()``     the context for an incoming message, within a budget,
                   with ``refers_to`` read from the days it names
``post_turn()``    the turn's messages stored as one conversation item
                   under the thread
``compact()``      the older turns of the thread folded into a summary
                   within a budget (extractive by default; a model is a
                   :class:`Summariser`); the folded turns are kept, so the
                   summary's sources stay verifiable
=================  ========================================================

Every read and write goes through a run of the host's memory, one run per
reach (``<session>/thread``, ``/own``, ``/team``, ``/brain``), each bound to
the scope :class:`MemoryLayout` gives that reach. Every call carries a key
named after its moment and turn (``start``, ``pre/3``, ``post/3``,
``compact/3/store``...): a session killed and restarted re-drives its loop
from the top and gets the recorded brief and contexts back, and a turn
already logged is not logged twice. A resumed session that asks a
recorded moment something else (another message at turn 3) is a
:class:`ReplayDivergence`: it is not the session that was recorded.

``post_turn`` and ``compact`` return what they hand back for the
background belief builds (:class:`BuildRequest`: the thread and the item
ids to read), which a job queue consumes. Given a :class:`JobQueue`
(``jobs=``, built on :meth:`MemoryLayout.learnings_writer` of the agent),
``post_turn`` also queues its build, recorded in the session's run
``<session>/queue`` under the key ``queue/<turn>``: a resumed session gets the
recorded job back and never queues a turn twice. Under a frozen layout
(``MemoryLayout(..., frozen=True)``) both are a ``frozen`` :class:`Refusal`
before any call, and the model's tools refuse their writes: nothing is written.

The read moments also read the past: ``start(as_of=view)``, ``pre_turn(...,
as_of=view)`` and ``briefing(as_of=view)`` take a host's view of the memory as
of a point (``await memory.as_of(N)``) and read each reach through
``view.tools(scope)`` with the same scopes, unrecorded (a read of the past
belongs to no run and has no key). The writing moments have no past.

A compaction's build is handed back, never queued by the session: every
turn it folds was queued when it was logged, and a build of older turns run
after the newer ones were built would let an older fact ("I live in
Berlin") supersede the newer belief ("I moved to Lisbon"), a stale fact
returned as current. A host that logged turns without a queue queues
``compacted.build`` itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from datetime import UTC, date, datetime, tzinfo
from typing import Any, Final, Literal, Protocol

import msgspec

from memseal.apps.as_of import AsOfTools, AsOfView
from memseal.engine import Reach
from memseal.engine._dates import extract_refs, resolve
from memseal.ledger.entry import format_time
from memseal.ledger.errors import InvalidRequest
from memseal.memory import Memory
from memseal.replay.runs import Run
from memseal.tools.policy import check_unfrozen
from memseal.tools.scope import ToolScope

from ._summary import ExtractiveSummariser, FoldedTurn
from .briefing import briefing
from .jobs import JobQueue
from .layout import MemoryLayout, check_name
from .pack import (
    PRE_TURN,
    SESSION_START,
    THROUGH_TAG,
    ContextPack,
    PackPreset,
    ReachName,
    Recorder,
    count_tokens,
    holistic_recall,
)

__all__ = [
    "AgentMemory",
    "BuildRequest",
    "Compacted",
    "ExtractiveSummariser",
    "FoldedTurn",
    "PastReader",
    "Summariser",
    "refers_to_of",
]

DEFAULT_COMPACT_BUDGET: Final = 300
DEFAULT_KEEP: Final = 6
_TURN_PAGES: Final = 20
_MESSAGE_CHARS: Final = 16_000


class PastReader:
    """A :class:`Recorder` (and briefing source) over a view's read tools: nothing is
    recorded, so a call's key names nothing and is dropped."""

    def __init__(self, tools: AsOfTools) -> None:
        self._tools = tools

    def specs(self) -> Sequence[Any]:
        """The specs of the view's read tools."""
        return self._tools.specs()

    def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Awaitable[Any]:
        """Run a read tool over the past (``key`` ignored: a past read is recorded nowhere)."""
        return self._tools.call(name, {} if arguments is None else arguments)


class BuildRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a moment hands back for a background belief build: read these items of
    the thread (the job cites them as the learning's sources)."""

    kind: Literal["turn", "compaction"]
    agent: str
    thread: str
    turn: int
    source_ids: tuple[str, ...]
    #: The id of the job the session queued for it (None: no queue, or not queued).
    job: str | None = None


class Compacted(msgspec.Struct, frozen=True, kw_only=True):
    """A compaction's outcome: the summary stored (None: nothing to fold), the turns it
    folded, its token count, and the build request for the summary."""

    summary_id: str | None
    folded: tuple[str, ...]
    tokens: int
    build: BuildRequest | None


class Summariser(Protocol):
    """Folds turns into a summary of at most ``budget_tokens`` (see :func:`count_tokens`)."""

    async def summarise(
        self, previous: str | None, turns: Sequence[FoldedTurn], budget_tokens: int
    ) -> str:
        """The new summary: ``previous`` (the last one, or None) with ``turns`` folded in."""


def refers_to_of(message: str, at: datetime, zone: tzinfo = UTC) -> dict[str, str] | None:
    """The ``refers_to`` of a message that names days ("yesterday", "on 2 March",
    "last Friday"), read at ``at`` in ``zone``; None when it names none."""
    refs = extract_refs(message)
    if not refs:
        return None
    days: set[date] = resolve(refs, format_time(at), zone)
    return {"from": min(days).isoformat(), "to": max(days).isoformat()}


def _turn(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**9:
        raise InvalidRequest(
            "`turn` must be a whole number from 0 (the turn's place in the thread)"
        )
    return value


def _text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"`{field}` must be non-empty text")
    if len(value) > _MESSAGE_CHARS:
        raise InvalidRequest(f"`{field}` is {len(value)} characters; at most {_MESSAGE_CHARS}")
    return value


class AgentMemory:
    """The four moments of one agent's session on one thread (see the module docstring).

    ``memory`` opens the runs (``memseal.open(...)``); ``layout`` names the
    tenant's tree; ``agent`` and ``thread`` are names checked by the
    layout; ``session`` names the runs (default: ``<agent>.<thread>``), and ``mode``
    is the runs' (``resume`` by default; ``strict`` replays a recorded
    session in CI). ``zone`` reads the days a message names.
    """

    def __init__(
        self,
        memory: Memory,
        layout: MemoryLayout,
        *,
        agent: str,
        thread: str,
        session: str | None = None,
        mode: str = "resume",
        summariser: Summariser | None = None,
        zone: tzinfo = UTC,
        start_preset: PackPreset = SESSION_START,
        turn_preset: PackPreset = PRE_TURN,
        jobs: JobQueue | None = None,
    ) -> None:
        if not isinstance(layout, MemoryLayout):
            raise InvalidRequest("`layout` must be a MemoryLayout")
        if jobs is not None and not isinstance(jobs, JobQueue):
            raise InvalidRequest("`jobs` must be a JobQueue or None")
        for name, preset in (("start_preset", start_preset), ("turn_preset", turn_preset)):
            if not isinstance(preset, PackPreset):
                raise InvalidRequest(f"`{name}` must be a PackPreset")
        if not isinstance(zone, tzinfo):
            raise InvalidRequest("`zone` must be a tzinfo")
        self.layout = layout
        self.agent = check_name(agent, "agent")
        self.thread = check_name(thread, "thread")
        # The agent in the default name: two agents' threads of one name are two sessions.
        self.session = check_name(f"{agent}.{thread}" if session is None else session, "session")
        self.summariser: Summariser = summariser or ExtractiveSummariser()
        self.zone = zone
        self.start_preset = start_preset
        self.turn_preset = turn_preset
        node = layout.agent(agent)
        scopes: dict[ReachName, ToolScope] = {
            "thread": layout.thread_writer(agent, thread),
            "own": layout.reader(node, Reach.exact(node)),
            "team": layout.reader(layout.team, Reach.exact(layout.team)),
            "brain": layout.brain_reader(),
        }
        self.scopes: Mapping[ReachName, ToolScope] = scopes
        self._runs: dict[ReachName, Run] = {
            reach: memory.run(
                f"{self.session}/{reach}", scope, mode=mode, lifecycle=f"session/{reach}"
            )
            for reach, scope in scopes.items()
        }
        #: The model's own tools: the agent writer scope, every call recorded in
        #: ``<session>/model`` (hand ``tools.toolset()`` to the model).
        self.tools: Run = memory.run(
            f"{self.session}/model",
            layout.agent_writer(agent),
            mode=mode,
            lifecycle="session/model",
        )
        self.jobs = jobs
        self._queue: Run | None = None
        if jobs is not None:
            # A queue whose jobs cannot read this thread would queue builds that only fail.
            thread_node = layout.thread(agent, thread)
            reach = jobs.scope.reach
            if reach is None or not reach.admits(thread_node):
                raise InvalidRequest(
                    f"`jobs`: the queue's reach does not include the thread {thread_node}; "
                    "build it on layout.learnings_writer(agent)"
                )
            self._queue = memory.run(
                f"{self.session}/queue", jobs.queue_scope, mode=mode, lifecycle="session/queue"
            )

    @property
    def run_ids(self) -> tuple[str, ...]:
        """The ids of the session's runs (export or replay each of them)."""
        queue = () if self._queue is None else (f"{self.session}/queue",)
        return (
            *(f"{self.session}/{reach}" for reach in self._runs),
            f"{self.session}/model",
            *queue,
        )

    @property
    def readers(self) -> Mapping[str, Recorder]:
        """The recorder of each reach, as :func:`holistic_recall` takes them."""
        readers: dict[str, Recorder] = dict(self._runs.items())
        return readers

    def past_readers(self, view: AsOfView) -> Mapping[str, Recorder]:
        """The reader of each reach over ``view``: the same scopes, read-only, unrecorded."""
        return {reach: PastReader(view.tools(scope)) for reach, scope in self.scopes.items()}

    def _readers(self, as_of: AsOfView | None) -> tuple[Mapping[str, Recorder], bool]:
        """The readers of a moment, and whether its calls are keyed (recorded)."""
        if as_of is None:
            return self.readers, True
        return self.past_readers(_view(as_of)), False

    async def close(self, *, check: bool = True) -> None:
        """Close the session's runs (strict: fail if a recorded call was never replayed)."""
        errors: list[BaseException] = []
        queue = () if self._queue is None else (self._queue,)
        for run in (*self._runs.values(), self.tools, *queue):
            try:
                await run.close(check=check)
            except Exception as exc:  # every lease released first, then the first error
                errors.append(exc)
        if errors:
            raise errors[0]

    async def __aenter__(self) -> AgentMemory:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        await self.close(check=exc_type is None)

    async def briefing(
        self,
        *,
        pack: ContextPack | None = None,
        budget_tokens: int = 2_000,
        as_of: AsOfView | None = None,
    ) -> str:
        """The system prompt for the model's tools (see :func:`briefing`), with ``pack``
        (the session-start brief, say) at its end; recorded as ``brief/holds``. With
        ``as_of``, the brief of the model's tools over that view (read-only), unrecorded."""
        scope = self.layout.agent_writer(self.agent)
        if as_of is None:
            return await briefing(self.tools, scope, pack=pack, budget_tokens=budget_tokens)
        past = PastReader(_view(as_of).tools(scope))
        return await briefing(
            past, scope.replace(writes=False), pack=pack, budget_tokens=budget_tokens, key=None
        )

    # -- the four moments -----------------------------------------------------------------

    async def start(
        self, *, budget_tokens: int | None = None, as_of: AsOfView | None = None
    ) -> ContextPack:
        """The session-start brief (a :data:`SESSION_START` pack, recorded as ``start``);
        with ``as_of``, the brief the session would have started with then (unrecorded)."""
        readers, keyed = self._readers(as_of)
        return await holistic_recall(
            readers,
            self.start_preset,
            budget_tokens=budget_tokens,
            key="start" if keyed else None,
        )

    async def pre_turn(
        self,
        message: str,
        *,
        turn: int,
        at: datetime | None = None,
        budget_tokens: int | None = None,
        as_of: AsOfView | None = None,
    ) -> ContextPack:
        """The context for ``message`` at ``turn`` (recorded as ``pre/<turn>``); with
        ``as_of``, the context the memory as of that view gives (unrecorded).

        Days the message names ("yesterday", "on March 2") become its
        ``refers_to``, read at ``at`` (the message's time; default now) in the
        session's zone. Pass ``at`` for a session that may be resumed on
        another day: "yesterday" read then is another day, and the resumed
        call would diverge from the recorded one.
        """
        message = _text(message, "message")
        turn = _turn(turn)
        when = at if at is not None else datetime.now(UTC)
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise InvalidRequest("`at` must be an aware datetime")
        readers, keyed = self._readers(as_of)
        return await holistic_recall(
            readers,
            self.turn_preset,
            query=message[:2_000],
            refers_to=refers_to_of(message, when, self.zone),
            budget_tokens=budget_tokens,
            key=f"pre/{turn}" if keyed else None,
        )

    async def post_turn(
        self,
        *,
        turn: int,
        user: str | None = None,
        assistant: str | None = None,
        messages: object = None,
    ) -> BuildRequest:
        """Store the turn's messages as one conversation item under the thread
        (recorded as ``post/<turn>``: logged once however often the loop re-runs),
        and, with a job queue, queue its belief build (``queue/<turn>``, once too).

        Give ``user`` and/or ``assistant``, or ``messages`` (``{role, text}``).
        """
        check_unfrozen(self.scopes["thread"], "post_turn", "the turn is not logged")
        turn = _turn(turn)
        if messages is None:
            said = [(r, t) for r, t in (("user", user), ("assistant", assistant)) if t is not None]
        elif user is not None or assistant is not None:
            raise InvalidRequest("give `messages`, or `user` and `assistant`: not both")
        else:
            if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
                raise InvalidRequest("`messages` must be a list of {role, text}")
            said = []
            for index, message in enumerate(messages):
                if not isinstance(message, Mapping) or set(message) != {"role", "text"}:
                    raise InvalidRequest(f"`messages[{index}]` must be {{role, text}}")
                said.append((message["role"], message["text"]))
        if not said:
            raise InvalidRequest("a turn needs `user`, `assistant` or `messages`")
        turns = [{"role": role, "text": _text(text, "text")} for role, text in said]
        stored = await self._runs["thread"].call(
            "memory_store",
            {"conversation": {"turns": turns}, "tags": [f"turn:{turn}"]},
            key=f"post/{turn}",
        )
        build = BuildRequest(
            kind="turn",
            agent=self.agent,
            thread=self.thread,
            turn=turn,
            source_ids=(stored["id"],),
        )
        if self.jobs is None or self._queue is None:
            return build
        job = await self.jobs.enqueue(
            "beliefs",
            thread=self.thread,
            source_ids=build.source_ids,
            via=self._queue,
            key=f"queue/{turn}",
        )
        return msgspec.structs.replace(build, job=job.id)

    async def compact(
        self,
        *,
        turn: int,
        keep: int = DEFAULT_KEEP,
        budget_tokens: int = DEFAULT_COMPACT_BUDGET,
    ) -> Compacted:
        """Fold the thread's turns older than its ``keep`` newest (and not yet folded)
        into a new summary of at most ``budget_tokens`` (recorded under ``compact/<turn>``).

        The summary is a ``context_summary`` learning in the thread whose
        evidence names the folded turns' ids and whose tag ``through:<seq>``
        marks the newest one; the turns themselves stay, signed and readable.
        """
        check_unfrozen(self.scopes["thread"], "compact", "the thread is not folded")
        turn = _turn(turn)
        if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= 500:
            raise InvalidRequest("`keep` must be a whole number from 0 to 500")
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
            raise InvalidRequest("`budget_tokens` must be a whole number from 1 to 4000")
        if not 1 <= budget_tokens <= 4_000:
            raise InvalidRequest("`budget_tokens` must be a whole number from 1 to 4000")
        thread = self._runs["thread"]
        base = f"compact/{turn}"
        last = await thread.call(
            "memory_list",
            {"filter": {"kinds": ["context_summary"]}, "limit": 1},
            key=f"{base}/summary",
        )
        previous = last["items"][0] if last["items"] else None
        fresh = await _unfolded(thread, base, _through(previous))
        folding = fresh[: max(len(fresh) - keep, 0)]
        if not folding:
            return Compacted(summary_id=None, folded=(), tokens=0, build=None)
        turns = [
            FoldedTurn(
                id=e["id"],
                ledger_ref=e["ledger_ref"],
                text=e["text"],
                observed_at=str((e.get("meta") or {}).get("observed_at", "")),
            )
            for e in folding
        ]
        text, tokens = await self._summarise(previous, turns, budget_tokens)
        folded = tuple(t.id for t in turns)
        if not text.strip():
            text = f"({len(folded)} turns folded; nothing stated)"
        evidence = "folded turns: " + " ".join(folded)
        if len(evidence) > 4_000:
            evidence = (
                f"folded {len(folded)} turns, seq {turns[0].ledger_ref} to {turns[-1].ledger_ref}"
            )
        stored = await thread.call(
            "memory_store",
            {
                "learning": {
                    "text": text,
                    "learning_kind": "context_summary",
                    "confidence": 1.0,
                    "evidence": evidence,
                },
                "tags": [f"{THROUGH_TAG}{turns[-1].ledger_ref}", f"compaction:{turn}"],
            },
            key=f"{base}/store",
        )
        return Compacted(
            summary_id=stored["id"],
            folded=folded,
            tokens=tokens,
            build=BuildRequest(
                kind="compaction",
                agent=self.agent,
                thread=self.thread,
                turn=turn,
                source_ids=(stored["id"], *folded),
            ),
        )

    async def _summarise(
        self, previous: Mapping[str, Any] | None, turns: Sequence[FoldedTurn], budget_tokens: int
    ) -> tuple[str, int]:
        """The summariser's new summary and its tokens; InvalidRequest when it is not
        text or is over the budget (a host's summariser is checked, not trusted)."""
        text = await self.summariser.summarise(
            None if previous is None else previous["text"], turns, budget_tokens
        )
        if not isinstance(text, str):
            raise InvalidRequest("the summariser must return text")
        tokens = count_tokens(text)
        if tokens > budget_tokens:
            raise InvalidRequest(
                f"the summariser returned {tokens} tokens; the budget is {budget_tokens}"
            )
        return text, tokens


async def _unfolded(thread: Run, base: str, through: int) -> list[dict[str, Any]]:
    """The thread's turns newer than seq ``through``, oldest first, listed under keys
    from ``base`` (paging stops at the first page that reaches ``through``)."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    for page in range(_TURN_PAGES):
        args: dict[str, Any] = {"filter": {"kinds": ["conversation"]}, "limit": 50}
        if cursor is not None:
            args["cursor"] = cursor
        listed = await thread.call("memory_list", args, key=f"{base}/turns/{page}")
        entries.extend(listed["items"])
        cursor = listed.get("next_cursor")
        if cursor is None or any(e["ledger_ref"] <= through for e in listed["items"]):
            break
    return sorted((e for e in entries if e["ledger_ref"] > through), key=lambda e: e["ledger_ref"])


def _view(value: object) -> AsOfView:
    """``value`` as a view of the past; InvalidRequest naming ``as_of`` for anything else."""
    if not isinstance(value, AsOfView):
        raise InvalidRequest("`as_of` must be a view of the memory: `await memory.as_of(N)`")
    return value


def _through(summary: Mapping[str, Any] | None) -> int:
    if summary is None:
        return -1
    for tag in (summary.get("meta") or {}).get("tags", ()):
        if isinstance(tag, str) and tag.startswith(THROUGH_TAG):
            try:
                return int(tag[len(THROUGH_TAG) :])
            except ValueError:
                break
    return -1
