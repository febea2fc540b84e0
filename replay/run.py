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
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Protocol

import msgspec
from nacl.signing import VerifyKey

from memseal.ledger.canonical import MAX_PAYLOAD_BYTES, canonical_json
from memseal.ledger.entry import Draft, make_draft
from memseal.ledger.errors import (
    InvalidRequest,
    MemsealError,
    NotFound,
    ReplayDivergence,
    Unsupported,
)
from memseal.ledger.ledger import Ledger
from memseal.ledger.note import VerifierKey
from memseal.ledger.store import SqlStore, WriteTxn
from memseal.tools.toolset import AsyncToolset

from .calls import (
    RUN_FORKED,
    RUN_STARTED,
    TOOL_CALL,
    RunForked,
    RunStarted,
    ToolCall,
    ToolCallPayload,
)
from .divergence import diverged, field_diff
from .identity import ScopeIdentity, fingerprint, input_hash, memo_key
from .memo import MemoRow, acquire, check_holder, put_memo, release, renew
from .provenance import Verified, check_memo, reconcile_memos
from .results import result_hash, split

__all__ = ["MODES", "Change", "Mode", "Prepared", "Preparer", "Run", "new_run_id"]

Mode = Literal["record", "resume", "strict", "revalidate"]
MODES: tuple[Mode, ...] = ("record", "resume", "strict", "revalidate")

# What a model can act on: recorded (memoised) like results, raised again on replay.
RECORDED_ERRORS: tuple[type[MemsealError], ...] = (InvalidRequest, Unsupported, NotFound)
_ERROR_TYPES: dict[str, type[MemsealError]] = {c.__name__: c for c in RECORDED_ERRORS}

_encoder = msgspec.json.Encoder(order="deterministic")


class Prepared(Protocol):
    """One validated tool call (the tools layer's two-phase API)."""

    @property
    def name(self) -> str: ...

    @property
    def side_effects(self) -> bool: ...

    @property
    def result(self) -> Any:
        """Reads: the rendered result, computed when prepared."""
        ...

    @property
    def command(self) -> Callable[[WriteTxn], Any] | None:
        """Writes: runs inside the writer's transaction and returns the rendered result."""
        ...

    @property
    def after(self) -> Callable[[], Awaitable[None]] | None:
        """Work after the commit (a forget's scrub)."""
        ...

    def cites(self, result: Any) -> Sequence[str]:
        """The item ids a result cites."""
        ...

    def mentions(self, result: Any) -> Sequence[str]:
        """What the result mentions for the ledger's index (cited ids, facet refs)."""
        ...


class Preparer(Protocol):
    def specs(self) -> Sequence[Any]: ...

    async def prepare(self, name: str, arguments: Mapping[str, Any]) -> Prepared: ...


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """A revalidated step whose fresh result differs from the recorded one."""

    step: int
    tool: str
    diff: tuple[str, ...]


def new_run_id() -> str:
    return f"run-{secrets.token_hex(8)}"


def _normal(value: Any) -> Any:
    # Live and replayed results are the same plain JSON values, key order included.
    return msgspec.json.decode(_encoder.encode(value))


def _error_result(error: MemsealError) -> dict[str, Any]:
    # A message may quote what the model sent; keep it encodable whatever that was.
    message = str(error).encode("utf-8", "replace").decode("utf-8")
    return {"error": {"type": type(error).__name__, "message": message}}


