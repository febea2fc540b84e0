"""``memseal.open``'s options as one object, built once and handed down.

:func:`memseal.open` keeps its documented keywords; it packs them into an
:class:`OpenOptions`, and ``_open`` and :class:`memseal.SyncMemory` take that
object, so a new option is added here and in ``open``'s signature, not at
every level in between.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from typing import Literal

import msgspec

from memseal.engine import ANN_MIN, Answerer, Embedder
from memseal.engine.currency import check_currency
from memseal.engine.embedders import check_embedder
from memseal.engine.recall import check_answerer
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.transparency import CheckpointPolicy

__all__ = ["Clock", "OpenOptions"]

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


# A Struct for its frozen, keyword-only shape and its equality; it is never encoded (the
# clock, embedder, answerer and progress are live objects), so nothing checks types on
# construction: check() does, when the open starts, as the keywords were checked before.
class OpenOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What ``memseal.open(path, ...)`` was asked besides ``path`` (see its docstring)."""

    store: str | None = None
    key_name: str | None = None
    create: bool = True
    clock: Clock = _utcnow
    origin: str | None = None
    checkpoint_every: int | None = 1000
    checkpoint_interval: float | None = 60.0
    embedder: Embedder | Literal["default"] | None = "default"
    zone: tzinfo = UTC
    answerer: Answerer | None = None
    progress: Callable[[int, int], None] | None = None
    ann: int | None = ANN_MIN
    ranks_as: str | None = None
    """A re-recording on SQLite of reads PostgreSQL ranked (not one of ``open``'s keywords)."""
    currency: bool = True

    def check(self) -> None:
        """Refuse a malformed option, naming it, before anything is opened or made."""
        origin = self.origin
        if origin is not None and (not isinstance(origin, str) or not origin.strip()):
            raise InvalidRequest("`origin` must be non-empty text")
        CheckpointPolicy(
            origin=origin or "memseal",
            every=self.checkpoint_every,
            interval=self.checkpoint_interval,
        )
        if not callable(self.clock):
            raise InvalidRequest("`clock` must be a callable returning an aware datetime")
        if self.progress is not None and not callable(self.progress):
            raise InvalidRequest("`progress` must be a callable taking (done, total) or None")
        ann = self.ann
        if ann is not None and (isinstance(ann, bool) or not isinstance(ann, int) or ann < 0):
            raise InvalidRequest("`ann` must be a count of memories (0 or more) or None")
        if self.key_name is not None and not isinstance(self.key_name, str):
            raise InvalidRequest("`key_name` must be text")
        check_currency(self.currency)
        if not isinstance(self.zone, tzinfo):
            raise InvalidRequest("`zone` must be a tzinfo (e.g. zoneinfo.ZoneInfo('Europe/Paris'))")
        check_embedder(self.embedder)
        check_answerer(self.answerer)
