"""The ledger facade: append, read and verify over a log store and its keys."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .entry import make_draft
from .errors import InvalidRequest, VerificationError
from .keys import Keys
from .note import VerifierKey, parse_vkey
from .sqlite import SqliteLogStore
from .store import Appended, Command, Head, Record, WriteTxn
from .verify import LedgerVerifier, VerifySummary

__all__ = ["Ledger", "Progress", "TrustArg", "trusted_keys"]

T = TypeVar("T")

Progress = Callable[[int, int], None]
"""Called as verification goes with (entries done, entries in all)."""

TrustArg = str | VerifierKey | Sequence[str | VerifierKey] | None


def trusted_keys(trust: TrustArg, default: VerifierKey | None) -> list[VerifierKey]:
    """Turn what a caller passes as ``trust`` into keys; None trusts ``default``."""
    if trust is None:
        if default is None:
            raise InvalidRequest("`trust` is required: pass the ledger's vkey")
        return [default]
    items: Sequence[str | VerifierKey] = [trust] if isinstance(trust, str | VerifierKey) else trust
    keys: list[VerifierKey] = []
    for item in items:
        if isinstance(item, VerifierKey):
            keys.append(item)
        elif isinstance(item, str):
            try:
                keys.append(parse_vkey(item.strip()))
            except InvalidRequest as exc:
                raise InvalidRequest(f"`trust`: {exc}") from exc
        else:
            raise InvalidRequest(f"`trust` must be vkey text, not {type(item).__name__}")
    if not keys:
        raise InvalidRequest("`trust` names no key")
    return keys


class Ledger:
    """The signed, append-only log of one memseal instance."""

    def __init__(self, store: SqliteLogStore, keys: Keys | None) -> None:
        """``keys`` None: an auditor's read-only ledger, verified against a given key."""
        self.store = store
        self._keys = keys

    async def append(
        self,
        kind: str,
        body: Mapping[str, Any],
        payload: Any = None,
        *,
        mentions: Sequence[str] = (),
        redacts: Sequence[int] = (),
    ) -> Appended:
        """Append one signed entry; returns once it is durable.

        ``body`` is structure (ids, kinds, hashes); ``payload`` anything a
        person typed, committed by a salted hash and erasable later by an
        entry that lists its seq in ``redacts``. ``mentions`` indexes the
        ids the payload mentions, so a later forget can find it.
        """
        draft = make_draft(kind, body, payload, mentions=mentions, redacts=redacts)

        def command(txn: WriteTxn) -> Appended:
            return txn.append(draft)

        return await self.store.run(command)

    async def run(self, command: Command[T]) -> T:
        """Run a unit of work in the writer (the layers above add their rows here)."""
        return await self.store.run(command)

    async def head(self) -> Head:
        return await self.store.head()

    async def size(self) -> int:
        return (await self.store.head()).size

    async def read(self, seq: int) -> Record:
        return await self.store.read(seq)

    def scan(self, start: int = 0, stop: int | None = None) -> AsyncIterator[Record]:
        return self.store.scan(start, stop)

    async def mentioning(self, ref: str) -> list[int]:
        return await self.store.mentioning(ref)

    async def verify(
        self,
        trust: TrustArg = None,
        *,
        progress: Progress | None = None,
        workers: int | None = None,
    ) -> VerifySummary:
        """Walk the whole ledger; return a summary or raise :class:`VerificationError`.

        ``trust`` is the auditor's vkey (text or parsed); None trusts this
        instance's own key, which proves integrity, not identity.
        """
        keys = trusted_keys(trust, None if self._keys is None else self._keys.verifier)
        count = workers if workers is not None else min(2, os.cpu_count() or 1)
        total = (await self.store.head()).size
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max(1, count), thread_name_prefix="memseal-verify") as pool:
            verifier = LedgerVerifier(keys, executor=pool, workers=count)
            chunk: list[Record] = []
            async for record in self.store.scan(0, total):
                chunk.append(record)
                if len(chunk) >= 4096:
                    await loop.run_in_executor(None, verifier.feed, chunk)
                    chunk = []
                    if progress is not None:
                        progress(verifier.size, total)
            if chunk:
                await loop.run_in_executor(None, verifier.feed, chunk)
            if verifier.size != total:
                raise VerificationError(
                    f"the log has {total} entries but only {verifier.size} could be read",
                    seq=verifier.size,
                    step="chain",
                )
            summary = verifier.finish()
        if progress is not None:
            progress(total, total)
        still = await self.store.payloads_present(sorted(verifier.redacted))
        if still:
            raise VerificationError(
                "payload is still stored although a signed entry redacted it",
                seq=still[0],
                step="redaction",
            )
        return summary