class Run:
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
    ) -> None:
        if not isinstance(run_id, str) or not 1 <= len(run_id) <= 200 or not run_id.isprintable():
            raise InvalidRequest("`run_id` must be 1 to 200 printable characters")
        if mode not in MODES:
            raise InvalidRequest(f"`mode` {mode!r} is not one of {', '.join(MODES)}")
        self.run_id = run_id
        self.mode: Mode = mode
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
        if oneshot and mode != "record":
            raise InvalidRequest("a one-shot run records its single call: mode must be record")
        self._holder = secrets.token_hex(16)
        self._next = 0
        self._live_from: int | None = None
        self._recorded: set[int] = set()
        #: Steps whose memo row was missing at resume and was put back from the log.
        self.restored: list[int] = []
        # Each step's current signed call at resume: what a replacement supersedes, even
        # when the step's memo row was tampered with.
        self._signed: dict[int, int] = {}
        self._consumed: set[int] = set()
        self._start_lock = asyncio.Lock()
        self._started = False
        self._closed = False
        self._renewer: asyncio.Task[None] | None = None

    # -- lifecycle ----------------------------------------------------------------

    async def __aenter__(self) -> Run:
        await self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A run that failed is not checked for unconsumed steps: its own error matters more.
        await self.close(check=exc_type is None)

    async def _start(self) -> None:
        async with self._start_lock:
            if self._closed:
                raise InvalidRequest(f"run {self.run_id!r} is closed")
            if self._started:
                return
            draft = self._started_draft()
            if self._oneshot:
                self._recorded = set()
                self._live_from = 0
                self._started = True
                return

            def command(txn: WriteTxn) -> bool:
                new = acquire(txn, self.run_id, self._holder, self._ttl)
                if new:
                    txn.append(draft)
                return new

            new = await self._store.run(command)
            # The memo table against the run's signed calls: a recorded step whose memo
            # row is gone gets it back, so it is never run live a second time.
            try:
                memos = await reconcile_memos(
                    self._store, self._keys(), self.run_id, self._holder, new
                )
            except BaseException:
                # __aexit__ does not run when __aenter__ fails: give the lease back here.
                await self._store.run(lambda txn: release(txn, self.run_id, self._holder))
                raise
            self._recorded, self.restored = set(memos.recorded), list(memos.restored)
            self._signed = memos.current
            # A recorded step whose predecessor was never recorded is simply live.
            gap = 0
            while gap in self._recorded:
                gap += 1
            self._live_from = gap
            self._started = True
            self._renewer = asyncio.create_task(self._renew())

    def _started_draft(self) -> Draft:
        started = RunStarted(run_id=self.run_id, mode=self.mode, **_scope_fields(self._scope))
        return make_draft(RUN_STARTED, msgspec.to_builtins(started))

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)

            def command(txn: WriteTxn) -> bool:
                return renew(txn, self.run_id, self._holder, self._ttl)

            with contextlib.suppress(MemsealError):
                await self._store.run(command)

    async def close(self, *, check: bool = True) -> None:
        """Release the lease; in ``strict`` mode, fail if recorded steps were never replayed."""
        if self._closed:
            return
        self._closed = True
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        if self._started and not self._oneshot:

            def command(txn: WriteTxn) -> None:
                release(txn, self.run_id, self._holder)

            await self._store.run(command)
        unconsumed = sorted(self._recorded - self._consumed)
        if check and self.mode == "strict" and unconsumed:
            raise ReplayDivergence(
                f"run {self.run_id!r}: recorded steps {_steps(unconsumed)} were never replayed",
                run_id=self.run_id,
                step=unconsumed[0],
            )

    # -- calls ----------------------------------------------------------------------

    @property
    def steps_issued(self) -> int:
        return self._next

    def specs(self) -> Sequence[Any]:
        """The specs of the tools this run offers (its tools' scope decides)."""
        return self._tools.specs()

    def toolset(self) -> AsyncToolset:
        """The run's tools for OpenAI, Anthropic, LangChain or MCP: every call recorded here."""
        return AsyncToolset.of(self)

    def call_at(
        self,
        step: int,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        revalidate: bool = False,
    ) -> Awaitable[Any]:
        """Call an explicit ``step`` (a caller numbering its own steps, as HTTP and MCP
        clients may); the next step :meth:`call` reserves moves past it."""
        if self._closed:
            raise InvalidRequest(f"run {self.run_id!r} is closed")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise InvalidRequest(f"`step` must be an integer >= 0, not {step!r:.40}")
        self._next = max(self._next, step + 1)
        return self._call(step, name, {} if arguments is None else arguments, revalidate)

    def skip_to(self, step: int) -> None:
        """Number the next :meth:`call` from ``step`` on (a reopened run continuing)."""
        self._next = max(self._next, step)

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        revalidate: bool = False,
    ) -> Awaitable[Any]:
        """Reserve the next step now and return an awaitable of its result.

        ``revalidate`` (the host's choice, never the model's) runs the call
        live and records a replacement for the step's memo.
        """
        if self._closed:
            raise InvalidRequest(f"run {self.run_id!r} is closed")
        step = self._next
        self._next += 1
        return self._call(step, name, {} if arguments is None else arguments, revalidate)

    async def _call(self, step: int, name: Any, arguments: Any, revalidate: bool) -> Any:
        # Junk is recorded too (as a description of itself), so the step is not left as a
        # gap that would turn every later step of a resumed run live.
        # The description keeps what was sent (as text), so a different piece of junk at a
        # recorded step is a divergence, not a replay of the old error.
        invalid: InvalidRequest | None = None
        if not isinstance(name, str) or not name.isidentifier() or len(name) > 64:
            invalid = InvalidRequest(f"the tool name must be a tool's name, not {name!r:.40}")
            sent_name = name if isinstance(name, str) else repr(name)
            arguments = {"$invalid": str(invalid), "$name": sent_name[:4096]}
            name = "(invalid)"
        else:
            try:
                arguments = _plain_arguments(name, arguments)
            except InvalidRequest as exc:
                invalid = exc
                arguments = {"$invalid": str(exc), "$sent": _sent_text(arguments)}
        if revalidate and self.mode == "strict":
            raise InvalidRequest("a strict run makes no live calls; revalidate is refused")
        await self._start()
        assert self._live_from is not None
        attempt = {"tool": name, "arguments": arguments}
        fp = fingerprint(self._secret, name, arguments, self._scope)
        # Only steps known to be recorded can have a memo (no lookup for fresh steps).
        row = await self._memo(step) if step in self._recorded else None
        live = self.mode in ("record", "revalidate") or revalidate or step >= self._live_from
        if not live:
            if row is None:  # unreachable below the first gap; kept for safety
                raise ReplayDivergence(f"run {self.run_id!r} step {step} has no memo")
            verified = await check_memo(
                self._store, self._keys(), self._secret, row, self.run_id, step
            )
            if verified.call.fingerprint != fp:
                recorded = _recorded_call(verified)
                if self.mode == "strict" or not self.fork:
                    raise diverged(self.run_id, step, recorded, attempt)
                await self._fork(step, verified, fp)
                return await self._live(step, name, arguments, fp, verified.seq, invalid)
            self._consumed.add(step)
            return _outcome(verified)
        if self.mode == "strict":
            raise diverged(
                self.run_id, step, None, attempt, "a call past the recorded end", past_end=True
            )
        old: Verified | None = None
        if row is not None and (revalidate or self.mode == "revalidate"):
            with contextlib.suppress(MemsealError):
                old = await check_memo(
                    self._store, self._keys(), self._secret, row, self.run_id, step
                )
        supersedes = None if row is None else self._signed.get(step, row.seq)
        try:
            result = await self._live(step, name, arguments, fp, supersedes, invalid)
        except RECORDED_ERRORS as exc:
            self._signed.pop(step, None)
            result = _error_result(exc)
            self._note_change(step, name, old, result)
            raise
        self._signed.pop(step, None)  # the step's memo is now the call just recorded
        self._note_change(step, name, old, result)
        return result

    def _note_change(self, step: int, name: str, old: Verified | None, new: Any) -> None:
        if old is not None:
            diff = field_diff(old.result, _normal(new))
            if diff:
                self.changes.append(Change(step=step, tool=name, diff=tuple(diff)))

    def _keys(self) -> dict[str, VerifyKey]:
        """The ledger's keys by id, including any the history gained since the last call."""
        if len(self._known) != len(self._key_list):
            self._known = {k.key_id.hex(): VerifyKey(k.public_key) for k in self._key_list}
        return self._known

    async def _memo(self, step: int) -> MemoRow | None:
        rows = await self._store.rows(
            "SELECT run_id, step, memo_key, seq FROM memos WHERE run_id = ? AND step = ?",
            (self.run_id, step),
        )
        if not rows:
            return None
        r = rows[0]
        return MemoRow(run_id=r[0], step=r[1], memo_key=r[2], seq=r[3])

    async def _fork(self, step: int, verified: Verified, attempted: str) -> None:
        body = RunForked(
            run_id=self.run_id, step=step, recorded=verified.call.fingerprint, attempted=attempted
        )
        draft = make_draft(RUN_FORKED, msgspec.to_builtins(body))

        def command(txn: WriteTxn) -> None:
            check_holder(txn, self.run_id, self._holder)
            txn.append(draft)

        await self._store.run(command)
        self._live_from = min(self._live_from or 0, step)

    async def _live(
        self,
        step: int,
        name: str,
        arguments: Any,
        fp: str,
        supersedes: int | None,
        invalid: InvalidRequest | None = None,
    ) -> Any:
        observed = (await self._store.head()).size
        error: MemsealError | None = invalid
        prepared: Prepared | None = None
        if invalid is None:
            try:
                prepared = await self._tools.prepare(name, arguments)
            except RECORDED_ERRORS as exc:
                error = exc
        read_result = None
        if prepared is not None and prepared.command is None:
            read_result = _normal(prepared.result)
        key = memo_key(self.run_id, step)
        in_hash = input_hash(self._secret, arguments)

        def draft_for(
            recorded: Any, failure: MemsealError | None, size: int, wrote: tuple[int, ...]
        ) -> Draft:
            cites = (
                () if failure is not None or prepared is None else tuple(prepared.cites(recorded))
            )
            mentions = (
                ()
                if failure is not None or prepared is None
                else tuple(dict.fromkeys(prepared.mentions(recorded)))
            )
            parts = split(recorded)
            body = ToolCall(
                run_id=self.run_id,
                step=step,
                tool=name,
                memo_key=key,
                fingerprint=fp,
                input_hash=in_hash,
                result_hash=result_hash(parts.skeleton),
                error=failure is not None,
                observed_size=size,
                wrote=wrote,
                cites=cites,
                supersedes=supersedes,
                result=parts.skeleton,
            )
            payload = ToolCallPayload(arguments=arguments, texts=parts.texts)
            # Arguments and results here were decoded by msgspec: plain JSON by construction.
            return make_draft(
                TOOL_CALL,
                msgspec.to_builtins(body),
                msgspec.to_builtins(payload),
                mentions=mentions,
                checked=True,
            )

        # Reads and refused calls are known before the writer: encode, split and hash them
        # here, so the writer only appends (its time is the group commit's).
        ready: tuple[Draft, Any] | None = None
        if prepared is None or prepared.command is None:
            recorded = _error_result(error) if error is not None else read_result
            ready = (draft_for(recorded, error, observed, ()), recorded)

        opening = self._started_draft() if self._oneshot else None
        if self._oneshot and step > 0:
            raise InvalidRequest("a one-shot run makes a single call")

        def command(txn: WriteTxn) -> tuple[Any, MemsealError | None]:
            if opening is not None:
                if acquire(txn, self.run_id, self._holder, self._ttl):
                    txn.append(opening)
            else:
                check_holder(txn, self.run_id, self._holder)
            if ready is not None:
                draft, recorded = ready
                failure = error
            else:
                assert prepared is not None and prepared.command is not None
                before = txn.size
                result, failure = None, None
                try:
                    with txn.savepoint():
                        result = _normal(prepared.command(txn))
                except RECORDED_ERRORS as exc:
                    failure = exc
                recorded = _error_result(failure) if failure is not None else result
                draft = draft_for(recorded, failure, before, tuple(range(before, txn.size)))
            appended = txn.append(draft)
            put_memo(txn, MemoRow(run_id=self.run_id, step=step, memo_key=key, seq=appended.seq))
            if opening is not None:
                release(txn, self.run_id, self._holder)
            return recorded, failure

        recorded, failure = await self._store.run(command)
        self._recorded.add(step)
        self._consumed.add(step)
        if failure is not None:
            raise failure
        if prepared is not None and prepared.after is not None:
            await prepared.after()
        return recorded


