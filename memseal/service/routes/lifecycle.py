"""The agent memory lifecycle over HTTP: session start, pre-turn, post-turn, compaction.

An agent token placed at an agent node (``team:acme/agent:helper``) serves
that agent's sessions, one per thread named in the path. The layout is the
token's: its tenant is the node above the agent, its trust floor and
default the token's. A session reads its thread, the agent's and the
team's learnings and the brain, so the token's reach must cover every one
of them (``subtree:team:acme`` does; ``Reach.of`` the agent does not reach
the brain or the threads below it): a token that does not is refused,
naming the reach, never served a narrower session in silence. Post-turn
and compaction write, so they need a token with writes.

Each request opens the session's runs, makes its recorded calls (keyed by
moment and turn, as :class:`~memseal.apps.lifecycle.AgentMemory` keys
them) and releases them: a request repeated after a lost answer gets the
recorded answer. Two requests of one session at the same moment: the
second is a 409 (the runs are leased by one caller at a time).

The read moments (start, pre-turn) take a point of the log as query
parameters (``?as_of=N``, ``as_of_time``, ``as_of_run`` with ``as_of_step``:
:mod:`memseal.service.history`): the pack (and brief) the memory as of that
point gives, read through the same scopes, unrecorded, answered with
``"as_of": N``. The writing moments take no point.

A post-turn also queues the turn's belief build in the agent's job queue
(``<agent>/queue:jobs``, keyed, so a repeated request queues nothing).
``GET /v1/jobs`` is the queue's status for the agent's token; ``POST
/v1/admin/jobs/run`` runs an agent's pending jobs for an admin whose reach
covers the agent (``memseal serve --worker PLACE`` runs them in the
background instead). ``POST /v1/admin/jobs/requeue`` makes a job that failed
pending again for such an admin: a signed note in the queue naming the job
and the admin's reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, Final, TypeVar

import msgspec
from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import Response

from memseal.apps.lifecycle import AgentMemory, ContextPack, JobQueue, MemoryLayout
from memseal.engine import Namespace, Reach
from memseal.ledger.errors import InvalidRequest

from ..deps import Admin, Agent, MemoryDep, arguments
from ..errors import ApiError
from ..history import AsOf
from ..models import json_response
from ..tokens import Principal

__all__ = ["queue_for", "router", "session_for"]

router = APIRouter(tags=["lifecycle"])
_T = TypeVar("_T")

Thread = Annotated[str, PathParam(min_length=1, max_length=128)]
_BODY: Final[dict[str, Any]] = {
    "requestBody": {
        "required": False,
        "description": "the moment's fields as a JSON object (see docs/lifecycle.md)",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


class _Struct(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class StartIn(_Struct):
    """The start moment's fields: the pack's budget, and whether to brief."""

    budget_tokens: int | None = None
    brief: bool = True


class PreTurnIn(_Struct):
    """The pre-turn moment's fields: the message, its turn and time, the budget."""

    message: str
    turn: int
    at: datetime | None = None
    budget_tokens: int | None = None


class Message(_Struct):
    """One message of a turn: who spoke and what was said."""

    role: str
    text: str


class PostTurnIn(_Struct):
    """The post-turn moment's fields: the turn and its messages."""

    turn: int
    user: str | None = None
    assistant: str | None = None
    messages: list[Message] | None = None


class CompactIn(_Struct):
    """The compaction's fields: the turn, the turns kept, the summary's budget."""

    turn: int
    keep: int = 6
    budget_tokens: int = 300


class RunJobsIn(_Struct):
    """Which agent's queue to run (its node), and at most how many jobs."""

    place: str
    limit: int | None = None


class RequeueIn(_Struct):
    """Which agent's queue (its node), which job, and why it is re-queued."""

    place: str
    job: str
    reason: str = "re-queued by an admin"


async def _body(request: Request, kind: type[_T]) -> _T:
    raw = await arguments(request, "fields")
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"the body: {exc}") from exc


def _covers(outer: Reach | None, inner: Reach) -> bool:
    if outer is None:
        return True
    if inner.mode == "exact":
        return outer.admits(inner.node)
    return outer.mode == "subtree" and Namespace(outer.node).contains(Namespace(inner.node))


