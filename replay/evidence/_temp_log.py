"""The temporary log a recorded run's memory is re-derived in, entry by entry.

Re-deriving a read (a read proof's verifier, regression replay, ``replay
--update``) rebuilds the memory the call observed: the recorded entries are
copied, in seq order, into a :class:`TempLog`, which keeps each entry's body,
payload and time, so the projection derived from it is the one the run saw.
Seqs the evidence does not hold are inert gap entries (:data:`GAP_KIND`).
:func:`parse_time` reads an entry's time, :func:`clock_for` the time a
re-executed call runs at.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Final

import msgspec

from memseal.engine import Answerer, Engine
from memseal.engine.embedders import Embedder
from memseal.ledger.entry import Draft, Entry, payload_hash
from memseal.ledger.log import Ledger
from memseal.ledger.note import NoteSigner
from memseal.ledger.opening import LogLocation, log_store
from memseal.ledger.store import SqlStore, WriteTxn

from ._bundle_format import BundleCall

__all__ = [
    "GAP_KIND",
    "Source",
    "TempLog",
    "clock_for",
    "parse_time",
    "source_of",
    "temp_log",
]

GAP_KIND: Final = "replay_gap"


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded entry as copied into a :class:`TempLog`: its body, payload and time."""

    seq: int
    kind: str
    at: str
    body: bytes
    payload: bytes | None
    redacts: tuple[int, ...]
    committed: bool = False  # the entry commits to a payload (None above: a forget erased it)


def source_of(seq: int, entry: Entry, payload: bytes | None) -> Source:
    """The signed ``entry`` at ``seq`` as a :class:`Source`, with the payload held of it."""
    return Source(
        seq=seq,
        kind=entry.kind,
        at=entry.at,
        body=bytes(entry.body),
        payload=payload,
        redacts=entry.redacts,
        committed=entry.payload_hash is not None,
    )


def _mentions(kind: str, body: bytes) -> tuple[str, ...]:
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return ()
    if not isinstance(value, dict):
        return ()
    if kind in ("memory_stored", "trust_changed") and isinstance(value.get("item"), str):
        return (value["item"],)
    if kind == "memory_tool_call" and isinstance(value.get("cites"), list):
        return tuple(c for c in value["cites"] if isinstance(c, str))
    return ()


def parse_time(at: str) -> datetime:
    """An entry's ``at`` as an aware UTC datetime; ValueError on any other spelling."""
    return datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class TempLog:
    """A throwaway ledger and engine that entries are copied into, seq by seq."""

    def __init__(
        self,
        folder: Path,
        secret: bytes,
        embedder: Embedder | None,
        *,
        zone: tzinfo = UTC,
        answerer: Answerer | None = None,
        ranks_as: str | None = None,
    ) -> None:
        self.folder = folder
        # The store whose ranking a re-derived read repeats (a proof's ranked_by).
        self.ranks_as = ranks_as
        self.secret = secret
        self.embedder = embedder
        # The live memory's reading of dates and its answerer, for a view of it (as_of).
        self.zone = zone
        self.answerer = answerer
        self.now = datetime(2000, 1, 1, tzinfo=UTC)
        self.size = 0
        self.store: SqlStore | None = None
        self.ledger: Ledger | None = None
        self.engine: Engine | None = None

    def clock(self) -> datetime:
        """The store's and the engine's clock: the time of the entry being copied."""
        return self.now

    async def open(self) -> None:
        """Make the store in :attr:`folder`, signed by a throwaway key, and the engine over it."""
        signer = NoteSigner.generate("memseal-replay")
        store = log_store(LogLocation(folder=self.folder), signer, clock=self.clock)
        Engine.register_schema(store)
        await store.open()
        self.store = store
        self.ledger = Ledger(store, signer.verifier, None)
        # ann=None: a re-derived read ranks by the exact scan, never by an HNSW graph
        # whose shape depends on the order vectors were added (engine/_ann.py).
        self.engine = await Engine.open(
            self.ledger,
            store,
            self.secret,
            clock=self.clock,
            embedder=self.embedder,
            zone=self.zone,
            answerer=self.answerer,
            ann=None,
            ranks_as=self.ranks_as,
        )

    async def close(self) -> None:
        """Close the engine and the ledger, those of them :meth:`open` got to."""
        if self.engine is not None:
            await self.engine.close()
        if self.ledger is not None:
            await self.ledger.close()

    async def append(self, sources: Sequence[Source | int], *, rebuild: bool = True) -> None:
        """Append entries (a bare int: an inert gap entry at that seq) in one command.

        ``rebuild=False`` leaves the projection behind until :meth:`rebuild` (a caller
        appending many batches rebuilds once, at the end)."""
        assert self.store is not None

        def command(txn: WriteTxn) -> int:
            for source in sources:
                if isinstance(source, int):
                    self.now = datetime(2000, 1, 1, tzinfo=UTC)
                    txn.append(Draft(kind=GAP_KIND, body=b"{}"))
                    continue
                self.now = parse_time(source.at)
                salt = payload = digest = None
                if source.payload is not None:
                    payload, salt = source.payload, os.urandom(16)
                    digest = payload_hash(salt, payload)
                aligned = txn.size == source.seq
                txn.append(
                    Draft(
                        kind=source.kind,
                        body=source.body,
                        payload=payload,
                        salt=salt,
                        payload_hash=digest,
                        mentions=_mentions(source.kind, source.body) if payload else (),
                        redacts=source.redacts if aligned else (),
                    )
                )
            return txn.size

        self.size = await self.store.run(command)
        if rebuild:
            await self.rebuild()

    async def rebuild(self) -> None:
        """Derive the projection from every entry copied so far."""
        # The engine applies projections only for its own writes; copied entries need a
        # rebuild (it replays the whole temporary log).
        assert self.engine is not None
        await self.engine.rebuild()


def clock_for(call: BundleCall, written: Sequence[Source | int]) -> str:
    """The time to re-execute ``call`` at: the ``observed_at`` of the first item it
    wrote (in ``written``, the entries it appended), else the call's recorded time."""
    # A write's items carry the engine's clock as observed_at: use the recorded one.
    for source in written:
        if isinstance(source, Source) and source.kind == "memory_stored":
            try:
                observed = msgspec.json.decode(source.body).get("observed_at")
            except (msgspec.DecodeError, AttributeError):
                observed = None
            if isinstance(observed, str):
                return observed
    return call.at


@contextlib.asynccontextmanager
async def temp_log(
    secret: bytes, embedder: Embedder | None, *, ranks_as: str | None = None
) -> AsyncIterator[TempLog]:
    """An open :class:`TempLog` in a temporary folder, closed and removed on exit."""
    with tempfile.TemporaryDirectory(prefix="memseal-replay-") as tmp:
        log = TempLog(Path(tmp), secret, embedder, ranks_as=ranks_as)
        try:
            await log.open()
            yield log
        finally:
            await log.close()
