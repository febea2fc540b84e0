"""The read rows of ``benchmarks/bench.py``: inclusion proofs on a big log, exact fetch at scale.

Imported by ``bench.py`` (run that); each row keeps its own data folder so the write rows'
folder and figures stay as they were.

* **inclusion proof**: ``Ledger.inclusion_proof(seq)`` (leaf hash, root and audit path,
  one read transaction) on a log of ``--proof-size`` entries (10^6 by default), timed
  per proof, with the stored hashes it reads counted through the store's own reader.
  The baseline is one bare ``SELECT hash FROM tree WHERE idx IN (...)`` of the same
  indexes on a plain connection to the same file. The big log is made fast: one entry
  is appended through the real store, then the ``tree`` table is filled with the stored
  hashes of ``size`` synthetic leaves by the same stored-hash code the ledger uses
  (:class:`~memseal.ledger.merkle.MemoryHashStore`) in one bulk insert, and the
  ``entries`` table gets placeholder rows so the head says ``size`` (a proof reads the
  head and the tree table only, never an entry).
* **exact fetch at scale**: the ``memory_fetch`` tool (mode exact, limit 10, unrecorded)
  over ``--fetch-memories`` memories (10^5 by default) stored with ``store_many``,
  p95 of one call at a time, against the bare FTS5 query (``MATCH`` of the same
  words, ``ORDER BY rank LIMIT 10``) on the same ``engine_fts`` table of the same
  file, through a plain read-only connection, the two alternating question by question.
"""

from __future__ import annotations

import hashlib
import math
import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import memseal
from memseal.engine import Learning, NewItem
from memseal.engine._ranking import fts_query
from memseal.ledger.merkle import (
    MemoryHashStore,
    inclusion_proof,
    stored_hash_count,
    tree_hash,
)
from memseal.tools import MemoryTools, ToolScope

Reader = Callable[[Sequence[int]], list[bytes]]


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(len(ordered) * 0.95) - 1)]


# -- inclusion proofs -----------------------------------------------------------------------


class ProofBench:
    """A log of ``size`` entries whose tree table was filled in bulk (see the docstring)."""

    def __init__(self, folder: Path, size: int) -> None:
        self.folder, self.size = folder, size
        self.rng = random.Random(size)
        self.build_s = 0.0

    async def build(self) -> None:
        start = time.perf_counter()
        async with memseal.open(self.folder, embedder=None, checkpoint_interval=None) as memory:
            await memory.ledger.append("note", {"seed": True})
        tree = MemoryHashStore()
        for i in range(self.size):
            tree.append_leaf_hash(hashlib.sha256(i.to_bytes(8, "big")).digest())
        with sqlite3.connect(self.folder / "ledger.db") as conn:
            conn.execute("DELETE FROM tree")
            conn.executemany("INSERT INTO tree (idx, hash) VALUES (?, ?)", enumerate(tree.hashes))
            conn.executemany(
                "INSERT OR IGNORE INTO entries (seq, leaf, hash, sig) VALUES (?, x'', x'', x'')",
                ((i,) for i in range(self.size)),
            )
        self.build_s = time.perf_counter() - start

    async def round(self, asked: int) -> dict[str, float]:
        """Medians over ``asked`` random seqs: proof ms, hashes read, read calls, bare ms."""
        async with memseal.open(
            self.folder, embedder=None, checkpoint_interval=None, checkpoint_every=None
        ) as memory:
            store = memory.ledger.store
            counts: list[tuple[int, int]] = []
            real = store.tree_read

            async def counted(work: Callable[[Reader], Any]) -> Any:
                # The store's own reader, wrapped to count what one proof asks of it.
                def tally(read: Reader) -> Any:
                    hashes = calls = 0

                    def reading(indexes: Sequence[int]) -> list[bytes]:
                        nonlocal hashes, calls
                        hashes, calls = hashes + len(indexes), calls + 1
                        return read(indexes)

                    out = work(reading)
                    counts.append((hashes, calls))
                    return out

                return await real(tally)

            store.tree_read = counted  # type: ignore[method-assign]
            seqs = [self.rng.randrange(self.size) for _ in range(asked)]
            timed = []
            for seq in seqs:
                began = time.perf_counter()
                proof = await memory.ledger.inclusion_proof(seq, self.size)
                timed.append((time.perf_counter() - began) * 1000)
                assert len(proof.hashes) <= math.ceil(math.log2(self.size))
        bare = self._bare(seqs)
        return {
            "proof_ms": statistics.median(timed),
            "proof_p95_ms": p95(timed),
            "proof_hashes": statistics.median(h for h, _ in counts),
            "proof_reads": statistics.median(c for _, c in counts),
            "proof_bare_ms": statistics.median(bare),
        }

    def _bare(self, seqs: list[int]) -> list[float]:
        # The same indexes the proof reads, in one statement on a plain connection.
        wanted: list[list[int]] = []
        for seq in seqs:
            plan: list[int] = []

            def note(indexes: Sequence[int], plan: list[int] = plan) -> list[bytes]:
                plan.extend(indexes)
                return [b"\x00" * 32] * len(indexes)

            # What Ledger.inclusion_proof reads: the leaf hash, the root, the audit path.
            note([stored_hash_count(seq)])
            tree_hash(self.size, note)
            inclusion_proof(seq, self.size, note)
            wanted.append(plan)
        samples = []
        with sqlite3.connect(f"file:{self.folder / 'ledger.db'}?mode=ro", uri=True) as conn:
            for plan in wanted:
                plan = sorted(set(plan))
                marks = ",".join("?" * len(plan))
                began = time.perf_counter()
                conn.execute(f"SELECT hash FROM tree WHERE idx IN ({marks})", plan).fetchall()
                samples.append((time.perf_counter() - began) * 1000)
        return samples