def _agent_layout(who: Principal) -> tuple[MemoryLayout, str, str]:
    """The layout, tenant and agent name of a token placed at an agent node."""
    scope = who.scope
    place = Namespace(scope.place)
    if len(place.segments) < 2 or place.segments[-1][0] != "agent":
        raise ApiError(
            403,
            "forbidden",
            "the lifecycle routes need a token placed at an agent node (`team:x/agent:name`)",
        )
    tenant = "/".join(f"{k}:{n}" for k, n in place.segments[:-1])
    agent = place.segments[-1][1]
    layout = MemoryLayout(tenant=tenant, floor=scope.floor, default_trust=scope.default_trust)
    return layout, tenant, agent


def queue_for(memory: Any, layout: MemoryLayout, agent: str) -> JobQueue:
    """The agent's job queue: belief builds under the layout's learnings writer."""
    return JobQueue(memory, layout.learnings_writer(agent))


def session_for(who: Principal, memory: Any, thread: str, *, writes: bool) -> AgentMemory:
    """The session of ``who``'s agent on ``thread``, or a refusal naming what is missing."""
    scope = who.scope
    layout, tenant, agent = _agent_layout(who)
    session = f"life.{hashlib.blake2s(scope.place.encode(), digest_size=6).hexdigest()}.{thread}"
    needed = {
        "thread": Reach.exact(layout.thread(agent, thread)),
        "own": Reach.exact(layout.agent(agent)),
        "team": Reach.exact(layout.team),
        "brain": Reach.subtree(layout.brain_root),
        "jobs": Reach.subtree(layout.agent(agent)),
    }
    for name, reach in needed.items():
        if not _covers(scope.reach, reach):
            raise ApiError(
                403,
                "forbidden",
                f"the token's reach does not cover the session's `{name}` reach "
                f"({reach.mode}:{reach.node}); give it `subtree:{tenant}`",
            )
    if writes and (not scope.writes or scope.frozen):
        raise ApiError(403, "forbidden", "this moment writes: the token is read-only or frozen")
    return AgentMemory(
        memory,
        layout,
        agent=agent,
        thread=thread,
        session=session,
        jobs=queue_for(memory, layout, agent),
    )


@asynccontextmanager
async def _session(
    who: Principal, memory: Any, thread: str, *, writes: bool = False
) -> AsyncIterator[AgentMemory]:
    opened = session_for(who, memory, thread, writes=writes)
    try:
        yield opened
    finally:
        await opened.close(check=False)


def _pack(pack: ContextPack) -> dict[str, Any]:
    return {"pack": msgspec.to_builtins(pack), "markdown": pack.markdown()}


@router.post(
    "/v1/sessions/{thread}/start",
    summary="Session start: the brief (a ContextPack) and the system-prompt briefing",
    openapi_extra=_BODY,
)
async def start(
    request: Request,
    who: Agent,
    thread: Thread,
    memory: MemoryDep,
    point: AsOf,
) -> Response:
    """
    \f
    The session-start pack of ``thread``, and the briefing unless ``brief`` is false;
    with a point (``as_of``...), those of the memory as of it, unrecorded.
    """
    body = await _body(request, StartIn)
    view = await point.view(memory, who)
    async with _session(who, memory, thread) as session:
        pack = await session.start(budget_tokens=body.budget_tokens, as_of=view)
        out = _pack(pack)
        if body.brief:
            out["brief"] = await session.briefing(pack=pack, as_of=view)
    if view is not None:
        out["as_of"] = view.size
    return json_response(out)


@router.post(
    "/v1/sessions/{thread}/pre-turn",
    summary="Pre-turn: the context for an incoming message, within a budget",
    openapi_extra=_BODY,
)
async def pre_turn(
    request: Request,
    who: Agent,
    thread: Thread,
    memory: MemoryDep,
    point: AsOf,
) -> Response:
    """
    \f
    The context of ``message`` at ``turn`` (with a point: as of it, unrecorded).
    """
    body = await _body(request, PreTurnIn)
    view = await point.view(memory, who)
    async with _session(who, memory, thread) as session:
        pack = await session.pre_turn(
            body.message,
            turn=body.turn,
            at=body.at,
            budget_tokens=body.budget_tokens,
            as_of=view,
        )
    out = _pack(pack)
    if view is not None:
        out["as_of"] = view.size
    return json_response(out)


