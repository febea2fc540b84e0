"""The live call path of a run: a call run and recorded in one transaction.

A live step prepares its call through the tools layer (a read runs now, a
write is planned as a command), builds its ``memory_tool_call`` entry, and
commits the tool's own writes, the entry and the memo row together. A
failed call is recorded without its arguments (see :mod:`memseal.replay.runs.calls`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from memseal.engine.currency import noting
from memseal.ledger.entry import Draft, make_draft
from memseal.ledger.errors import Conflict, InvalidRequest, MemsealError
from memseal.ledger.store import WriteTxn, observing_sizes, run_committed
from memseal.tools.catalog import WRITE_TOOLS

from ._lease import RunLease
from ._sent import RECORDED_ERRORS, Sent, as_recorded, error_result, normal, withheld_digest
from ._steps import StepBook
from .calls import (
    FORGET_TOOL,
    RUN_FORKED,
    TOOL_CALL,
    RunForked,
    ToolCall,
    ToolCallPayload,
    forget_arguments,
)
from .identity import input_hash, memo_key
from .memo import MemoRow, acquire, check_holder, put_memo, release
from .provenance import Verified
from .results import payload_salt, result_hash, split

__all__ = ["CallDraft", "LiveCalls", "Prepared", "Preparer", "Taken"]


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
    def committed(self) -> Callable[[], None] | None:
        """In-process state to update once the command committed (a forget's release)."""
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


_READ_ATTEMPTS = 16  # a read straddles a commit rarely, 16 times in a row only under a storm


class Taken(Conflict):
    """A handed-back step turned out recorded after all (see :meth:`Run._call`)."""


@dataclass(frozen=True, slots=True)
class CallDraft:
    """What one live call's entry states whatever its outcome: it drafts the entry."""

    run_id: str
    step: int
    sent: Sent
    fingerprint: str
    input_hash: str
    supersedes: int | None
    prepared: Prepared | None
    key: str | None = None
    #: The currency rule version the call's reads followed (None: none did).
    currency: int | None = None

    def draft(
        self, recorded: Any, failure: MemsealError | None, size: int, wrote: tuple[int, ...]
    ) -> Draft:
        """The call's signed entry, for its recorded result (or error) and writes."""
        prepared, failed = self.prepared, failure is not None
        cites = () if failed or prepared is None else tuple(prepared.cites(recorded))
        mentions = (
            () if failed or prepared is None else tuple(dict.fromkeys(prepared.mentions(recorded)))
        )
        # One random draw a call: its texts' salts and its payload's derive from it
        # (results.py), not one getrandom a text (slow on a loaded host: issue 17).
        seed = os.urandom(32)
        parts = split(recorded, seed)
        body = ToolCall(
            run_id=self.run_id,
            step=self.step,
            tool=self.sent.name,
            memo_key=memo_key(self.run_id, self.step),
            fingerprint=self.fingerprint,
            input_hash=self.input_hash,
            result_hash=result_hash(parts.skeleton),
            error=failed,
            observed_size=size,
            wrote=wrote,
            cites=cites,
            supersedes=self.supersedes,
            result=parts.skeleton,
            input_size=self.sent.size if failed else msgspec.UNSET,
            key=msgspec.UNSET if self.key is None else self.key,
            currency=msgspec.UNSET if self.currency is None else self.currency,
        )
        if failed:
            # A failed call keeps no arguments (see calls.py): a refused 500 KB store
            # costs a few hundred bytes, and nothing a forget cannot reach stays behind.
            salt = secrets.token_bytes(16)
            withheld = [salt.hex(), withheld_digest(salt, self.sent.arguments)]
            payload = ToolCallPayload(arguments=None, texts=parts.texts, withheld=withheld)
        elif self.sent.name == FORGET_TOOL and wrote:
            # Its filter values named what it forgot (calls.py): they go, marked.
            kept = forget_arguments(self.sent.arguments, wrote[0])
            payload = ToolCallPayload(arguments=kept, texts=parts.texts)
        else:
            payload = ToolCallPayload(arguments=self.sent.arguments, texts=parts.texts)
        # Arguments and results here were decoded by msgspec: plain JSON by construction.
        return make_draft(
            TOOL_CALL,
            msgspec.to_builtins(body),
            msgspec.to_builtins(payload),
            mentions=mentions,
            checked=True,
            salt=payload_salt(seed),
        )


class LiveCalls(RunLease):
    """The live half of a run: calls run now and recorded (see the module docstring)."""

    _tools: Preparer
    _secret: bytes
    _steps: StepBook
    _here: set[int]
    _unsized: set[str]
    _stale: set[int]

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
        # Every step recorded before the fork at or past it is of the abandoned branch: not
        # current, so no key recorded there is replayed (a stale memo returned as current).
        self._stale |= {s for s in self._recorded if s >= step and s not in self._here}

    async def _live(
        self, step: int, sent: Sent, fp: str, supersedes: int | None, key: str | None = None
    ) -> Any:
        with noting() as rules:
            observed, prepared, error = await self._prepare(sent)
        call = CallDraft(
            run_id=self.run_id,
            step=step,
            sent=sent,
            fingerprint=fp,
            input_hash=input_hash(self._secret, sent.arguments),
            supersedes=supersedes,
            prepared=prepared,
            key=key,
            # A read that ran again (its snapshots straddled a commit) followed one rule.
            currency=max(rules, default=None),
        )
        # Reads and refused calls are known before the writer: encode, split and hash them
        # here, so the writer only appends (its time is the group commit's).
        ready: tuple[Draft, Any] | None = None
        if prepared is None or prepared.command is None:
            read_result = None if prepared is None else normal(prepared.result)
            recorded = error_result(error) if error is not None else read_result
            ready = (call.draft(recorded, error, observed, ()), recorded)
        if self._oneshot and step > 0:
            raise InvalidRequest("a one-shot run makes a single call")
        command = self._live_command(call, ready, error)
        # A forget's in-process release is tied to the commit, not to this task: the
        # writer commits a call whose caller was cancelled, and the release must follow.
        settle = None if prepared is None else prepared.committed
        recorded, failure = await run_committed(self._store.run, command, settle)
        self._recorded.add(step)
        self._consumed.add(step)
        self._steps.committed(step)
        self._here.add(step)
        self._stale.discard(step)
        self._key_step(step, key)
        if failure is not None:
            raise as_recorded(failure)
        if prepared is not None and prepared.after is not None:
            await prepared.after()
        return recorded

    async def _prepare(self, sent: Sent) -> tuple[int, Prepared | None, MemsealError | None]:
        """Run a read (or plan a write) and the tree size the read saw.

        The size must be the one the read's snapshots saw, or a replay at it re-derives
        another answer: a concurrent write committing between a size and the query (a
        parallel store beside a list, say) is in one and not the other. Each snapshot
        query reports its own size; a read whose queries straddled a commit runs again.
        A read that reported no size (it ran no snapshot query) runs again between two
        head reads, and every later call of that tool in this run is bracketed at once.
        """
        write = sent.name in WRITE_TOOLS
        # A head read before a read only for the tools known to report no size: the
        # snapshots' own sizes make it moot, and it was an aiosqlite round trip (two
        # thread hops) on every recorded fetch (issue 17).
        bracket = sent.name in self._unsized
        for _attempt in range(_READ_ATTEMPTS):
            before = (await self._store.head()).size if bracket else None
            error: MemsealError | None = sent.invalid
            prepared: Prepared | None = None
            with observing_sizes() as sizes:
                if sent.invalid is None:
                    try:
                        prepared = await self._tools.prepare(sent.name, sent.arguments)
                    except RECORDED_ERRORS as exc:
                        error = exc
            if prepared is not None and prepared.command is not None:
                return 0, prepared, error  # a write: the writer records its own size
            if sizes:
                seen = set(sizes)
            elif write or sent.invalid is not None:
                # A refused write, or a call refused before its tool ran: it read nothing,
                # so the size it names is the head's now (a write records its size in its
                # transaction, so none was read before it).
                seen = {(await self._store.head()).size}
            elif before is not None:
                seen = {before, (await self._store.head()).size}
            else:
                # No size: run it again between two head reads. Only a read that answered
                # marks its tool (an argument the tool refused says nothing of its reads).
                if prepared is not None:
                    self._unsized.add(sent.name)
                bracket = True
                continue
            if len(seen) == 1:
                return seen.pop(), prepared, error
        raise Conflict(
            f"{sent.name}: the memory changed during each of {_READ_ATTEMPTS} tries of this "
            "read, so no tree size names what it saw; nothing was recorded, call it again"
        )

    def _key_step(self, step: int, key: str | None) -> None:
        """The step's current call is now the one just recorded: its key (if any) is there."""
        old = self._key_at.pop(step, None)
        if old is not None and self._keyed.get(old) == step:
            del self._keyed[old]
        if key is not None:
            self._keyed[key] = step
            self._key_at[step] = key

    def _check_lease(self, txn: WriteTxn) -> None:
        """:func:`check_holder`, read once a group: kept until a statement writes ``runs``."""
        lease = f"replay.lease.{self.run_id}"
        if txn.known(lease) != self._holder:
            check_holder(txn, self.run_id, self._holder)
            txn.keep(lease, self._holder, ("runs",))

    def _live_command(
        self, call: CallDraft, ready: tuple[Draft, Any] | None, error: MemsealError | None
    ) -> Callable[[WriteTxn], tuple[Any, MemsealError | None]]:
        """The writer's transaction of one live call: its writes, its entry, its memo."""
        step, prepared = call.step, call.prepared
        opening = self._started_draft() if self._oneshot else None
        guard = call.supersedes is None and self._steps.is_reissue(step)

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
                self._check_lease(txn)
            if guard and txn.execute(
                "SELECT 1 FROM memos WHERE run_id = ? AND step = ?", (self.run_id, step)
            ):
                raise Taken(
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
                        result = normal(prepared.command(txn))
                except RECORDED_ERRORS as exc:
                    failure = exc
                recorded = error_result(failure) if failure is not None else result
                draft = call.draft(recorded, failure, before, tuple(range(before, txn.size)))
            appended = txn.append(draft)
            key = memo_key(self.run_id, step)
            put_memo(txn, MemoRow(run_id=self.run_id, step=step, memo_key=key, seq=appended.seq))
            if opening is not None:
                release(txn, self.run_id, self._holder)
            return recorded, failure

        return command