# -- exact fetch at scale -------------------------------------------------------------------


class FetchBench:
    """``memory_fetch`` exact over many memories, beside a bare FTS5 query of its table."""

    def __init__(self, folder: Path, texts: list[str], place: str) -> None:
        self.folder, self.texts, self.place = folder, texts, place
        self.fill_s = 0.0

    async def build(self) -> None:
        start = time.perf_counter()
        async with memseal.open(self.folder, embedder=None, checkpoint_interval=None) as memory:
            for base in range(0, len(self.texts), 1_000):
                await memory.engine.store_many(
                    [
                        NewItem(content=Learning(text=t), namespace=self.place)
                        for t in self.texts[base : base + 1_000]
                    ]
                )
        self.fill_s = time.perf_counter() - start

    async def round(self, questions: list[str]) -> dict[str, float]:
        """p95 and p50 ms of the tool's exact fetch and of the bare query, same questions.

        The two alternate question by question, so a neighbour's load falls on both.
        """
        async with memseal.open(self.folder, embedder=None, checkpoint_interval=None) as memory:
            tools = MemoryTools(memory.engine, ToolScope.placed_at(self.place))
            await tools.call("memory_fetch", {"query": questions[0], "mode": "exact"})  # warm
            ours, bare = [], []
            with sqlite3.connect(f"file:{self.folder / 'ledger.db'}?mode=ro", uri=True) as conn:
                for q in questions:
                    began = time.perf_counter()
                    await tools.call("memory_fetch", {"query": q, "mode": "exact"})
                    ours.append((time.perf_counter() - began) * 1000)
                    began = time.perf_counter()
                    conn.execute(
                        "SELECT rowid FROM engine_fts WHERE engine_fts MATCH ? "
                        "ORDER BY rank LIMIT 10",
                        (fts_query(q),),
                    ).fetchall()
                    bare.append((time.perf_counter() - began) * 1000)
        return {
            "fetch_scale_p95": p95(ours),
            "fetch_scale_p50": statistics.median(ours),
            "bare_fts_p95": p95(bare),
            "bare_fts_p50": statistics.median(bare),
        }
