"""What the engine's verbs take and return (beyond items and hits).

All frozen msgspec Structs, so hosts can encode them straight to JSON
(``msgspec.json.encode(result)``) and tests can compare them whole.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from .items import Content, Hit, Item, Meta
from .trust import Trust

__all__ = [
    "Fetched",
    "Forgotten",
    "Got",
    "Mode",
    "NewItem",
    "Page",
    "ProjectionCheck",
    "RebuildReport",
    "Stored",
    "TrustChange",
]

Mode = Literal["exact", "semantic", "hybrid"]


class NewItem(msgspec.Struct, frozen=True, kw_only=True):
    """One item to store (what :meth:`Engine.store` takes as arguments, as one value)."""

    content: Content | dict[str, object]
    namespace: str
    tags: tuple[str, ...] = ()
    meta: Meta | dict[str, object] | None = None
    observed_at: datetime | str | None = None
    trust: Trust = "unverified"
    sources: tuple[str, ...] = ()


class Stored(msgspec.Struct, frozen=True, kw_only=True):
    """``replayed``: the same live memory was already stored; nothing was appended."""

    id: str
    replayed: bool
    seq: int


class Got(msgspec.Struct, frozen=True, kw_only=True):
    """``missing``: unknown or outside the reach; ``filtered``: in reach, below the trust floor."""

    items: tuple[Item, ...]
    missing: tuple[str, ...]
    filtered: tuple[str, ...]


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """One page of a listing, newest first, with the cursor of the next page."""

    items: tuple[Item, ...]
    next_cursor: str | None = None


class Fetched(msgspec.Struct, frozen=True, kw_only=True):
    """The hits of a fetch, with the mode and minimum trust that produced them."""

    hits: tuple[Hit, ...]
    mode: Mode
    min_trust: Trust
    next_cursor: str | None = None


class TrustChange(msgspec.Struct, frozen=True, kw_only=True):
    """``seq`` is the signed ``trust_changed`` entry; None when the trust was already that."""

    id: str
    trust: Trust
    previous: Trust
    seq: int | None


class Forgotten(msgspec.Struct, frozen=True, kw_only=True):
    """``forgotten``: ids removed; ``skipped``: ids asked for but unknown or outside the reach.

    ``seqs`` are the signed ``memory_forgotten`` entries, ``redacted`` the
    seqs whose payloads they erased, ``scrubbed`` whether the scrub
    finished (if not, it is retried, and resumes at the next open).
    """

    forgotten: tuple[str, ...]
    skipped: tuple[str, ...]
    seqs: tuple[int, ...]
    redacted: tuple[int, ...]
    scrubbed: bool


class RebuildReport(msgspec.Struct, frozen=True, kw_only=True):
    """A rebuild: the state hash it reached and the incremental one it replaced."""

    state_hash: str
    previous_hash: str
    entries: int
    events: int
    skipped: int
    items: int
    seconds: float

    @property
    def matches(self) -> bool:
        """Whether the rebuilt projections hash as the ones they replaced."""
        return self.state_hash == self.previous_hash


class ProjectionCheck(msgspec.Struct, frozen=True, kw_only=True):
    """``verify --deep``: the projections rebuilt from the log into a scratch store,
    compared with the live ones (see :func:`memseal.engine.check_projections`)."""

    #: The state hash a rebuild from the log reaches (in the scratch store).
    expected: str
    #: The state hash of the live projection rows, recomputed from every row.
    found: str
    #: The running state hash the live projection keeps (``Engine.state_hash``).
    incremental: str
    entries: int
    items: int
    #: Where the live rows first differ from the rebuilt ones (None when they agree):
    #: the table, the item's seq and, when the item exists on either side, its id.
    table: str | None = None
    seq: int | None = None
    item: str | None = None
    #: That item's namespace as the log has it (None if the log has no such item).
    namespace: str | None = None
    seconds: float = 0.0

    @property
    def matches(self) -> bool:
        """Whether the rebuilt, recomputed and running state hashes agree, row for row."""
        return self.expected == self.found == self.incremental and self.table is None

    def line(self) -> str:
        """The check's outcome as one line for the CLI."""
        if self.matches:
            return f"projections: {self.items} items match a rebuild from the log ({self.expected})"
        if self.table is not None:
            what = f"item {self.item}" if self.item is not None else f"seq {self.seq}"
            if self.table == "engine_fts":
                return (
                    f"projections: {what} is not indexed as its text in engine_fts "
                    "(the full-text index: exact search would miss or misplace it); "
                    "memseal rebuild repairs it"
                )
            return f"projections: {what} differs from the log in {self.table}"
        return "projections: the projection's position or running hash differs from the log"
