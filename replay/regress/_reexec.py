"""Re-executing a recorded run: the pieces regression replay and ``replay --update`` share.

Both rebuild, in a temporary log (:mod:`._temp_log`), the memory each recorded
call observed, entry by entry in seq order, then make the call again through
the tools layer. The entries come from a :class:`FolderSource` (every entry of
the data folder the bundle came from, checked by :func:`check_folder`) or a
:class:`BundleSource` (the bundle's entries only; the seqs between them are
inert gap entries); :class:`Cursors` carries a page's re-made cursor to the
call that continues it.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

from memseal.engine.events import MemoryStored, decode_event
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.folder import DataFolder
from memseal.ledger.opening import LogLocation, log_store
from memseal.replay.evidence._bundle_format import VerifiedBundle
from memseal.replay.evidence._temp_log import Source, source_of

__all__ = ["BundleSource", "Cursors", "FolderSource", "check_folder", "open_against"]


class FolderSource:
    """Every entry of a data folder (read-only), checked against the bundle's."""

    def __init__(self, folder: Path) -> None:
        self.store = log_store(LogLocation(folder=folder))

    async def read(self, start: int, stop: int) -> list[Source | int]:
        """The folder's entries ``start <= seq < stop``: the whole log, so never a gap."""
        out: list[Source | int] = []
        async for record in self.store.scan(start, stop):
            out.append(source_of(record.seq, record.entry(), record.payload))
        return out


class BundleSource:
    """The bundle's own entries; a seq it does not hold reads as a gap (a bare int)."""

    def __init__(self, verified: VerifiedBundle) -> None:
        self.by_seq: dict[int, Source] = {}
        for item in verified.bundle.entries:
            self.by_seq[item.seq] = source_of(item.seq, verified.entries[item.seq], item.payload)
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
