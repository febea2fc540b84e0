"""The engine's write verbs: store, the trust changes, forget and its scrub.

:class:`WriteVerbs` is one part of :class:`~memseal.engine.engine.Engine`, kept
apart from the reads and the set-up because every write is one command on the
store's single writer: validated (and embedded) first, then appended as one
signed ledger entry whose projection rows go in the same transaction. The
engine supplies the state it writes through, declared here.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from datetime import datetime

import msgspec

from memseal.ledger.store import SqlStore, WriteTxn, run_committed

from ._dialect import EngineSql
from ._forget import plan_forget
from ._scrub import Scrubber
from ._vectors import VectorCache
from ._writes import Prepared, embed, prepare, prepare_many, store_command, trust_command
from .events import Keyring
from .filters import Filter
from .namespaces import Namespace, Reach
from .results import Forgotten, NewItem, Stored, TrustChange
from .trust import Trust

__all__ = ["WriteVerbs"]


class WriteVerbs:
    """The writes of an :class:`~memseal.engine.engine.Engine` (see the module docstring)."""

    _store: SqlStore
    _keyring: Keyring
    _clock: Callable[[], datetime]
    _sql: EngineSql
    _vectors: VectorCache | None
    _scrubber: Scrubber

    async def store(
        self,
        content: object,
        *,
        namespace: Namespace | str,
        tags: Sequence[str] | None = None,
        meta: object = None,
        observed_at: datetime | str | None = None,
        trust: Trust = "unverified",
        sources: Sequence[str] | None = None,
    ) -> Stored:
        """Store one learning, document or conversation at ``namespace``.

        The same live memory (namespace, kind and content) stored again is
        a replay: the existing id comes back with ``replayed=True`` and
        nothing is appended. After a forget it is stored anew.
        """
        command = await self.plan_store(
            content,
            namespace=namespace,
            tags=tags,
            meta=meta,
            observed_at=observed_at,
            trust=trust,
            sources=sources,
        )
        return await self._store.run(command)

    async def plan_store(
        self,
        content: object,
        *,
        namespace: Namespace | str,
        tags: Sequence[str] | None = None,
        meta: object = None,
        observed_at: datetime | str | None = None,
        trust: Trust = "unverified",
        sources: Sequence[str] | None = None,
    ) -> Callable[[WriteTxn], Stored]:
        """:meth:`store` in two parts, for a caller that owns the transaction.

        Validates and embeds now (raising :class:`InvalidRequest` before
        anything runs); the returned command does the content-id dedupe and
        the append when run in the writer, alone through ``ledger.run`` or
        inside a larger command of the caller's.
        """
        prepared = prepare(
            self._keyring, self._clock, content, namespace, tags, meta, observed_at, trust, sources
        )
        (prepared,) = await embed(self._vectors, [prepared])
        return self._store_command(prepared)

    async def store_many(self, items: Sequence[NewItem]) -> builtins.list[Stored]:
        """Store several items; validated (all or none), embedded in one batch, group-committed.

        Each item is its own command: a replay or a failure of one leaves
        the others alone, exactly as separate :meth:`store` calls would.
        """
        prepared = await embed(self._vectors, prepare_many(self._keyring, self._clock, items))
        return list(
            await asyncio.gather(*(self._store.run(self._store_command(p)) for p in prepared))
        )

    def _store_command(self, prepared: Prepared) -> Callable[[WriteTxn], Stored]:
        vectors = self._vectors
        pg, embedder_id = (None, None) if vectors is None else (vectors.pg, vectors.id)
        words = self._sql.fts_words
        if words is not None:
            # Here, not in the writer: the one writer thread is the store's bottleneck.
            d = prepared.derived
            index = words(d.text, prepared.payload.title, d.tags)
            derived = msgspec.structs.replace(d, words=index)
            prepared = msgspec.structs.replace(prepared, derived=derived)
        return store_command(prepared, self._keyring, embedder_id, pg)

    async def promote(
        self, item_id: str, *, actor: str, reason: str, reach: Reach | None = None
    ) -> TrustChange:
        """Mark an item verified (a signed ``trust_changed`` entry naming actor and reason)."""
        return await self._set_trust(item_id, "verified", actor, reason, reach)

    async def reject(
        self, item_id: str, *, actor: str, reason: str, reach: Reach | None = None
    ) -> TrustChange:
        """Mark an item rejected: no read returns it any more (forget still reaches it)."""
        return await self._set_trust(item_id, "rejected", actor, reason, reach)

    async def mark_stale(
        self, item_id: str, *, actor: str, reason: str, reach: Reach | None = None
    ) -> TrustChange:
        """Set an item's trust to ``stale`` (below ``unverified``) with a signed entry."""
        return await self._set_trust(item_id, "stale", actor, reason, reach)

    async def _set_trust(
        self, item_id: object, level: Trust, actor: object, reason: object, reach: object
    ) -> TrustChange:
        command = trust_command(item_id, level, actor, reason, reach, self._keyring)
        return await self._store.run(command)

    async def forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        scrub: bool = True,
        actor: str | None = None,
        reason: str | None = None,
    ) -> Forgotten:
        """Forget items in reach, whatever their trust, by ``ids`` or by a non-empty ``filter``.

        One signed ``memory_forgotten`` entry (per 500 items) lists the ids
        and redacts every payload that mentions them; the projection rows
        and cached vectors go in the same transaction; then the scrub
        (``scrub=False`` leaves it pending for :meth:`scrub` or the next open).
        With ``reason`` (and ``actor``, who asked), each entry carries them as its
        payload, which no later forget erases; a forget without them signs none.
        """
        command, release = self.plan_forget(
            ids=ids, filter=filter, reach=reach, actor=actor, reason=reason
        )
        result = await run_committed(self._store.run, command, release)
        if result.seqs and scrub:
            done = await self.scrub()
            result = msgspec.structs.replace(result, scrubbed=done)
        return result

    def plan_forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        actor: object = None,
        reason: object = None,
    ) -> tuple[Callable[[WriteTxn], Forgotten], Callable[[], None]]:
        """:meth:`forget` in parts, for a caller that owns the transaction.

        Validates now (raising :class:`InvalidRequest` before anything
        runs) and returns ``(command, release)``: ``command`` resolves the
        items and appends the ``memory_forgotten`` entries when run in the
        writer (alone, or inside a larger command of the caller's);
        ``release`` lets go of this process's in-memory copies of the
        forgotten vectors and must be called once that transaction committed,
        even when the caller stopped waiting (``memseal.ledger.store.run_committed``
        does both). Then await :meth:`scrub`. The command's result says
        ``scrubbed=False`` whenever it forgot something.
        """
        return plan_forget(
            self._keyring,
            self._vectors,
            ids=ids,
            filter=filter,
            reach=reach,
            actor=actor,
            reason=reason,
        )

    async def scrub(self) -> bool:
        """Finish every pending forget's scrub (FTS merge, WAL truncation); True when done.

        Readers holding an old snapshot make the truncation wait: it is
        retried briefly here, then in the background until it succeeds
        (see :mod:`memseal.engine._scrub`).
        """
        return await self._scrubber.run()
