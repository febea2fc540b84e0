"""Durable runs: every tool call recorded as a signed entry, replayed from its memo.

A :class:`Run` is one agent session, named by its host. ``run.call(name,
args)`` reserves the next step at once (a plain method returning an
awaitable, so ``asyncio.gather`` keeps issue order), then either replays
the step's memo, checked against its signed entry, or runs the tool live
and records it: the tool's own writes, the ``memory_tool_call`` entry and
the memo row in one transaction.

Modes:

``record``      every call live; each supersedes any memo at its step.
``resume``      (default) memo where recorded, live from the first step
                with no memo on; a divergence fails closed unless the run
                was opened with ``fork=True`` (then a signed ``run_forked``
                entry, and live from there).
``strict``      memo only: no live call, any divergence fails, a call past
                the recorded end fails, and closing with recorded steps
                never replayed fails. The CI mode.
``revalidate``  every call live, replacements recorded, changed results
                listed in :attr:`Run.changes`.

A run belongs to the whole scope that opened it, recorded in its signed
``run_started`` entry: opened with any other scope, here or in another
process, it raises :class:`Conflict` before any call. Steps never leave a
gap: a step is consumed only when its entry commits (a call the store
refused, or the host cancelled, hands its step back to the next call), and
:meth:`Run.call_at` refuses a step beyond the next unrecorded one. A key, and
a step, is never in flight twice: the second call waits and gets the memo. A failed call is recorded
without its arguments (see :mod:`memseal.replay.runs.calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from typing import Any, Literal, cast

import msgspec
from nacl.signing import VerifyKey

from memseal.ledger.errors import Conflict, InvalidRequest, MemsealError, ReplayDivergence
from memseal.ledger.log import Ledger
from memseal.ledger.note import VerifierKey
from memseal.ledger.store import SqlStore
from memseal.tools.toolset import AsyncToolset

from ._lease import other_scope
from ._live import LiveCalls, Prepared, Preparer, Taken
from ._sent import (
    RECORDED_ERRORS,
    Sent,
    check_key,
    error_result,
    normal,
    outcome,
    recorded_call,
    sent_form,
    withheld_digest,
)
from ._steps import StepBook
from .divergence import diverged, field_diff
from .identity import ScopeIdentity, fingerprint
from .memo import MemoRow
from .provenance import Verified, check_memo

__all__ = [
    "MODES",
    "RECORDED_ERRORS",
    "Change",
    "Mode",
    "Prepared",
    "Preparer",
    "Run",
    "Sent",
    "new_run_id",
    "other_scope",
    "sent_form",
    "withheld_digest",
]

Mode = Literal["record", "resume", "strict", "revalidate"]
MODES: tuple[Mode, ...] = ("record", "resume", "strict", "revalidate")


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """A revalidated step whose fresh result differs from the recorded one."""

    step: int
    tool: str
    diff: tuple[str, ...]


def new_run_id() -> str:
    """A fresh random run id."""
    return f"run-{secrets.token_hex(8)}"


def _check_arguments(*, run_id: object, mode: object, oneshot: bool, lifecycle: object) -> None:
    """Refuse a run's id, mode or lifecycle kind, naming the argument, before anything opens."""
    if lifecycle is not None and (
        not isinstance(lifecycle, str)
        or not 1 <= len(lifecycle) <= 64
        or not lifecycle.isprintable()
    ):
        raise InvalidRequest("`lifecycle` must be 1 to 64 printable characters")
    if not isinstance(run_id, str) or not 1 <= len(run_id) <= 200 or not run_id.isprintable():
        raise InvalidRequest("`run_id` must be 1 to 200 printable characters")
    if mode not in MODES:
        raise InvalidRequest(f"`mode` {mode!r} is not one of {', '.join(MODES)}")
    if oneshot and mode != "record":
        raise InvalidRequest("a one-shot run records its single call: mode must be record")


