"""An approximate nearest-neighbour index over the resident vectors (HNSW, usearch).

The exact semantic ranking (:meth:`._resident.Resident.rank`) scores every
candidate, so its cost grows with the number of memories. Past
:data:`ANN_MIN` live vectors the engine asks an HNSW graph instead
(`usearch <https://github.com/unum-cloud/usearch>`_: Apache-2.0, wheels for
every platform, numpy in and out, deletes and concurrent adds; sqlite-vec's
``vec0`` is still a brute-force scan and faiss's wheel is ten times the size).

What the index may and may not decide:

* It is a projection of a projection: built in memory from ``engine_vectors``
  (itself derived from the log), never written to disk, so a forgotten text's
  vector is erased from disk exactly as before, and from this index when this
  process forgets it.
* It only proposes candidates. Every proposed seq is checked against the
  query's own SQL condition (reach, trust floor, filter, cursor snapshot), so
  an item out of reach, below the floor, superseded or forgotten by another
  process never takes a place; the survivors are re-scored exactly
  (:meth:`._resident.Resident.rank`) and ordered as the exact ranking orders them.
* When too few proposals survive (a narrow scope among many memories), it
  gives up and the exact scan ranks the candidates, which are then few.
* Items the index has not seen yet are caught up from ``engine_items`` by seq
  whenever a search's snapshot holds any (and the search runs again); one
  without a vector, or one this process forgot after the catch-up's snapshot
  was taken (see ``_resident``), sends the ranking down the exact
  path (which embeds it), so an approximate answer never silently misses a
  new memory for want of its vector.

Only recall is approximate: what comes back is always a true, in-scope,
exactly scored item, never a stale or unreachable one. Re-derivation of a
recorded read (``memseal replay --against``) opens its engine with
``ann=False``: the exact scan, so it does not depend on graph construction.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from memseal.ledger.store import Execute

__all__ = ["ANN_MIN", "AnnIndex", "ann_available", "search_breadth"]

#: Below this many vectors the exact scan is a few milliseconds: no index.
ANN_MIN: Final = 20_000
_CHUNK: Final = 500
#: The graph's shape: 16 links per node, breadth 128 while adding, at least 128 searching.
_CONNECTIVITY: Final = 16
_EXPANSION_ADD: Final = 128
_EXPANSION_SEARCH: Final = 128
#: A search's breadth grows with the graph: one more 128 per this many live vectors, up
#: to :data:`_EXPANSION_CEILING`. At a fixed breadth, recall falls as the graph grows:
#: usearch alone (connectivity 16, 384 dimensions, 1,000 clusters, recall@10 of the
#: rescored top 10) gives 0.995 at 10^5 but 0.80 at 10^6 with breadth 128, and 0.992
#: at 10^6 with 1,024 (3.7 ms p95); real MiniLM vectors of short texts are harder
#: (0.896 at 10^5 with breadth 128, through memseal), hence a step of 25,000.
_EXPANSION_STEP: Final = 25_000
_EXPANSION_CEILING: Final = 1_024
#: A search asks for this many times the wanted count first (the scope filter discards
#: some; most survive an unscoped read, and a proposal costs its share of the search) ...
_FIRST: Final = 2
#: ... then this many times more each round while too few survive ...
_OVERFETCH: Final = 4
#: ... and gives up for the exact scan once it would ask for more than this.
_MAX_PROPOSALS: Final = 8_192

_usearch: Any
_np: Any
try:
    import numpy

    # onnxruntime (the default embedder's runtime) loaded first: usearch 2.26.2 and later
    # crash the process when imported before it (the dependency pin keeps below those).
    with contextlib.suppress(ImportError):
        importlib.import_module("onnxruntime")
    from usearch.index import Index as _UsearchIndex

    _usearch, _np = _UsearchIndex, numpy
except ImportError:  # pragma: no cover - both are dependencies; a broken install ranks exactly
    _usearch = _np = None


def ann_available() -> bool:
    """Whether the HNSW library is importable (it is a dependency; this is for safety)."""
    return _usearch is not None


class AnnIndex:
    """One embedder's HNSW graph, keyed by item seq (thread-safe)."""

    def __init__(self, dim: int, *, minimum: int = ANN_MIN) -> None:
        if _usearch is None:  # pragma: no cover
            raise RuntimeError("usearch is not installed")
        self._dim = dim
        self.minimum = minimum
        self._lock = threading.Lock()
        self._index = _usearch(
            ndim=dim,
            metric="ip",
            dtype="f32",
            connectivity=_CONNECTIVITY,
            expansion_add=_EXPANSION_ADD,
            expansion_search=_EXPANSION_SEARCH,
        )
        self._live: set[int] = set()
        #: Every item with a seq at or below this has been offered to the index.
        self.high = -1

    def __len__(self) -> int:
        return len(self._live)

    @property
    def memory(self) -> int:
        """Bytes the graph and its vectors take in memory (the index is never on disk)."""
        with self._lock:
            return int(self._index.memory_usage)

    @property
    def active(self) -> bool:
        """Whether searches go through the graph (enough vectors to be worth it)."""
        return len(self._live) >= self.minimum

    def catch_up(
        self, execute: Execute, embedder: str, limit: int | None = None
    ) -> tuple[list[tuple[int, str, bytes]], list[str]]:
        """The items newer than :attr:`high` that have a vector, in seq order, up to the
        first that has none; and the contents of every new item that has none (which the
        caller embeds before the index may answer).

        The rows are for the caller to add (with :meth:`add`) once they are resident;
        the high-water mark moves only then, and never past an item without a vector.
        """
        rows = execute(
            "SELECT i.seq, i.content, v.vec FROM engine_items i LEFT JOIN engine_vectors v "
            "ON v.embedder = ? AND v.content = i.content WHERE i.seq > ? ORDER BY i.seq"
            + ("" if limit is None else f" LIMIT {int(limit)}"),
            (embedder, self.high),
        )
        width = self._dim * 4
        found: list[tuple[int, str, bytes]] = []
        absent: list[str] = []
        for seq, content, blob in rows:
            if not blob or len(blob) != width:
                absent.append(str(content))
            elif not absent:
                found.append((int(seq), str(content), bytes(blob)))
        return found, absent

    def add(
        self,
        seqs: Sequence[int],
        matrix: Any,
        high: int,
        refused: Callable[[int], bool] | None = None,
    ) -> list[int]:
        """Add the vectors (rows of ``matrix``) of items ``seqs`` (in seq order); all up to
        ``high`` seen. Returns ``[seq]`` of the item it stopped at, or ``[]``.

        ``refused(seq)`` is asked under the index's lock, the lock :meth:`remove` takes:
        the add stops at an item this process forgot since its row was read, and the
        high-water mark stays below it (see ``_resident``).
        """
        np = _np
        with self._lock:
            fresh: list[int] = []
            stop: int | None = None
            for i, seq in enumerate(seqs):
                if refused is not None and refused(seq):
                    stop = seq
                    break
                if seq not in self._live:
                    fresh.append(i)
            if fresh:
                keys = np.asarray([seqs[i] for i in fresh], dtype=np.uint64)
                # A build's big batches use every core (usearch's 0); a catch-up's few, one.
                self._index.add(keys, matrix[fresh], threads=0 if len(fresh) > 1_000 else 1)
                self._live.update(int(k) for k in keys)
            self.high = max(self.high, high if stop is None else stop - 1)
            return [] if stop is None else [stop]

    def remove(self, seqs: Iterable[int]) -> None:
        """Take items out (this process forgot them)."""
        with self._lock:
            gone = [seq for seq in seqs if seq in self._live]
            if gone:
                self._index.remove(_np.asarray(gone, dtype=_np.uint64))
                self._live.difference_update(gone)

    def propose(self, query: Any, count: int) -> list[int]:
        """Up to ``count`` seqs the graph finds nearest to ``query`` (unit float32)."""
        with self._lock:
            size = len(self._live)
            if not size:
                return []
            breadth = search_breadth(size)
            if self._index.expansion_search != breadth:
                self._index.expansion_search = breadth
            found = self._index.search(query, min(count, size), threads=1)
            return [int(k) for k in found.keys.tolist()]

    def proposals(self, want: int) -> Iterable[int]:
        """The growing proposal counts to try for ``want`` results, within the cap."""
        count = max(want * _FIRST, _EXPANSION_SEARCH)
        while count <= _MAX_PROPOSALS:
            yield count
            if count >= len(self._live):
                return
            count *= _OVERFETCH


def search_breadth(size: int) -> int:
    """The HNSW search breadth (``ef``) for a graph of ``size`` live vectors."""
    steps = -(-size // _EXPANSION_STEP)  # ceiling: 1 up to 25,000, 4 at 10^5
    return max(_EXPANSION_SEARCH, min(_EXPANSION_CEILING, _EXPANSION_SEARCH * steps))


def in_scope(execute: Execute, seqs: Sequence[int], where: str, params: Sequence[Any]) -> set[int]:
    """Which of ``seqs`` are live items under the query's condition ``where``."""
    passed: set[int] = set()
    for start in range(0, len(seqs), _CHUNK):
        part = list(seqs[start : start + _CHUNK])
        passed.update(
            int(row[0])
            for row in execute(
                f"SELECT i.seq FROM engine_items i WHERE i.seq IN ({','.join('?' * len(part))}) "
                f"AND ({where})",
                [*part, *params],
            )
        )
    return passed
