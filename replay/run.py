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
refused hands its step back to the next call), and :meth:`Run.call_at`
refuses a step beyond the next unrecorded one. A failed call is recorded
without its arguments (see :mod:`memseal.replay.calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol

import blake3
import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from memseal.ledger.canonical import MAX_PAYLOAD_BYTES, canonical_json
from memseal.ledger.entry import Draft, leaf_hash, make_draft, signing_message
from memseal.ledger.errors import (
    Conflict,
    InvalidRequest,
    MemsealError,
    NotFound,
    ProvenanceError,
    ReplayDivergence,
    Unsupported,
)
from memseal.ledger.ledger import Ledger
from memseal.ledger.note import VerifierKey
from memseal.ledger.store import SqlStore, WriteTxn
from memseal.tools.toolset import AsyncToolset

from .calls import (
    FORGET_TOOL,
    RUN_FORKED,
    RUN_STARTED,
    TOOL_CALL,
    RunForked,
    RunStarted,
    ToolCall,
    ToolCallPayload,
    forget_arguments,
)
from .divergence import diverged, field_diff
from .identity import ScopeIdentity, fingerprint, input_hash, memo_key
from .memo import MemoRow, acquire, check_holder, held_here, let_go_here, put_memo, release, renew
from .provenance import Verified, check_memo, reconcile_memos
from .results import result_hash, split

__all__ = [
    "MODES",
    "Change",
    "Mode",
    "Prepared",
    "Preparer",
    "Run",
    "Sent",
    "new_run_id",
    "sent_form",
    "withheld_digest",
]

Mode = Literal["record", "resume", "strict", "revalidate"]
MODES: tuple[Mode, ...] = ("record", "resume", "strict", "revalidate")

#: What a model can act on: recorded (memoised) like results, raised again on replay.
RECORDED_ERRORS: tuple[type[MemsealError], ...] = (InvalidRequest, Unsupported, NotFound)
_ERROR_TYPES: dict[str, type[MemsealError]] = {c.__name__: c for c in RECORDED_ERRORS}
# A policy refusal is recorded under its own name; replayed, it is the Unsupported it is
# live (its code is not recorded), never an InvalidRequest a host would catch apart.
_ERROR_TYPES["Refusal"] = Unsupported

_encoder = msgspec.json.Encoder(order="deterministic")


class Prepared(Protocol):
    """One validated tool call (the tools layer's two-phase API)."""

    @property
    def name(self) -> str:
        """The tool the prepared call runs."""

    @property
    def side_effects(self) -> bool:
        """Whether the call writes (and so runs in the writer's transaction)."""

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
    """What a run records through: tools that prepare a call before it commits."""

    def specs(self) -> Sequence[Any]:
        """The specs of the tools offered."""

    async def prepare(self, name: str, arguments: Mapping[str, Any]) -> Prepared:
        """Validate a call and run its read, or plan its write as a command."""


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """A revalidated step whose fresh result differs from the recorded one."""

    step: int
    tool: str
    diff: tuple[str, ...]


def new_run_id() -> str:
    """A fresh random run id."""
    return f"run-{secrets.token_hex(8)}"


def _normal(value: Any) -> Any:
    # Live and replayed results are the same plain JSON values, key order included.
    return msgspec.json.decode(_encoder.encode(value))


#: The longest error message a failed call records (a message may quote what was sent).
MAX_ERROR_CHARS = 1000


def _error_result(error: MemsealError) -> dict[str, Any]:
    # A message may quote what the model sent; keep it encodable whatever that was.
    message = str(error).encode("utf-8", "replace").decode("utf-8")
    if len(message) > MAX_ERROR_CHARS:
        message = message[: MAX_ERROR_CHARS - 1] + "\u2026"
    return {"error": {"type": type(error).__name__, "message": message}}


def _as_recorded(error: MemsealError) -> MemsealError:
    """The error as its step recorded it: a replay raises the same message."""
    message = _error_result(error)["error"]["message"]
    if message == str(error):
        return error
    bounded = type(error)(message)
    bounded.__cause__ = error
    return bounded


@dataclass(frozen=True, slots=True)
class Sent:
    """A call as sent: what its fingerprint and input hash cover, and its size in bytes."""

    name: str
    arguments: Any
    size: int
    invalid: InvalidRequest | None


def sent_form(name: Any, arguments: Any) -> Sent:
    """What a call is, for recording and matching: the plain JSON arguments, or for junk
    (no tool name, arguments that are not a JSON object) a description of it, so that a
    different piece of junk at a recorded step is a divergence, not a replay of the old
    error. The description's form is the one recorded runs have always used."""
    if not isinstance(name, str) or not name.isidentifier() or len(name) > 64:
        invalid = InvalidRequest(f"the tool name must be a tool's name, not {name!r:.40}")
        sent_name = name if isinstance(name, str) else repr(name)
        described = {"$invalid": str(invalid), "$name": sent_name[:4096]}
        return Sent(
            name="(invalid)", arguments=described, size=_sent_size(arguments), invalid=invalid
        )
    try:
        plain, size = _plain_arguments_sized(name, arguments)
    except InvalidRequest as exc:
        described = {"$invalid": str(exc), "$sent": _sent_text(arguments)}
        return Sent(name=name, arguments=described, size=_sent_size(arguments), invalid=exc)
    return Sent(name=name, arguments=plain, size=size, invalid=None)


def withheld_digest(salt: bytes, arguments: Any) -> str:
    """What a failed call keeps of its arguments: blake3 over a salt and their canonical JSON
    (the salt sits beside it in the erasable payload; without the arguments it says nothing)."""
    return blake3.blake3(salt + _encoder.encode(arguments)).hexdigest()


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
        owner: str = "",
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
        # Who opened the run in this process (a memory's token): named when another
        # Run object of this process asks for the same lease.
        self._owner = owner
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
        # Steps handed out whose call failed before its entry committed: the next call
        # takes the lowest of them, so a failure never leaves a gap in the run.
        self._holes: set[int] = set()
        # Steps handed out again after such a failure: their entry is written only if no
        # memo appeared at the step meanwhile (a commit whose outcome was unknown).
        self._reissued: set[int] = set()
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
                new = acquire(txn, self.run_id, self._holder, self._ttl, owner=self._owner)
                if new:
                    txn.append(draft)
                return new

            new = await self._store.run(command)
            held_here(self._holder, self._owner)

            def give_back(txn: WriteTxn) -> None:
                release(txn, self.run_id, self._holder)

            try:
                if not new:
                    await self._check_scope()
                # The memo table against the run's signed calls: a recorded step whose memo
                # row is gone gets it back, so it is never run live a second time.
                memos = await reconcile_memos(
                    self._store, self._keys(), self.run_id, self._holder, new
                )
            except BaseException:
                # __aexit__ does not run when __aenter__ fails: give the lease back here.
                with contextlib.suppress(MemsealError):
                    await self._store.run(give_back)
                let_go_here(self._holder)
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

    async def _check_scope(self) -> None:
        """Refuse a run another scope opened: its signed ``run_started`` entry says which.

        Checked on the entry itself (signature and all), never on the ``runs`` table alone.
        """
        rows = await self._store.rows(
            "SELECT started_seq FROM runs WHERE run_id = ?", (self.run_id,)
        )
        failed = "the run's run_started entry does not check"
        if not rows:
            raise ProvenanceError(failed)
        seq = int(rows[0][0])
        try:
            record = await self._store.read(seq)
            entry = record.entry()
            key = self._keys().get(entry.key)
            if key is None or leaf_hash(record.leaf) != record.leaf_hash:
                raise ProvenanceError(failed, seq=seq)
            key.verify(signing_message(record.leaf_hash), record.signature)
            body = msgspec.json.decode(bytes(entry.body))
        except (NotFound, BadSignatureError, ValueError, TypeError, msgspec.DecodeError):
            raise ProvenanceError(failed, seq=seq) from None
        if entry.kind != RUN_STARTED or not isinstance(body, dict):
            raise ProvenanceError(failed, seq=seq)
        if body.get("run_id") != self.run_id:
            raise ProvenanceError(failed, seq=seq)
        differs = self._scope.differs_from(body)
        if differs:
            raise Conflict(other_scope(self.run_id, differs))

    def _started_draft(self) -> Draft:
        started = RunStarted(run_id=self.run_id, mode=self.mode, **self._scope.recorded())
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

            try:
                await self._store.run(command)
            finally:
                let_go_here(self._holder)
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
        """One more than the highest step handed out so far."""
        return self._next

    @property
    def next_step(self) -> int:
        """The step the next :meth:`call` takes (a step freed by a failed call first)."""
        return min(self._holes) if self._holes else self._next

    def is_recorded(self, step: int) -> bool:
        """Whether ``step`` has a signed call in this run (recorded, or found at resume)."""
        return step in self._recorded

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
    ) -> Awaitable[Any]:
        """Call an explicit ``step`` (a caller numbering its own steps, as HTTP and MCP
        clients may); the next step :meth:`call` reserves moves past it.

        A step may be one already recorded or handed out, or the next one: a step
        beyond that would leave a gap no export could ever fill, so it is refused
        (:class:`Conflict` naming the step expected).
        """
        if self._closed:
            raise InvalidRequest(f"run {self.run_id!r} is closed")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise InvalidRequest(f"`step` must be an integer >= 0, not {step!r:.40}")
        return self._call_at(step, name, {} if arguments is None else arguments, revalidate)

    async def _call_at(self, step: int, name: Any, arguments: Any, revalidate: bool) -> Any:
        await self._start()
        assert self._live_from is not None
        expected = max(self._next, self._live_from)
        if step > expected and step not in self._recorded:
            raise Conflict(
                f"run {self.run_id!r}: step {step} would leave a gap; the next step is {expected}"
            )
        self._next = max(self._next, step + 1)
        self._holes.discard(step)
        return await self._call(step, name, arguments, revalidate)

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
        if self._holes:
            step = min(self._holes)
            self._holes.discard(step)
        else:
            step = self._next
            self._next += 1
        return self._call(step, name, {} if arguments is None else arguments, revalidate)

    async def _call(self, step: int, name: Any, arguments: Any, revalidate: bool) -> Any:
        # A step is consumed only when its entry commits: a call that fails before (the
        # store refused it, the lease was lost) hands its step back, so the run never has
        # a gap that every export of it would fail on. A call whose step was recorded (an
        # error the model can act on is recorded too) keeps it.
        try:
            return await self._call_step(step, name, arguments, revalidate)
        except _Taken:
            self._recorded.add(step)
            raise
        except MemsealError:
            if step not in self._recorded:
                self._give_back(step)
            raise

    def _give_back(self, step: int) -> None:
        self._reissued.add(step)
        if step != self._next - 1:
            self._holes.add(step)
            return
        self._next = step
        while self._next - 1 in self._holes:
            self._next -= 1
            self._holes.discard(self._next)

    async def _call_step(self, step: int, name: Any, arguments: Any, revalidate: bool) -> Any:
        # Junk is recorded too (as a description of itself), so the step is not left as a
        # gap that would turn every later step of a resumed run live.
        sent = sent_form(name, arguments)
        name, arguments = sent.name, sent.arguments
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
                return await self._live(step, sent, fp, verified.seq)
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
            result = await self._live(step, sent, fp, supersedes)
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

    async def _live(self, step: int, sent: Sent, fp: str, supersedes: int | None) -> Any:
        name, arguments, invalid = sent.name, sent.arguments, sent.invalid
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
            failed = failure is not None
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
                input_size=sent.size if failed else msgspec.UNSET,
            )
            if failed:
                # A failed call keeps no arguments (see calls.py): a refused 500 KB store
                # costs a few hundred bytes, and nothing a forget cannot reach stays behind.
                salt = secrets.token_bytes(16)
                withheld = [salt.hex(), withheld_digest(salt, arguments)]
                payload = ToolCallPayload(arguments=None, texts=parts.texts, withheld=withheld)
            elif name == FORGET_TOOL and wrote:
                # Its filter values named what it forgot (calls.py): they go, marked.
                kept = forget_arguments(arguments, wrote[0])
                payload = ToolCallPayload(arguments=kept, texts=parts.texts)
            else:
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
        guard = supersedes is None and step in self._reissued

        def command(txn: WriteTxn) -> tuple[Any, MemsealError | None]:
            if opening is not None:
                if not acquire(txn, self.run_id, self._holder, self._ttl):
                    # A one-shot run starts, calls and ends in one transaction: it never
                    # opens a run that exists, whose scope and steps it has not checked.
                    raise Conflict(
                        f"run {self.run_id!r} exists: a one-shot call takes a fresh run id "
                        "(open the run with memory.run to resume it)"
                    )
                txn.append(opening)
            else:
                check_holder(txn, self.run_id, self._holder)
            if guard and txn.execute(
                "SELECT 1 FROM memos WHERE run_id = ? AND step = ?", (self.run_id, step)
            ):
                raise _Taken(
                    f"run {self.run_id!r} step {step} was recorded by a call whose outcome "
                    "was unknown; nothing was recorded now, call the next step"
                )
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
        self._reissued.discard(step)
        if failure is not None:
            raise _as_recorded(failure)
        if prepared is not None and prepared.after is not None:
            await prepared.after()
        return recorded


class _Taken(Conflict):
    """A handed-back step turned out recorded after all (see :meth:`Run._call`)."""


def other_scope(run_id: str, fields: Sequence[str]) -> str:
    """The refusal of a call into a run another scope opened (HTTP 409)."""
    return (
        f"run {run_id!r} belongs to another scope (it differs in {', '.join(fields)}); "
        "a run is used only with the scope that opened it: name a run of your own"
    )


def _sent_text(arguments: Any) -> str:
    # Part of the description of junk that the fingerprint covers (never recorded as such).
    if isinstance(arguments, bytes):
        return arguments.decode("utf-8", errors="replace")[:4096]
    if isinstance(arguments, str):
        return arguments[:4096]
    return repr(arguments)[:4096]


def _sent_size(arguments: Any) -> int:
    if isinstance(arguments, bytes):
        return len(arguments)
    if isinstance(arguments, str):
        return len(arguments.encode("utf-8", errors="surrogatepass"))
    try:
        return len(_encoder.encode(arguments))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
        return len(repr(arguments).encode("utf-8", errors="replace"))


def _plain_arguments_sized(name: str, arguments: Any) -> tuple[Any, int]:
    """The arguments as plain JSON (an object, or the JSON text a model API returns), and
    the byte size of their canonical encoding."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = msgspec.json.decode(arguments)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise InvalidRequest(f"{name}: the arguments are not valid JSON") from None
    if not isinstance(arguments, Mapping):
        raise InvalidRequest(f"{name}: the arguments must be a JSON object")
    data = canonical_json(arguments, field=f"{name}: arguments", limit=MAX_PAYLOAD_BYTES)
    return msgspec.json.decode(data), len(data)


def _recorded_call(verified: Verified) -> dict[str, Any] | None:
    if verified.arguments is None:
        if verified.call.error and verified.call.input_size is not msgspec.UNSET:
            kept = f"(not kept: a failed call of {verified.call.input_size} bytes)"
            return {"tool": verified.call.tool, "arguments": kept}
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
