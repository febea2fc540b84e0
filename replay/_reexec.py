"""Re-executing a recorded run: the pieces regression replay and ``replay --update`` share.

Both rebuild, in a temporary log, the memory each recorded call observed,
entry by entry in seq order, then make the call again through the tools
layer. The entries come from a :class:`FolderSource` (every entry of the data
folder the bundle came from, checked by :func:`check_folder`) or a
:class:`BundleSource` (the bundle's entries only; the seqs between them are
inert gap entries), and are copied into a :class:`TempLog`, which keeps each
entry's body, payload and time, so the projection derived from it is the one
the run saw. :func:`run_scope` is the scope the run recorded, :func:`clock_for`
the time a re-executed call runs at.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, Final

import msgspec

from memseal.engine import Answerer, Engine, Reach
from memseal.engine.embedders import Embedder
from memseal.engine.events import MemoryStored, decode_event
from memseal.ledger.entry import Draft, payload_hash
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.folder import DataFolder
from memseal.ledger.log import Ledger
from memseal.ledger.note import NoteSigner
from memseal.ledger.opening import LogLocation, log_store
from memseal.ledger.store import SqlStore, WriteTxn
from memseal.tools import ToolScope

from .bundle import BundleCall, VerifiedBundle

__all__ = [
    "GAP_KIND",
    "BundleSource",
    "Cursors",
    "FolderSource",
    "Source",
    "TempLog",
    "check_folder",
    "clock_for",
    "open_against",
    "parse_time",
    "run_scope",
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


class FolderSource:
    """Every entry of a data folder (read-only), checked against the bundle's."""

    def __init__(self, folder: Path) -> None:
        self.store = log_store(LogLocation(folder=folder))

    async def read(self, start: int, stop: int) -> list[Source | int]:
        """The folder's entries ``start <= seq < stop``: the whole log, so never a gap."""
        out: list[Source | int] = []
        async for record in self.store.scan(start, stop):
            entry = record.entry()
            out.append(
                Source(
                    seq=record.seq,
                    kind=entry.kind,
                    at=entry.at,
                    body=bytes(entry.body),
                    payload=record.payload,
                    redacts=entry.redacts,
                    committed=entry.payload_hash is not None,
                )
            )
        return out


class BundleSource:
    """The bundle's own entries; a seq it does not hold reads as a gap (a bare int)."""

    def __init__(self, verified: VerifiedBundle) -> None:
        self.by_seq: dict[int, Source] = {}
        for item in verified.bundle.entries:
            entry = verified.entries[item.seq]
            self.by_seq[item.seq] = Source(
                seq=item.seq,
                kind=entry.kind,
                at=entry.at,
                body=bytes(entry.body),
                payload=item.payload,
                redacts=entry.redacts,
                committed=entry.payload_hash is not None,
            )
        self._seqs = sorted(self.by_seq)
        #: The items whose stored entry the bundle carries.
        stored = (
            decode_event(s.kind, s.body) for s in self.by_seq.values() if s.kind == "memory_stored"
        )
        self.items = {e.item for e in stored if isinstance(e, MemoryStored)}

    async def read(self, start: int, stop: int) -> list[Source | int]:
        """The entries ``start <= seq < stop``, a bare int for each seq the bundle lacks."""
        return [self.by_seq.get(seq, seq) for seq in range(start, stop)]

    def whole_below(self, stop: int) -> bool:
        """Whether the bundle holds every entry ``seq < stop`` (no other run's, say)."""
        return bisect.bisect_left(self._seqs, stop) == stop


class Cursors:
    """Each recorded ``next_cursor``, and the one its re-made page returned.

    A cursor holds a ref keyed by the instance secret, so a page re-made without the
    recording's secret returns another cursor text for the very same page. A later
    call continuing the recorded cursor is sent the re-made one, so what it continues
    is compared (or re-recorded) in that call's result.
    """

    def __init__(self) -> None:
        self.made: dict[str, str] = {}

    @staticmethod
    def continued(arguments: Any) -> str | None:
        """The cursor a call's arguments continue, if any."""
        cursor = arguments.get("cursor") if isinstance(arguments, dict) else None
        return cursor if isinstance(cursor, str) else None

    def send(self, arguments: Any) -> Any:
        """The arguments with a recorded cursor swapped for its re-made one."""
        cursor = self.continued(arguments)
        if cursor is None or cursor not in self.made:
            return arguments
        return {**arguments, "cursor": self.made[cursor]}

    def knows(self, arguments: Any) -> bool:
        """Whether a call continues no cursor, or one whose page was re-made with one."""
        cursor = self.continued(arguments)
        return cursor is None or cursor in self.made

    def seen(self, recorded: Any, new: Any) -> Any:
        """Keep the page's re-made cursor; ``new`` with the recorded one where both go on."""
        if not (isinstance(recorded, dict) and isinstance(new, dict)):
            return new
        old, made = recorded.get("next_cursor"), new.get("next_cursor")
        if not (isinstance(old, str) and isinstance(made, str)):
            return new
        self.made[old] = made
        return {**new, "next_cursor": old}


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


async def check_folder(source: FolderSource, verified: VerifiedBundle) -> None:
    """Refuse a folder the bundle did not come from: VerificationError (step ``against``)
    unless it holds the checkpoint's size at least, and each bundle entry leaf for leaf."""
    size = (await source.store.head()).size
    if size < verified.size:
        raise VerificationError(
            f"the data folder holds {size} entries; the bundle's checkpoint has {verified.size}: "
            "it is not the folder the bundle came from (or it was truncated)",
            step="against",
        )
    for item in verified.bundle.entries:
        record = await source.store.read(item.seq)
        if record.leaf != item.leaf:
            raise VerificationError(
                "the data folder's entry differs from the bundle's: not the folder it came from",
                seq=item.seq,
                step="against",
            )


def run_scope(verified: VerifiedBundle) -> ToolScope:
    """The scope the run's ``run_started`` entry recorded; VerificationError (step ``run``)
    when the bundle has none or it names an unknown reach or an invalid scope."""
    started = verified.started
    if started is None:
        raise VerificationError(
            "the bundle has no run_started entry: its scope is unknown", step="run"
        )
    reach = None
    if started.reach is not None:
        mode, _, node = started.reach.partition(":")
        makers: dict[str, Callable[[str], Reach]] = {
            "of": Reach.of,
            "subtree": Reach.subtree,
            "exact": Reach.exact,
        }
        if mode not in makers:
            raise VerificationError(
                f"run_started names an unknown reach {started.reach!r}", step="run"
            )
        reach = makers[mode](node)
    # A run records its whole scope; one recorded before that holds place, reach, writes
    # and floor only, and its default trust is taken as the floor.
    fields: dict[str, Any] = {"default_trust": started.floor}
    for name in ("default_trust", "frozen", "allowlist"):
        value = getattr(started, name)
        if value is not msgspec.UNSET:
            fields[name] = None if value is None else value
    try:
        return ToolScope(
            place=started.place,
            reach=reach,
            writes=started.writes,
            floor=started.floor,  # type: ignore[arg-type]
            **fields,
        )
    except InvalidRequest as exc:
        raise VerificationError(f"run_started names an invalid scope: {exc}", step="run") from None


async def open_against(against: Path) -> tuple[bytes, FolderSource]:
    """The instance secret of the data folder ``--against`` names, and its store opened
    as the source of the recorded memory (the caller closes it)."""
    secret_path = DataFolder(root=against).instance_secret
    try:
        secret = secret_path.read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"--against {against}: cannot read {secret_path}: {exc}") from exc
    source = FolderSource(against)
    await source.store.open()
    return secret, source
