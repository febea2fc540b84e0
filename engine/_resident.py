"""This process's copy of the vectors, and the forgets no read may undo.

Ranking reads only ``(seq, content)`` of the candidates from the database;
the vectors themselves are held in memory (:class:`Resident`), loaded the
first time a content is ranked and evicted when this process forgets it.
(Reading 1 KiB blobs row by row through the table's primary key cost ten
times the arithmetic.)

A read loads vectors from a snapshot, and a snapshot may be older than a
forget this process has just made: the forget drops the item's copy, then
the read, still seeing the item live, would put it back. :class:`Tombstones`
closes that window. A forget marks each item it removes with the seq of its
own ``memory_forgotten`` entry *before* dropping any copy; every load names
the size of the log its snapshot saw and is refused, under the same lock
the drop takes, for an item marked by an entry that snapshot did not hold.
Marks go once no read is in flight and a committed snapshot past them was
seen (any later read sees the forget, so the mark has nothing left to stop).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["Resident", "Tombstones", "pack", "unpack"]

_np: Any
try:  # numpy is optional: the default embedder brings it, the hashing one does not
    import numpy

    _np = numpy
except ImportError:  # pragma: no cover - exercised only where numpy is absent
    _np = None


def unpack(blob: bytes) -> array[float]:
    """The float32 values of a packed vector (little-endian float32 bytes)."""
    values = array("f")
    values.frombytes(blob)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI machine
        values.byteswap()
    return values


def pack(vector: Sequence[float]) -> bytes:
    """``vector`` as little-endian float32 bytes, the form ``engine_vectors`` keeps."""
    values = array("f", vector)
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI machine
        values.byteswap()
    return values.tobytes()


class Tombstones:
    """The items this process forgot, each with the seq of the entry that forgot it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at: dict[int, int] = {}
        self._reads = 0
        self._seen = -1

    def __len__(self) -> int:
        return len(self._at)

    def mark(self, seqs: Iterable[int], stamp: int) -> None:
        """Items ``seqs`` were forgotten by the entry at ``stamp`` (not yet committed)."""
        with self._lock:
            for seq in seqs:
                self._at[seq] = stamp

    def refused(self, seq: int, seen: int) -> bool:
        """Whether a snapshot of a log of ``seen`` entries predates item ``seq``'s forget."""
        stamp = self._at.get(seq)
        return stamp is not None and stamp >= seen

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Around a read that loads vectors: its snapshot, and every put or add after."""
        with self._lock:
            self._reads += 1
        try:
            yield
        finally:
            with self._lock:
                self._reads -= 1
                if not self._reads and self._at:
                    # A read starting now sees at least ``_seen`` entries: marks below go.
                    self._at = {s: at for s, at in self._at.items() if at >= self._seen}

    def saw(self, seen: int) -> None:
        """A snapshot of a log of ``seen`` entries was read (committed, so later ones see it)."""
        with self._lock:
            self._seen = max(self._seen, seen)


class Resident:
    """This process's copy of one embedder's vectors (thread-safe).

    Vectors are held once per content hash; items (by seq) point at them, so
    a ranking asks SQLite for candidate seqs only. With numpy the vectors are
    rows of one float32 matrix (freed rows are reused); without it, one
    ``array('f')`` each.
    """

    def __init__(self, dim: int, tombstones: Tombstones | None = None) -> None:
        self._dim = dim
        self._tombstones = tombstones if tombstones is not None else Tombstones()
        self._lock = threading.Lock()
        self._by_seq: dict[int, int] = {}
        self._by_content: dict[str, int] = {}
        self._free: list[int] = []
        self._rows: list[array[float]] = []
        self._matrix: Any = None if _np is None else _np.zeros((64, dim), dtype="<f4")
        self._used = 0

    def __len__(self) -> int:
        return len(self._by_seq)

    def unknown(self, seqs: Iterable[int]) -> list[int]:
        """The seqs this copy has no vector for."""
        with self._lock:
            return [seq for seq in seqs if seq not in self._by_seq]

    def put(self, items: Iterable[tuple[int, str, bytes]], seen: int | None = None) -> list[int]:
        """Hold the vector ``blob`` of content hash ``content`` for item ``seq``, read from a
        snapshot of a log of ``seen`` entries; returns the seqs refused because this
        process forgot them after that snapshot (None: a caller that read no snapshot)."""
        width = self._dim * 4
        refused: list[int] = []
        with self._lock:
            for seq, content, blob in items:
                if len(blob) != width:
                    continue
                if seen is not None and self._tombstones.refused(seq, seen):
                    refused.append(seq)
                    continue
                row = self._by_content.get(content)
                if row is None:
                    row = self._row_for(blob)
                    self._by_content[content] = row
                self._by_seq[seq] = row
        return refused

    def _row_for(self, blob: bytes) -> int:
        if self._free:
            row = self._free.pop()
        else:
            row = self._used
            self._used += 1
        if _np is None:
            if row == len(self._rows):
                self._rows.append(unpack(blob))
            else:
                self._rows[row] = unpack(blob)
        else:
            if row >= len(self._matrix):
                grown = _np.zeros((len(self._matrix) * 2, self._dim), dtype="<f4")
                grown[: len(self._matrix)] = self._matrix
                self._matrix = grown
            self._matrix[row] = _np.frombuffer(blob, dtype="<f4")
        return row

    def vectors(self, contents: Iterable[str]) -> dict[str, bytes]:
        """The packed vector (as ``engine_vectors`` keeps it) of each of ``contents`` held
        here; a content's vector is the one stored for it, bit for bit."""
        with self._lock:
            rows = {c: r for c in contents if (r := self._by_content.get(c)) is not None}
            if not rows:
                return {}
            if _np is not None:
                # One copy of the rows wanted, cut into vectors: the matrix is "<f4", the
                # stored form, and copying float32 into float32 leaves every bit as it was.
                block = self._matrix[list(rows.values())].tobytes()
                width = self._dim * 4
                return {c: block[k * width : (k + 1) * width] for k, c in enumerate(rows)}
            return {c: pack(self._rows[r]) for c, r in rows.items()}

    def drop(self, seqs: Iterable[int], contents: Iterable[str]) -> None:
        """Forget items ``seqs`` and the vectors of ``contents`` (no live item holds them)."""
        with self._lock:
            for seq in seqs:
                self._by_seq.pop(seq, None)
            for content in contents:
                row = self._by_content.pop(content, None)
                if row is not None:
                    self._free.append(row)
                    if _np is not None:
                        self._matrix[row] = 0  # no copy of a forgotten text's vector lingers
                    else:
                        self._rows[row] = array("f", bytes(self._dim * 4))

    def wipe(self) -> None:
        """Zero every vector held (this copy is being replaced: no stale copy lingers)."""
        with self._lock:
            self._by_seq.clear()
            self._by_content.clear()
            self._free.clear()
            self._rows.clear()
            self._used = 0
            if _np is not None:
                self._matrix[:] = 0

    def rank(
        self,
        seqs: Sequence[int],
        target: bytes,
        cap: int,
        loose: Sequence[tuple[int, bytes]] = (),
    ) -> list[tuple[int, float]]:
        """(seq, cosine with ``target``) best first, ties to the newer seq, at most ``cap``;
        items with no vector here are left out, but ``loose`` (seq, vector) pairs are
        scored though not held. Scores are rounded to four places, so that last-bit
        differences between machines never reorder."""
        with self._lock:
            rows = [self._by_seq.get(seq, -1) for seq in seqs]
            if _np is not None:
                return self._rank_numpy(seqs, rows, target, cap, loose)
            q = unpack(target)
            scored = [
                (seq, round(sum(a * b for a, b in zip(self._rows[r], q, strict=True)), 4))
                for seq, r in zip(seqs, rows, strict=True)
                if r >= 0
            ]
        scored.extend(
            (seq, round(sum(a * b for a, b in zip(unpack(blob), q, strict=True)), 4))
            for seq, blob in loose
        )
        scored.sort(key=lambda p: (-p[1], -p[0]))
        return scored[:cap]

    def _rank_numpy(
        self,
        seqs: Sequence[int],
        rows: Sequence[int],
        target: bytes,
        cap: int,
        loose: Sequence[tuple[int, bytes]],
    ) -> list[tuple[int, float]]:
        np = _np
        where = np.asarray(rows, dtype=np.int64)
        keep = where >= 0
        where, ids = where[keep], np.asarray(seqs, dtype=np.int64)[keep]
        query = np.frombuffer(target, dtype="<f4")
        # einsum, not BLAS: one fixed summation order whatever the thread count, so the
        # same inputs give the same bits run after run.
        if not len(where):
            values = np.zeros(0, dtype="<f4")
        elif len(where) * 4 > self._used:
            # Most rows are wanted: one pass over the whole matrix, then pick.
            values = np.einsum("ij,j->i", self._matrix[: self._used], query)[where]
        else:
            values = np.einsum("ij,j->i", self._matrix[where], query)
        if loose:
            extra = np.frombuffer(b"".join(blob for _, blob in loose), dtype="<f4")
            extra = np.einsum("ij,j->i", extra.reshape(len(loose), self._dim), query)
            values = np.concatenate([values, extra])
            ids = np.concatenate([ids, np.asarray([s for s, _ in loose], dtype=np.int64)])
        if not len(ids):
            return []
        values = np.round(values.astype(np.float64), 4)
        order = np.lexsort((-ids, -values))[:cap]  # by score, then newest first
        return list(zip(ids[order].tolist(), values[order].tolist(), strict=True))
