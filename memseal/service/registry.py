"""The runs the service holds: one :class:`~memseal.replay.Run` per run id, for its scope.

A request naming a run gets the run this process holds for that id (opened
in ``resume`` mode on first use, so a run recorded before a restart replays
its memo); steps follow arrival order unless the caller passes one. A run
id belongs to the whole scope that started it (place, reach, writes, floor,
default trust, freeze, allow list), and every call runs with its caller's
own scope, so a held run never lends its scope to anyone:

* a caller placed elsewhere is told there is no such run (404), so no
  request can replay, or learn of, another tenant's run;
* a caller at the same place whose scope differs in any other field is
  refused (409: the run belongs to another scope), never let in.

Idle runs beyond :data:`MAX_OPEN_RUNS` are closed, oldest first; a closed
run is opened again on its next call.

A memo hit writes no entry, so the ledger never says when a step was answered
from its record. For the runs it holds, the registry counts it itself: each
unkeyed call this process answered, per step, as *replayed* (the step had a
memo and was not revalidated: in ``resume`` mode any other call at a recorded
step is a divergence, refused) or *live*. The counts live as long as the
held run (:meth:`RunRegistry.answered_here`); a keyed call is not counted.
The hits of every process (this one's held runs included, keyed calls too)
are in the unsigned ``memo_hits`` table each run adds to on its lease
renewals and close (see :mod:`memseal.replay.memo`); the status says them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from memseal.ledger.errors import Conflict, InvalidRequest, MemsealError, NotFound
from memseal.memory import Memory
from memseal.replay import Run
from memseal.replay.runs.identity import ScopeIdentity
from memseal.replay.runs.memo import hits_of
from memseal.replay.runs.run import other_scope
from memseal.tools import ToolScope

__all__ = ["MAX_OPEN_RUNS", "MAX_STEP", "RunRegistry", "identity_of"]

MAX_OPEN_RUNS: Final = 1000
MAX_STEP: Final = 1_000_000
#: How often a takeover waiting for in-flight calls looks again (seconds).
_IN_FLIGHT_POLL: Final = 0.005


def identity_of(scope: ToolScope) -> dict[str, Any]:
    """What a ``run_started`` entry records of a scope (and what must match to use the run)."""
    return ScopeIdentity.of(scope).recorded()


def _refuse(run_id: str, differs: list[str]) -> None:
    if "place" in differs:
        raise NotFound(f"no run {run_id!r} in this scope")
    if differs:
        raise Conflict(other_scope(run_id, differs))


@dataclass
class _Held:
    run: Run
    scope: ToolScope
    identity: ScopeIdentity
    busy: int = 0
    steps: set[int] = field(default_factory=set)
    used: float = field(default_factory=time.monotonic)
    #: Per step: how many calls this process answered from the memo, and how many live.
    replayed: dict[int, int] = field(default_factory=dict)
    live: dict[int, int] = field(default_factory=dict)


class RunRegistry:
    """The runs held by one service process (see the module docstring)."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._lock = asyncio.Lock()

    @property
    def open_runs(self) -> int:
        """How many runs this process holds open (the ``memseal_runs_open`` gauge)."""
        return len(self._held)

    async def _owner(self, run_id: str) -> dict[str, Any] | None:
        """The scope identity that started ``run_id`` (None: never started)."""
        store = self._memory.ledger.store
        rows = await store.rows("SELECT started_seq FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            return None
        record = await store.read(int(rows[0][0]))
        body = msgspec.json.decode(bytes(record.entry().body))
        if not isinstance(body, dict):
            return None
        return body

    async def check_owner(self, run_id: str, scope: ToolScope) -> bool:
        """Whether ``run_id`` exists and was started by this very scope."""
        _check_run_id(run_id)
        owner = await self._owner(run_id)
        return owner is not None and not ScopeIdentity.of(scope).differs_from(owner)

    async def _get(self, run_id: str, scope: ToolScope) -> _Held:
        _check_run_id(run_id)
        wanted = ScopeIdentity.of(scope)
        async with self._lock:
            held = self._held.get(run_id)
            if held is None:
                owner = await self._owner(run_id)
                if owner is not None:
                    _refuse(run_id, wanted.differs_from(owner))
                held = _Held(
                    run=self._memory.run(run_id, scope, mode="resume"),
                    scope=scope,
                    identity=wanted,
                )
                self._held[run_id] = held
                await self._evict()
            elif held.identity != wanted:
                # The held run's own scope is known whole, even for a run whose entry
                # (recorded before scopes were) holds only part of it.
                _refuse(run_id, wanted.differs_from(held.identity.recorded()) or ["scope"])
            self._held.move_to_end(run_id)
            held.used = time.monotonic()
            return held

    async def _evict(self) -> None:
        while len(self._held) > MAX_OPEN_RUNS:
            victim = next((k for k, h in self._held.items() if h.busy == 0), None)
            if victim is None:
                return
            held = self._held.pop(victim)
            with contextlib.suppress(MemsealError):
                await held.run.close(check=False)

    async def call(
        self,
        run_id: str,
        scope: ToolScope,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None,
        *,
        step: int | None = None,
        revalidate: bool = False,
        key: str | None = None,
    ) -> tuple[int, Any]:
        """Call a tool as the next step of ``run_id`` (or as ``step``); returns (step, result).

        A keyed call without ``step`` takes its recorded step (the memo) or the next
        free one; the run lets one call of a key run at a time.
        """
        held = await self._get(run_id, scope)
        run = held.run
        if step is None and key is not None:
            held.busy += 1
            try:
                result = await run.call(name, arguments, revalidate=revalidate, key=key)
            finally:
                held.busy -= 1
            taken = run.step_of(key)
            assert taken is not None  # a keyed call that returned was recorded at a step
            return taken, result
        memo: bool | None  # None: not known, the call is not counted
        if step is None:
            candidate = run.next_step
            memo = await self._has_memo(run_id, candidate)
            # No await from here to the call: the run takes its next step when the call
            # starts, and one taken meanwhile by another request leaves this one uncounted.
            step = run.next_step
            if step != candidate:
                memo = None
            awaitable = run.call(name, arguments, revalidate=revalidate)
        else:
            if not 0 <= step <= MAX_STEP:
                raise InvalidRequest(f"`step` must be 0 to {MAX_STEP}")
            memo = await self._has_memo(run_id, step)
            if step in held.steps:
                raise Conflict(f"run {run_id!r} step {step} is already being called")
            if step < run.steps_issued:
                # A step this process already issued is called again (a client retrying):
                # a fresh Run object re-reads the memo, so the step replays as recorded.
                run = await self._reopen(run_id, held)
            awaitable = _call_at(run, step, name, arguments, revalidate, key)
        held.busy += 1
        held.steps.add(step)
        try:
            result = await awaitable
            if memo is not None:
                tally = held.replayed if memo and not revalidate else held.live
                tally[step] = tally.get(step, 0) + 1
            return step, result
        finally:
            held.busy -= 1
            held.steps.discard(step)

    async def _has_memo(self, run_id: str, step: int) -> bool:
        """Whether ``step`` of ``run_id`` has a memo (read before its call)."""
        rows = await self._memory.ledger.store.rows(
            "SELECT 1 FROM memos WHERE run_id = ? AND step = ?", (run_id, step)
        )
        return bool(rows)

    def answered_here(self, run_id: str) -> dict[int, tuple[int, int]] | None:
        """Per step, the (replayed, live) unkeyed calls this process answered in ``run_id``
        since it opened the run; None when it does not hold the run."""
        held = self._held.get(run_id)
        if held is None:
            return None
        steps = sorted(held.replayed.keys() | held.live.keys())
        return {s: (held.replayed.get(s, 0), held.live.get(s, 0)) for s in steps}

    async def _reopen(self, run_id: str, held: _Held) -> Run:
        async with self._lock:
            if held.busy:
                raise Conflict(f"run {run_id!r} has calls in flight; retry the step after them")
            old = held.run
            await old.close(check=False)
            fresh = self._memory.run(run_id, held.scope, mode="resume")
            fresh.skip_to(old.steps_issued)
            held.run = fresh
            return fresh

    async def status(self, run_id: str, scope: ToolScope) -> dict[str, Any]:
        """What the ledger and this process know of ``run_id`` (404 outside ``scope``)."""
        _check_run_id(run_id)
        if not await self.check_owner(run_id, scope):
            raise NotFound(f"no run {run_id!r} in this scope")
        store = self._memory.ledger.store
        memos = await store.rows(
            "SELECT count(*), max(step) FROM memos WHERE run_id = ?", (run_id,)
        )
        lease = await store.rows(
            "SELECT started_seq, lease_until FROM runs WHERE run_id = ?", (run_id,)
        )
        held = self._held.get(run_id)
        count, last = memos[0]
        hits, last_hit = await hits_of(store, run_id)
        return {
            "run_id": run_id,
            "started_seq": int(lease[0][0]),
            "recorded_steps": int(count),
            "last_step": None if last is None else int(last),
            "held_here": held is not None,
            "steps_issued": None if held is None else held.run.steps_issued,
            "mode": None if held is None else held.run.mode,
            "leased": float(lease[0][1]) > time.time(),
            "memo_hits": hits,
            "last_hit_at": last_hit,
        }

    async def close_run(self, run_id: str, scope: ToolScope, *, wait: float = 0.0) -> bool:
        """Close (release) a held run; returns whether this process held it.

        With calls of the run in flight it raises Conflict, or with ``wait`` seconds
        first lets them finish (an MCP session taking over a run another client is
        calling waits for those calls rather than failing its own first call).
        """
        _check_run_id(run_id)
        deadline = time.monotonic() + wait
        while True:
            async with self._lock:
                held = self._held.get(run_id)
                if held is None or held.identity != ScopeIdentity.of(scope):
                    if not await self.check_owner(run_id, scope):
                        raise NotFound(f"no run {run_id!r} in this scope")
                    return False
                if not held.busy:
                    del self._held[run_id]
                    break
                if time.monotonic() >= deadline:
                    raise Conflict(f"run {run_id!r} has calls in flight")
            await asyncio.sleep(_IN_FLIGHT_POLL)
        await held.run.close(check=False)
        return True

    async def close(self) -> None:
        """Close every held run (at shutdown), releasing their leases."""
        async with self._lock:
            held = list(self._held.values())
            self._held.clear()
        for h in held:
            with contextlib.suppress(MemsealError):
                await h.run.close(check=False)


def _check_run_id(run_id: object) -> None:
    if not isinstance(run_id, str) or not 1 <= len(run_id) <= 200 or not run_id.isprintable():
        raise InvalidRequest("`run_id` must be 1 to 200 printable characters")


def _call_at(
    run: Run, step: int, name: str, arguments: Any, revalidate: bool, key: str | None
) -> Awaitable[Any]:
    """Call ``step`` of ``run`` explicitly: a client retrying a step, or resuming after a
    restart, is served at that position (see :meth:`Run.call_at`)."""
    return run.call_at(step, name, arguments, revalidate=revalidate, key=key)