class Run(LiveCalls):
    """One durable run (see the module docstring). Build it with ``memory.run(...)``."""

    def __init__(
        self,
        *,
        run_id: str,
        mode: str,
        tools: Preparer,
        scope: ScopeIdentity,
        ledger: Ledger,
        store: SqlStore,
        secret: bytes,
        keys: Sequence[VerifierKey],
        fork: bool = False,
        lease_ttl: float = 15.0,
        oneshot: bool = False,
        owner: str = "",
        lifecycle: str | None = None,
    ) -> None:
        _check_arguments(run_id=run_id, mode=mode, oneshot=oneshot, lifecycle=lifecycle)
        #: The lifecycle kind signed into the run's ``run_started`` entry (None: a plain run).
        self.lifecycle = lifecycle
        self.run_id = run_id
        self.mode: Mode = cast(Mode, mode)  # one of MODES: checked above
        self.fork = fork
        self.changes: list[Change] = []
        self._tools = tools
        self._scope = scope
        self._ledger = ledger
        self._store = store
        self._secret = secret
        # The list itself, not a copy: a key another process rotated to joins it (memseal.open).
        self._key_list = keys
        self._known: dict[str, VerifyKey] = {}
        self._ttl = lease_ttl
        # A one-call run under a fresh id: its start, its call and its release commit
        # together, one transaction instead of three (a call made outside any run).
        self._oneshot = oneshot
        # Who opened the run in this process (a memory's token): named when another
        # Run object of this process asks for the same lease.
        self._owner = owner
        self._holder = secrets.token_hex(16)
        self._init_bookkeeping()

    def _init_bookkeeping(self) -> None:
        # Which step each call gets: positional and keyed steps, steps given back by a
        # failed call and handed out again (re-issues). A keyed step no keyed call of this
        # Run object has claimed yet is not skipped by the unkeyed numbering, so an
        # unkeyed call there still diverges (a host that dropped its keys fails loudly).
        self._steps = StepBook()
        self._live_from: int | None = None
        self._recorded: set[int] = set()
        #: Steps whose memo row was missing at resume and was put back from the log.
        self.restored: list[int] = []
        # Each step's current signed call at resume: what a replacement supersedes, even
        # when the step's memo row was tampered with.
        self._signed: dict[int, int] = {}
        self._consumed: set[int] = set()
        # Call keys: each recorded key's step (loaded at resume from the signed calls),
        # each keyed step's key, and one lock a key so that its calls run one at a time.
        self._keyed: dict[str, int] = {}
        self._key_at: dict[int, str] = {}
        self._key_locks: dict[str, asyncio.Lock] = {}
        # Steps with a call in flight: a second call of the step (call_at, a re-issue)
        # waits for the first to commit or fail, never runs live beside it.
        self._step_locks: dict[int, asyncio.Lock] = {}
        # Steps recorded before a fork at or below them: no longer current, so a key
        # recorded there is run live again (at its step), never replayed from its memo.
        self._stale: set[int] = set()
        # Steps call() reserved whose awaitable has not started: one cancelled before its
        # first step never runs its own bookkeeping, so the next reservation hands it back.
        self._unstarted: dict[int, Coroutine[Any, Any, Any]] = {}
        # Steps this Run object recorded live: called again, they return their memo.
        self._here: set[int] = set()
        # Read tools that ran no snapshot query here: their reads are bracketed by head
        # reads from then on (see LiveCalls._prepare).
        self._unsized: set[str] = set()
        self._start_lock = asyncio.Lock()
        self._started = False
        self._closed = False
        self._renewer: asyncio.Task[None] | None = None
        # Memo hits not yet in the memo_hits table: signed call seq -> (step, hits).
        self._hits: dict[int, tuple[int, int]] = {}

    # -- calls ----------------------------------------------------------------------

    @property
    def steps_issued(self) -> int:
        """One more than the highest step handed out so far."""
        return self._steps.issued

    @property
    def next_step(self) -> int:
        """The step the next :meth:`call` takes (a step freed by a failed call first)."""
        return self._steps.next_step()

    def is_recorded(self, step: int) -> bool:
        """Whether ``step`` has a signed call in this run (recorded, or found at resume)."""
        return step in self._recorded

    def step_of(self, key: str) -> int | None:
        """The step call key ``key`` is recorded at in this run, or None (not recorded)."""
        return self._keyed.get(key)

    def specs(self) -> Sequence[Any]:
        """The specs of the tools this run offers (its tools' scope decides)."""
        return self._tools.specs()

    def toolset(self) -> AsyncToolset:
        """The run's tools for OpenAI, Anthropic, LangChain or MCP: every call recorded here."""
        return AsyncToolset.of(self)

    def refusal_before_approval(self, name: str, arguments: object = None) -> Any:
        """The policy refusal a call to ``name`` meets in this run, or None; records nothing.

        What an approval gate asks first: the run's tools' scope decides.
        """
        ask = getattr(self._tools, "refusal_before_approval", None)
        return None if ask is None else ask(name, arguments)

    def call_at(
        self,
        step: int,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        revalidate: bool = False,
        key: str | None = None,
    ) -> Awaitable[Any]:
        """Call an explicit ``step`` (a caller numbering its own steps, as HTTP and MCP
        clients may); the next step :meth:`call` reserves moves past it.

        A step may be one already recorded or handed out, or the next one: a step
        beyond that would leave a gap no export could ever fill, so it is refused
        (:class:`Conflict` naming the step expected). A step this run already
        recorded, called again, returns its memo. ``key`` is as for :meth:`call`; a
        key recorded at another step is a :class:`ReplayDivergence`.
        """
        if self._closed:
            raise InvalidRequest(f"run {self.run_id!r} is closed")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise InvalidRequest(f"`step` must be an integer >= 0, not {step!r:.40}")
        key = check_key(key)
        args = {} if arguments is None else arguments
        return self._call_at(step, name, args, revalidate, key)

    async def _call_at(
        self, step: int, name: Any, arguments: Any, revalidate: bool, key: str | None
    ) -> Any:
        await self._start()
        if key is None:
            return await self._call_at_step(step, name, arguments, revalidate, key)
        # The key's one lock, as for call(key=...): a key is never in flight twice.
        async with self._key_locks.setdefault(key, asyncio.Lock()):
            return await self._call_at_step(step, name, arguments, revalidate, key)

    async def _call_at_step(
        self, step: int, name: Any, arguments: Any, revalidate: bool, key: str | None
    ) -> Any:
        assert self._live_from is not None
        self._reclaim()
        if key is not None and self._keyed.get(key, step) != step:
            raise ReplayDivergence(
                f"run {self.run_id!r} step {step}: key {key!r} is recorded at step "
                f"{self._keyed[key]}, not this one",
                run_id=self.run_id,
                step=step,
            )
        expected = max(self._steps.issued, self._live_from)
        if step > expected and step not in self._recorded:
            raise Conflict(
                f"run {self.run_id!r}: step {step} would leave a gap; the next step is {expected}"
            )
        self._steps.claim(step)
        return await self._call(step, name, arguments, revalidate, key)

    def skip_to(self, step: int) -> None:
        """Number the next :meth:`call` from ``step`` on (a reopened run continuing)."""
        self._steps.skip_to(step)

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        revalidate: bool = False,
        key: str | None = None,
    ) -> Awaitable[Any]:
        """Reserve the next step now and return an awaitable of its result.

        ``revalidate`` (the host's choice, never the model's) runs the call
        live and records a replacement for the step's memo.

        ``key`` is the id the model gave the tool call (OpenAI's
        ``tool_calls[].id``, Anthropic's ``tool_use.id``, LangChain's
        ``ToolCall["id"]``), signed with the call. A key this run recorded
        returns its memo, in any order, in a resumed run or this one; the same
        key with another call is a :class:`ReplayDivergence` naming the key; an
        unknown key is a new live step (the next free one). Its step is chosen
        when it runs, not now.
        """
        if self._closed:
            raise InvalidRequest(f"run {self.run_id!r} is closed")
        key = check_key(key)
        args = {} if arguments is None else arguments
        if key is not None:
            return self._call_keyed(key, name, args, revalidate)
        self._reclaim()
        step = self._steps.take()
        pending = self._call_next(step, name, args, revalidate)
        self._unstarted[step] = pending
        return pending

    async def _call_next(self, step: int, name: Any, arguments: Any, revalidate: bool) -> Any:
        while True:
            try:
                return await self._call(step, name, arguments, revalidate, None)
            except Taken:
                # Its handed-back step was recorded after all (a cancelled or lost commit
                # that landed): the run chose the step, so it chooses the next one.
                self._reclaim()
                step = self._steps.take()

    def _reclaim(self) -> None:
        """Hand back each step whose call was cancelled (or closed) before it started."""
        for step, pending in list(self._unstarted.items()):
            if inspect.getcoroutinestate(pending) == inspect.CORO_CLOSED:
                del self._unstarted[step]
                if step not in self._recorded:
                    self._give_back(step)

    async def _call_keyed(self, key: str, name: Any, arguments: Any, revalidate: bool) -> Any:
        await self._start()
        # One call of a key at a time: a second one issued while the first is in flight
        # waits, then finds the key recorded and gets its memo, never a second entry.
        async with self._key_locks.setdefault(key, asyncio.Lock()):
            while True:
                step = self._keyed.get(key)
                if step is None:
                    step = self._free_step()
                # A recorded key's step leaves the unkeyed numbering where it is: the
                # unkeyed calls skip the steps keyed calls took, so a run mixing both, re-run
                # with its keyed calls in another order, gives each unkeyed call its own step.
                self._steps.keyed(step)
                try:
                    return await self._call(step, name, arguments, revalidate, key)
                except Taken:
                    continue  # another key's lost commit landed there: a fresh step

    def _free_step(self) -> int:
        """The step a new keyed call takes: a handed-back one, else the first unrecorded one
        past every step handed out (never a recorded step: that is another call's)."""
        self._reclaim()
        return self._steps.take_free(
            self._live_from or 0, lambda s: s in self._recorded and s not in self._stale
        )

    async def _call(
        self, step: int, name: Any, arguments: Any, revalidate: bool, key: str | None
    ) -> Any:
        # A step is consumed only when its entry commits: a call that fails before (the
        # store refused it, the lease was lost, the host cancelled it) hands its step back,
        # so the run never has a gap that every export of it would fail on. A call whose
        # step was recorded (an error the model can act on is recorded too) keeps it.
        self._unstarted.pop(step, None)
        entered = False
        try:
            async with self._step_locks.setdefault(step, asyncio.Lock()):
                entered = True
                # A call that waited here for the step's first call: the step is its own now.
                self._steps.entered(step)
                try:
                    return await self._call_step(step, name, arguments, revalidate, key)
                except Taken:
                    self._recorded.add(step)
                    if await self._learn_key(step) != key or key is None:
                        raise
                # The step's unknown-outcome call was this key's: its memo, checked.
                return await self._call_step(step, name, arguments, revalidate, key)
        except Taken:
            raise
        except BaseException:
            # asyncio.CancelledError included: the bookkeeping, then the error as it was. A
            # call cancelled while it waited for the step's first call leaves it to that one.
            if entered and step not in self._recorded:
                self._give_back(step)
            raise

    async def _learn_key(self, step: int) -> str | None:
        """A step another call recorded with an unknown outcome: its signed call's key,
        now mapped to it (a retry of that key gets the memo, never a third live step)."""
        row = await self._memo(step)
        if row is None:
            return None
        verified = await check_memo(self._store, self._keys(), self._secret, row, self.run_id, step)
        found = None if verified.call.key is msgspec.UNSET else verified.call.key
        if found is not None:
            self._keyed[found] = step
            self._key_at[step] = found
        return found

    def _give_back(self, step: int) -> None:
        self._steps.give_back(step)

    async def _call_step(
        self, step: int, name: Any, arguments: Any, revalidate: bool, key: str | None
    ) -> Any:
        # Junk is recorded too (as a description of itself), so the step is not left as a
        # gap that would turn every later step of a resumed run live.
        sent = sent_form(name, arguments)
        name, arguments = sent.name, sent.arguments
        if revalidate and self.mode == "strict":
            raise InvalidRequest("a strict run makes no live calls; revalidate is refused")
        await self._start()
        assert self._live_from is not None
        fp = fingerprint(self._secret, name, arguments, self._scope, key)
        # Only steps known to be recorded can have a memo (no lookup for fresh steps).
        row = await self._memo(step) if step in self._recorded else None
        if step in self._here and not revalidate:
            # Re-issued in this run (a host re-executing a node): the memo, never a
            # second entry.
            live = False
        elif key is not None:
            live = (
                self.mode in ("record", "revalidate")
                or revalidate
                or step not in self._recorded
                or step in self._stale
            )
        else:
            live = self.mode in ("record", "revalidate") or revalidate or step >= self._live_from
        if not live:
            return await self._replay(step, row, sent, fp, key)
        if self.mode == "strict":
            reason = "a call past the recorded end" if key is None else f"key {key!r} not recorded"
            raise diverged(self.run_id, step, None, _attempt(sent, key), reason, past_end=True)
        old: Verified | None = None
        if row is not None and (revalidate or self.mode == "revalidate"):
            with contextlib.suppress(MemsealError):
                old = await check_memo(
                    self._store, self._keys(), self._secret, row, self.run_id, step
                )
            if step not in self._stale:
                self._same_key(step, sent, fp, key, old)
        supersedes = None if row is None else self._signed.get(step, row.seq)
        try:
            result = await self._live(step, sent, fp, supersedes, key)
        except RECORDED_ERRORS as exc:
            self._signed.pop(step, None)
            result = error_result(exc)
            self._note_change(step, name, old, result)
            raise
        self._signed.pop(step, None)  # the step's memo is now the call just recorded
        self._note_change(step, name, old, result)
        return result

    async def _replay(
        self, step: int, row: MemoRow | None, sent: Sent, fp: str, key: str | None
    ) -> Any:
        """The replay-calls path: the step's memo, checked, or a divergence (or a fork)."""
        if row is None:  # unreachable below the first gap; kept for safety
            raise ReplayDivergence(f"run {self.run_id!r} step {step} has no memo")
        verified = await check_memo(self._store, self._keys(), self._secret, row, self.run_id, step)
        signed_key = None if verified.call.key is msgspec.UNSET else verified.call.key
        if verified.call.fingerprint != fp or signed_key != key:
            recorded = recorded_call(verified)
            if recorded is not None and signed_key is not None:
                recorded = {**recorded, "key": signed_key}
            attempt = _attempt(sent, key)
            if key is not None:
                # A key names one logical call: another call under it is never forked into.
                reason = f"key {key!r} was recorded with another call"
                raise diverged(self.run_id, step, recorded, attempt, reason)
            if self.mode == "strict" or not self.fork:
                raise diverged(self.run_id, step, recorded, attempt)
            await self._fork(step, verified, fp)
            return await self._live(step, sent, fp, verified.seq)
        self._consumed.add(step)
        # A memo hit: counted here (a dict, nothing else on the hit's path), added to the
        # unsigned memo_hits table with the next lease renewal or the close (_lease.py).
        _, hits = self._hits.get(verified.seq, (step, 0))
        self._hits[verified.seq] = (step, hits + 1)
        return outcome(verified)

    def _same_key(
        self, step: int, sent: Sent, fp: str, key: str | None, old: Verified | None
    ) -> None:
        """A revalidate replaces a step's call with the same logical call, never another:
        one that drops, adds or swaps the step's key, or reuses its key with other
        arguments, would leave the key naming a call it never named (and the key's
        re-issue a second live step), so it is a divergence naming the key."""
        recorded_key = self._key_at.get(step)
        if recorded_key is None and key is None:
            return  # an unkeyed step revalidated unkeyed: as it always was
        if recorded_key == key and (old is None or old.call.fingerprint == fp):
            return
        shown = None if old is None else recorded_call(old)
        if shown is not None and recorded_key is not None:
            shown = {**shown, "key": recorded_key}
        if recorded_key == key:
            reason = f"key {key!r} was recorded with another call"
        else:
            reason = f"step {step} was recorded with key {recorded_key!r}, revalidated with {key!r}"
        raise diverged(self.run_id, step, shown, _attempt(sent, key), reason)

    def _note_change(self, step: int, name: str, old: Verified | None, new: Any) -> None:
        if old is not None:
            diff = field_diff(old.result, normal(new))
            if diff:
                self.changes.append(Change(step=step, tool=name, diff=tuple(diff)))


def _attempt(sent: Sent, key: str | None) -> dict[str, Any]:
    """The attempted call as a divergence shows it."""
    attempt = {"tool": sent.name, "arguments": sent.arguments}
    return attempt if key is None else {**attempt, "key": key}