@router.post(
    "/v1/sessions/{thread}/post-turn",
    summary="Post-turn: store the turn's messages under the thread (once per turn)",
    openapi_extra=_BODY,
)
async def post_turn(request: Request, who: Agent, thread: Thread, memory: MemoryDep) -> Response:
    """
    \f
    The turn logged, and the build request it hands back.
    """
    body = await _body(request, PostTurnIn)
    messages = None if body.messages is None else [msgspec.to_builtins(m) for m in body.messages]
    async with _session(who, memory, thread, writes=True) as session:
        built = await session.post_turn(
            turn=body.turn, user=body.user, assistant=body.assistant, messages=messages
        )
    return json_response({"build": msgspec.to_builtins(built)})


@router.post(
    "/v1/sessions/{thread}/compact",
    summary="Compaction: fold the older turns of the thread into a summary",
    openapi_extra=_BODY,
)
async def compact(request: Request, who: Agent, thread: Thread, memory: MemoryDep) -> Response:
    """
    \f
    The summary stored and the turns it folded.
    """
    body = await _body(request, CompactIn)
    async with _session(who, memory, thread, writes=True) as session:
        done = await session.compact(
            turn=body.turn, keep=body.keep, budget_tokens=body.budget_tokens
        )
    return json_response(msgspec.to_builtins(done))


@router.get("/v1/jobs", summary="The agent's background job queue: pending and done jobs")
async def jobs_status(request: Request, who: Agent, memory: MemoryDep) -> Response:
    """
    \f
    The pending and done belief builds of the token's agent (recorded reads of its queue).
    """
    if request.query_params:
        # The queue is the token's agent's: a parameter naming another is refused, not ignored.
        raise InvalidRequest("`/v1/jobs` takes no parameters: it lists the token's agent's queue")
    layout, tenant, agent = _agent_layout(who)
    node = layout.agent(agent)
    if not _covers(who.scope.reach, Reach.subtree(node)):
        raise ApiError(
            403,
            "forbidden",
            f"the token's reach does not cover the agent's queue (subtree:{node}); "
            f"give it `subtree:{tenant}`",
        )
    status = await queue_for(memory, layout, agent).status()
    return json_response(msgspec.to_builtins(status))


@router.post(
    "/v1/admin/jobs/run",
    summary="Run an agent's pending background jobs now (each its own recorded run)",
    openapi_extra=_BODY,
)
async def run_jobs(request: Request, who: Admin, memory: MemoryDep) -> Response:
    """
    \f
    The outcome of each pending job of the agent at ``place``, oldest first.
    """
    body = await _body(request, RunJobsIn)
    outcomes = await _admin_queue(who, memory, body.place).run_pending(limit=body.limit)
    return json_response({"outcomes": [msgspec.to_builtins(o) for o in outcomes]})


@router.post(
    "/v1/admin/jobs/requeue",
    summary="Re-queue an agent's failed background job (a signed note naming the reason)",
    openapi_extra=_BODY,
)
async def requeue_job(request: Request, who: Admin, memory: MemoryDep) -> Response:
    """
    \f
    The job ``job`` of the agent at ``place`` pending again, and the note that says why.
    """
    body = await _body(request, RequeueIn)
    requeued = await _admin_queue(who, memory, body.place).requeue(body.job, reason=body.reason)
    return json_response(msgspec.to_builtins(requeued))


def _admin_queue(who: Principal, memory: Any, value: str) -> JobQueue:
    """The queue of the agent node ``value``, for an admin whose reach covers it."""
    place = Namespace(value, field="place")
    if len(place.segments) < 2 or place.segments[-1][0] != "agent":
        raise InvalidRequest("`place` must be an agent node, like team:acme/agent:writer")
    if not _covers(who.scope.reach, Reach.subtree(place.text)):
        raise ApiError(403, "forbidden", f"the admin's reach does not cover subtree:{place.text}")
    tenant = "/".join(f"{k}:{n}" for k, n in place.segments[:-1])
    return queue_for(memory, MemoryLayout(tenant=tenant), place.segments[-1][1])