def _sent_text(arguments: Any) -> str:
    if isinstance(arguments, bytes):
        return arguments.decode("utf-8", errors="replace")[:4096]
    if isinstance(arguments, str):
        return arguments[:4096]
    return repr(arguments)[:4096]


def _plain_arguments(name: str, arguments: Any) -> Any:
    """The arguments as plain JSON (an object, or the JSON text a model API returns)."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = msgspec.json.decode(arguments)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise InvalidRequest(f"{name}: the arguments are not valid JSON") from None
    if not isinstance(arguments, Mapping):
        raise InvalidRequest(f"{name}: the arguments must be a JSON object")
    return msgspec.json.decode(
        canonical_json(arguments, field=f"{name}: arguments", limit=MAX_PAYLOAD_BYTES)
    )


def _scope_fields(scope: ScopeIdentity) -> dict[str, Any]:
    return {
        "place": scope.place,
        "reach": scope.reach,
        "writes": scope.writes,
        "floor": scope.floor,
    }


def _recorded_call(verified: Verified) -> dict[str, Any] | None:
    if verified.arguments is None:
        return None
    return {"tool": verified.call.tool, "arguments": verified.arguments}


def _outcome(verified: Verified) -> Any:
    if not verified.call.error:
        return verified.result
    error = verified.result.get("error", {}) if isinstance(verified.result, dict) else {}
    kind = _ERROR_TYPES.get(str(error.get("type")), InvalidRequest)
    message = error.get("message")
    raise kind(message if isinstance(message, str) else f"(forgotten: {message})")


def _steps(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:10])
    return shown + (f" and {len(steps) - 10} more" if len(steps) > 10 else "")
