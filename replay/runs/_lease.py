"""A run's lease: opening the run (its start entry, its scope, its memos), renewing, closing.

A run is held by one :class:`~memseal.replay.runs.run.Run` object at a time,
through a lease in the ``runs`` table (see :mod:`memseal.replay.runs.memo`).
Opening takes the lease and, for a run that exists, checks the scope on
its signed ``run_started`` entry and reconciles the memo table with the
run's signed calls; closing gives the lease back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self

import msgspec
from msgspec import UNSET
from nacl.signing import VerifyKey

from memseal.ledger.entry import Draft, make_draft
from memseal.ledger.entry_check import check_entry
from memseal.ledger.errors import (
    Conflict,
    InvalidRequest,
    MemsealError,
    NotFound,
    ProvenanceError,
    ReplayDivergence,
    VerificationError,
)
from memseal.ledger.note import VerifierKey
from memseal.ledger.store import SqlStore, WriteTxn

from .calls import RUN_STARTED, RunStarted
from .identity import ScopeIdentity
from .memo import acquire, add_hits, held_here, let_go_here, release, renew
from .provenance import reconcile_memos

__all__ = ["RunLease", "other_scope"]

_log = logging.getLogger("memseal.replay")


class RunLease:
    """The lease half of a run: what :class:`~memseal.replay.runs.run.Run` opens and closes with."""

    run_id: str
    lifecycle: str | None
    mode: str
    restored: list[int]
    _scope: ScopeIdentity
    _store: SqlStore
    _key_list: Sequence[VerifierKey]
    _known: dict[str, VerifyKey]
    _ttl: float
    _oneshot: bool
    _owner: str
    _holder: str
    _live_from: int | None
    _recorded: set[int]
    _signed: dict[int, int]
    _keyed: dict[str, int]
    _key_at: dict[int, str]
    _consumed: set[int]
    _start_lock: asyncio.Lock
    _started: bool
    _closed: bool
    _renewer: asyncio.Task[None] | None
    _hits: dict[int, tuple[int, int]]

    async def __aenter__(self) -> Self:
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
            self._keyed = dict(memos.keyed)
            self._key_at = {step: key for key, step in memos.keyed.items()}
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
            entry = check_entry(
                record.leaf, record.signature, self._keys(), seq=seq, stored_hash=record.leaf_hash
            )
        except NotFound:
            raise ProvenanceError(failed, seq=seq) from None
        except VerificationError as exc:
            raise ProvenanceError(f"{failed}: {exc}", seq=seq) from None
        body = msgspec.json.decode(bytes(entry.body))
        if entry.kind != RUN_STARTED or not isinstance(body, dict):
            raise ProvenanceError(failed, seq=seq)
        if body.get("run_id") != self.run_id:
            raise ProvenanceError(failed, seq=seq)
        differs = self._scope.differs_from(body)
        if differs:
            raise Conflict(other_scope(self.run_id, differs))

    def _started_draft(self) -> Draft:
        lifecycle = self.lifecycle
        started = RunStarted(
            run_id=self.run_id,
            mode=self.mode,
            **self._scope.recorded(),
            lifecycle=UNSET if lifecycle is None else lifecycle,
        )
        return make_draft(RUN_STARTED, msgspec.to_builtins(started))

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)

            hits = self._take_hits()
            try:
                await self._store.run(self._renewal(hits))
            except MemsealError:
                self._keep_hits(hits)

    def _renewal(self, hits: dict[int, tuple[int, int]]) -> Callable[[WriteTxn], bool]:
        """The renewal's transaction: the lease extended, and the hits counted since the
        last one added (a count, added even when the lease was lost: those calls were
        answered)."""

        def command(txn: WriteTxn) -> bool:
            add_hits(txn, self.run_id, hits)
            return renew(txn, self.run_id, self._holder, self._ttl)

        return command

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
            hits = self._take_hits()

            def command(txn: WriteTxn) -> None:
                add_hits(txn, self.run_id, hits)
                release(txn, self.run_id, self._holder)

            try:
                await self._store.run(command)
            except MemsealError:
                await self._last_hits(hits)
                raise
            finally:
                let_go_here(self._holder)
        unconsumed = sorted(self._recorded - self._consumed)
        if check and self.mode == "strict" and unconsumed:
            raise ReplayDivergence(
                f"run {self.run_id!r}: recorded steps {_steps(unconsumed)} were never replayed",
                run_id=self.run_id,
                step=unconsumed[0],
            )

    async def _last_hits(self, hits: dict[int, tuple[int, int]]) -> None:
        """One more try at the closing write's hits alone: no later flush would add them.
        The lease needs no second try (it expires by itself); a count lost is logged."""
        if not hits:
            return

        def command(txn: WriteTxn) -> None:
            add_hits(txn, self.run_id, hits)

        try:
            await self._store.run(command)
        except MemsealError:
            _log.warning(
                "run %r: %d memo hits were not counted (the closing write failed)",
                self.run_id,
                sum(count for _, count in hits.values()),
            )

    def _take_hits(self) -> dict[int, tuple[int, int]]:
        """The memo hits counted since the last flush, taken out to be written."""
        hits, self._hits = self._hits, {}
        return hits

    def _keep_hits(self, hits: dict[int, tuple[int, int]]) -> None:
        """Put back hits whose write failed, so the next flush adds them."""
        for seq, (step, count) in hits.items():
            _, more = self._hits.get(seq, (step, 0))
            self._hits[seq] = (step, count + more)

    def _keys(self) -> dict[str, VerifyKey]:
        """The ledger's keys by id, including any the history gained since the last call."""
        if len(self._known) != len(self._key_list):
            self._known = {k.key_id.hex(): VerifyKey(k.public_key) for k in self._key_list}
        return self._known


def other_scope(run_id: str, fields: Sequence[str]) -> str:
    """The refusal of a call into a run another scope opened (HTTP 409)."""
    return (
        f"run {run_id!r} belongs to another scope (it differs in {', '.join(fields)}); "
        "a run is used only with the scope that opened it: name a run of your own"
    )


def _steps(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:10])
    return shown + (f" and {len(steps) - 10} more" if len(steps) > 10 else "")
