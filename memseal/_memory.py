"""The :class:`Memory` an open data folder is: its ledger, engine, tools and durable runs.

:func:`memseal.open` (``memory.py``) checks its arguments, opens the log and the
engine and hands them here; this module is what a host then calls, and knows
nothing of how the folder or the store was chosen.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import warnings
import weakref
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal

from memseal.apps.as_of import PYTHON_NAMES, AsOfView, ViewCache, resolve_point
from memseal.engine import Engine
from memseal.ledger.errors import InvalidRequest, MemsealError, StorageError, VerificationError
from memseal.ledger.keys import (
    Keys,
    begin_rotation,
    complete_rotation,
    discard_rotation,
    key_history,
    load_keys,
)
from memseal.ledger.log import Ledger
from memseal.ledger.note import VerifierKey
from memseal.ledger.opening import LogLocation, check_keys, record_location
from memseal.replay.evidence import read_proof
from memseal.replay.runs._mentions import check_facet_mentions
from memseal.replay.runs.identity import ScopeIdentity
from memseal.replay.runs.provenance import DerivedCheck
from memseal.replay.runs.run import Run, new_run_id
from memseal.tools import MemoryTools, ToolScope

from ._recorded_tools import RecordedTools

__all__ = ["Memory"]


class Memory:
    """An open memseal instance: its ledger, its memory engine, tools and durable runs."""

    def __init__(
        self,
        where: LogLocation,
        keys: Keys,
        ledger: Ledger,
        engine: Engine,
        history: list[VerifierKey],
        *,
        views: ViewCache | None = None,
    ) -> None:
        self.folder = where.folder
        #: Where the log lives, fit to print: the database file, or the store URL
        #: with its password hidden.
        self.location = where.display
        self._where = where
        self._keys = keys
        self.ledger = ledger
        self.engine = engine
        # Shared with the store's key source and every run: see _folder_key.
        self._history = history
        self._closed = False
        # The runs this memory opened (a one-shot run holds no lease): closing the memory
        # closes them, so no lease outlives it. Weak: a closed run dropped by its host goes.
        self._runs: weakref.WeakSet[Run] = weakref.WeakSet()
        self._token = f"memory-{secrets.token_hex(8)}"
        # Built views of the past (as_of), kept warm; closed with the memory.
        self._views = views if views is not None else ViewCache(ledger.store, keys.secret)

    @property
    def vkey(self) -> str:
        """The current signing key's public half, as a C2SP vkey line."""
        # The store's: another process may have rotated the key since this one opened.
        return self.ledger.store.signer.verifier.text

    @property
    def trust_root(self) -> str:
        """The ledger's first key: what an auditor trusts to verify from the start.

        Equal to :attr:`vkey` until a key rotation; afterwards the chain of
        ``key_rotated`` entries leads from it to the current key.
        """
        return self.ledger.trust_root.text

    async def key_history(self) -> list[VerifierKey]:
        """The ledger's keys, oldest first, read from ``keys/history`` now and checked
        against the signed chain of ``key_rotated`` entries.

        Exports list these keys, and a long-running server exports long after it
        opened (a rotation may have extended the file since): a file cut or edited
        meanwhile is refused here, as at open, rather than handed to an auditor.
        """
        history = await asyncio.to_thread(key_history, self.folder)
        await check_keys(self.ledger.store, history, self.folder)
        return history

    async def close(self) -> None:
        """Close the runs this memory opened (releasing their leases), then the stores."""
        self._closed = True
        try:
            for run in list(self._runs):
                # The strict check belongs to the run's own close; here only the lease.
                with contextlib.suppress(MemsealError):
                    await run.close(check=False)
            self._runs.clear()
            await self._views.close()
            # A ledger begun by this open may have its first entry now: record its identity.
            with contextlib.suppress(StorageError):
                await record_location(self._where, self.ledger.store)
            await self.engine.close()
        finally:
            await self.ledger.close()

    def tools(
        self,
        scope: ToolScope | None = None,
        *,
        run_id: str | None = None,
        mode: str = "resume",
        fork: bool = False,
        lifecycle: str | None = None,
    ) -> RecordedTools:
        """The seven memory tools for one host-fixed scope (default: the root, everything),
        every call recorded as a signed ``memory_tool_call`` entry with its memo.

        Without ``run_id`` each call is a fresh one-call run; with it, every call is the
        next step of that run (opened in ``mode``, with ``fork``, as :meth:`run` does).
        ``tools.last_call`` names the run and step of the latest call.
        """
        tools = MemoryTools(self.engine, scope)
        if run_id is None:
            if mode != "resume" or fork:
                raise InvalidRequest(
                    "`mode` and `fork` choose how a named run resumes: give `run_id`"
                )
            return RecordedTools(self, tools)
        run = self._run(run_id, tools, mode=mode, fork=fork, lifecycle=lifecycle)
        return RecordedTools(self, tools, run)

    def run(
        self,
        run_id: str | None = None,
        scope: ToolScope | None = None,
        *,
        mode: str = "resume",
        fork: bool = False,
        lease_ttl: float = 15.0,
        oneshot: bool = False,
        lifecycle: str | None = None,
    ) -> Run:
        """A durable run: every call recorded as a signed entry, replayed from its memo.

        ``run_id`` names the run (a fresh one when None: see ``run.run_id``);
        ``mode`` is ``record``, ``resume`` (default), ``strict`` or
        ``revalidate``; ``fork=True`` lets a resumed run that diverges go live
        from there (recorded as a signed ``run_forked`` entry) instead of failing.
        A run belongs to the whole scope that opened it: opening it with a scope
        that differs in any field raises :class:`Conflict`. ``lifecycle`` names what
        the run is to the lifecycle layer (signed into its ``run_started`` entry).
        """
        return self._run(
            run_id,
            MemoryTools(self.engine, scope),
            mode=mode,
            fork=fork,
            lease_ttl=lease_ttl,
            oneshot=oneshot,
            lifecycle=lifecycle,
        )

    def _run(
        self,
        run_id: str | None,
        tools: MemoryTools,
        *,
        mode: str = "resume",
        fork: bool = False,
        lease_ttl: float = 15.0,
        oneshot: bool = False,
        lifecycle: str | None = None,
    ) -> Run:
        if self._closed:
            raise InvalidRequest(f"the memory at {self.location} is closed")
        run = Run(
            run_id=new_run_id() if run_id is None else run_id,
            mode=mode,
            tools=tools,
            scope=ScopeIdentity.of(tools.scope),
            ledger=self.ledger,
            store=self.ledger.store,
            secret=self._keys.secret,
            keys=self._history,
            fork=fork,
            lease_ttl=lease_ttl,
            oneshot=oneshot,
            owner=self._token,
            lifecycle=lifecycle,
        )
        if not oneshot:
            self._runs.add(run)
        return run

    async def call(
        self, name: str, arguments: Any = None, *, scope: ToolScope | None = None
    ) -> tuple[str, Any]:
        """One recorded call outside any named run: returns (the fresh run id, the result)."""
        run = self.run(None, scope, mode="record", oneshot=True)
        try:
            return run.run_id, await run.call(name, arguments)
        finally:
            await run.close()

    async def as_of(
        self,
        size: int | None = None,
        *,
        at: str | datetime | None = None,
        run: str | None = None,
        step: int | None = None,
        names: Mapping[str, str] = PYTHON_NAMES,
    ) -> AsOfView:
        """A read-only view of the memory as it stood at tree ``size``, at time ``at``
        (RFC 3339), or when run ``run`` made step ``step``; its ``tools(scope)`` serve
        the read tools, unrecorded. A later forget still applies. Raises
        :class:`InvalidRequest` naming the field for a bad point (see docs/history.md);
        ``names`` spells the fields as the caller's own interface does (HTTP, CLI)."""
        if self._closed:
            raise InvalidRequest(f"the memory at {self.location} is closed")
        point = await resolve_point(
            self.ledger.store, size=size, at=at, run=run, step=step, names=names
        )
        return AsOfView(self._views, point)

    async def verify(
        self,
        trust: str | None = None,
        *,
        checkpoints: Sequence[str] = (),
        witnesses: Sequence[str] = (),
        quorum: int | None = None,
        deep: bool = False,
    ) -> None:
        """What ``memseal verify`` checks: the ledger (against ``trust``, default the
        first key), the memo table against the signed calls and, with ``deep``, the
        projections against a rebuild from the log. With ``witnesses`` (witness vkeys),
        every one of ``checkpoints`` must carry ``quorum`` (default 1) valid witness
        cosignatures. Returns None or raises :class:`VerificationError`."""
        # The derived tables are collected on the ledger's own scan (one read and one
        # decode of the log), then checked once every entry passed.
        derived = DerivedCheck()
        summary = await self.ledger.verify(
            trust, checkpoints=checkpoints, witnesses=witnesses, quorum=quorum, observe=derived.add
        )
        await derived.check(self.ledger.store)
        if deep:
            check = await self.engine.check_projections()
            if not check.matches:
                raise VerificationError(check.line(), seq=check.seq, step="projection")
            await check_facet_mentions(self.ledger.store, summary.size, self.engine.facet_ref)

    async def rotate_key(self, name: str | None = None) -> str:
        """Hand the ledger to a new signing key; returns the new vkey.

        The old key signs a ``key_rotated`` entry naming the new one and, with
        the new key, the checkpoint cut in the same transaction; then its
        private half is deleted. Auditors keep trusting the first key.
        """
        # Another process on this ledger may have rotated since: start from the folder's key.
        self._keys = await asyncio.to_thread(load_keys, self.folder)
        new = await asyncio.to_thread(begin_rotation, self.folder, name or self._keys.signer.name)
        try:
            await self.ledger.rotate_key(new)
        except BaseException:
            await asyncio.to_thread(discard_rotation, self.folder)
            raise
        self._keys = await asyncio.to_thread(complete_rotation, self.folder, self._keys, new)
        self._history.append(new.verifier)
        return self._keys.vkey

    async def prove_read(
        self, run_id: str, step: int, *, disclose: Literal["reach", "all"] = "reach"
    ) -> bytes:
        """The read proof (``memseal/read-proof@v1`` bytes) of step ``step`` of run
        ``run_id``: checked offline, with no data folder, by
        :func:`memseal.replay.evidence.read_proof.verify_read` (docs/auditing.md).

        The proof is not verified here (``memseal prove-read`` and the read-proof route
        do verify before handing one out): pass it to ``verify_read`` first. A read
        recorded on PostgreSQL is re-ranked with ``ts_rank`` as the server computed it."""
        proof = await read_proof.prove_read(
            self.ledger,
            run_id,
            step,
            embedders=await self.engine.embedders(),
            disclose=disclose,
        )
        return read_proof.encode_read_proof(proof)

    async def __aenter__(self) -> Memory:
        return self

    def __del__(self) -> None:
        # A memory dropped open holds its runs' leases until they expire (another process
        # waits out the lease before resuming them): say so where the host can see it.
        if not getattr(self, "_closed", True):
            warnings.warn(
                f"memseal memory at {self.location} was never closed: its run leases are "
                "held until they expire; use `async with memseal.open(...)` or `await "
                "memory.close()`",
                ResourceWarning,
                stacklevel=2,
            )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
