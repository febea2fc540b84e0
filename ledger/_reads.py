"""The reads both log stores share: seq checks, one record, a scan in chunks,
and the plain queries of verification (tree ranges, checkpoints, stray rows,
redactions, mentions).

An adapter supplies :meth:`RecordReads._fetch` (records ``start <= seq <
stop`` in order, at most ``limit``, payloads joined) and
:meth:`RecordReads._select` (one query written with ``?`` placeholders) in
its dialect; a scan fetches :data:`SCAN_CHUNK` records at a time, so a long
log is never held in memory at once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .errors import InvalidRequest, NotFound
from .merkle import stored_hash_count
from .store import Record, StoredCheckpoint

__all__ = ["MAX_SEQ", "SCAN_CHUNK", "RecordReads", "check_seq"]

MAX_SEQ = 2**63 - 1
SCAN_CHUNK = 1024


def check_seq(value: object, name: str) -> None:
    """Refuse, as :class:`InvalidRequest` naming ``name``, a seq that is not an int in range.

    A bool is refused too, and the bound keeps every seq (and seq + 1) a
    signed 64-bit integer, so no driver overflows on it.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_SEQ:
        raise InvalidRequest(f"`{name}` must be an integer from 0 to 2**63-2, not {value!r:.40}")


class RecordReads(ABC):
    """The store's reads over the adapter's :meth:`_fetch` and :meth:`_select`."""

    @abstractmethod
    async def _fetch(self, start: int, stop: int, limit: int) -> list[Record]:
        """Records ``start <= seq < stop`` in order, at most ``limit`` of them."""

    @abstractmethod
    async def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read-only query written with ``?`` placeholders."""

    async def read(self, seq: int) -> Record:
        """One record; :class:`NotFound` when ``seq`` is not in the log."""
        check_seq(seq, "seq")
        records = await self._fetch(seq, seq + 1, 1)
        if not records:
            raise NotFound(f"no entry at seq {seq}")
        return records[0]

    async def scan(self, start: int = 0, stop: int | None = None) -> AsyncIterator[Record]:
        """Records ``start <= seq < stop`` (to the end when ``stop`` is None) in order,
        fetched :data:`SCAN_CHUNK` at a time."""
        async for chunk in self.scan_chunks(start, stop):
            for record in chunk:
                yield record

    async def scan_chunks(
        self, start: int = 0, stop: int | None = None, size: int = SCAN_CHUNK
    ) -> AsyncIterator[list[Record]]:
        """The records of :meth:`scan`, a list of up to ``size`` at a time (verify takes
        them whole: one step of the event loop a chunk, not one a record)."""
        check_seq(start, "start")
        if stop is not None:
            check_seq(stop, "stop")
        end = MAX_SEQ if stop is None else stop
        position = start
        while position < end:
            chunk = await self._fetch(position, end, size)
            if not chunk:
                return
            yield chunk
            position = chunk[-1].seq + 1

    async def tree_range(self, start: int, stop: int) -> list[bytes]:
        """Stored tree hashes ``start <= idx < stop`` in order (verification)."""
        rows = await self._select(
            "SELECT idx, hash FROM tree WHERE idx >= ? AND idx < ? ORDER BY idx", (start, stop)
        )
        return [r[1] for r in rows]

    async def checkpoints(self) -> list[StoredCheckpoint]:
        """Every stored checkpoint, smallest size first (verification)."""
        rows = await self._select("SELECT size, root, note, at FROM checkpoints ORDER BY size")
        return [StoredCheckpoint(size=r[0], root=r[1], note=r[2], at=r[3]) for r in rows]

    async def stray_rows(self, size: int) -> list[tuple[str, int]]:
        """Rows outside the log of ``size`` entries: payloads, tree hashes or mentions
        with no entry (planted rows that would also block a later append)."""
        rows = await self._select(
            "SELECT 'payload', seq FROM payloads WHERE seq < 0 OR seq >= ? "
            "UNION ALL SELECT 'mention', seq FROM mentions WHERE seq < 0 OR seq >= ? "
            "UNION ALL SELECT 'entry', seq FROM entries WHERE seq < 0 "
            "UNION ALL SELECT 'tree hash', idx FROM tree WHERE idx < 0 OR idx >= ? "
            "LIMIT 5",
            (size, size, stored_hash_count(size)),
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    async def redacted_by(self, seq: int) -> int | None:
        """The seq of the signed entry that erased ``seq``'s payload, if one did."""
        rows = await self._select("SELECT by_seq FROM redactions WHERE seq = ?", (seq,))
        return None if not rows else int(rows[0][0])

    async def mentioning(self, ref: str) -> list[int]:
        """Seqs whose payload mentions ``ref``, in order (filled by the layers above)."""
        rows = await self._select("SELECT seq FROM mentions WHERE ref = ? ORDER BY seq", (ref,))
        return [r[0] for r in rows]
