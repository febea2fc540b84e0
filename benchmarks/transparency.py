"""The cost of the Merkle tree: append throughput with it, and proof times as the log grows.

Run: ``.venv/bin/python benchmarks/transparency.py [--appends N] [--sizes 10000,100000,1000000]``

* Appends/s with the tree maintained in the append transaction, next to the
  same ledger with tree maintenance switched off, in the same run (target:
  ratio >= 0.8), with 1 and with 32 concurrent writers.
* Inclusion and consistency proof times (median of many) at each size. The
  big logs are made quickly: entries are appended through the real store
  once, then the tree table is extended to the target size with the same
  stored-hash code (the proofs read only the tree table), so a 10^6 log
  takes seconds, not minutes. Proof time must grow like log n.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import memseal
from memseal.ledger import sqlite as ledger_sqlite
from memseal.ledger.merkle import MemoryHashStore


async def appends(folder: Path, n: int, writers: int, tree: bool = True) -> float:
    # With the tree, checkpoints are cut as configured by default (every 1000 entries).
    every = 1000 if tree else None
    async with memseal.open(folder, checkpoint_interval=None, checkpoint_every=every) as memory:
        per = n // writers

        async def writer(w: int) -> None:
            for i in range(per):
                await memory.ledger.append("note", {"w": w, "i": i}, {"text": f"memory {i}"})

        start = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(writers)))
        return per * writers / (time.perf_counter() - start)


def without_tree() -> object:
    original = ledger_sqlite.SqliteTxn._grow_tree
    ledger_sqlite.SqliteTxn._grow_tree = lambda self, seq, digest: None  # type: ignore[method-assign]
    return original


def big_tree(folder: Path, size: int) -> None:
    """Make a data folder whose tree table holds ``size`` leaves."""
    asyncio.run(_seed(folder))
    tree = MemoryHashStore()
    for i in range(size):
        tree.append_leaf_hash(hashlib.sha256(i.to_bytes(8, "big")).digest())
    with sqlite3.connect(folder / "ledger.db") as conn:
        conn.execute("DELETE FROM tree")
        conn.executemany("INSERT INTO tree (idx, hash) VALUES (?, ?)", enumerate(tree.hashes))
        # The facade checks sizes against the head: extend entries with placeholder rows.
        conn.executemany(
            "INSERT OR IGNORE INTO entries (seq, leaf, hash, sig) VALUES (?, x'', x'', x'')",
            ((i,) for i in range(size)),
        )


async def _seed(folder: Path) -> None:
    async with memseal.open(folder, checkpoint_interval=None) as memory:
        await memory.ledger.append("note", {"seed": True})


async def proof_times(folder: Path, size: int, rounds: int) -> tuple[float, float]:
    rng = random.Random(size)
    async with memseal.open(folder, checkpoint_interval=None, checkpoint_every=None) as memory:
        inc, con = [], []
        for _ in range(rounds):
            seq = rng.randrange(size)
            t = time.perf_counter()
            await memory.ledger.inclusion_proof(seq, size)
            inc.append(time.perf_counter() - t)
            old = rng.randrange(1, size + 1)
            t = time.perf_counter()
            await memory.ledger.consistency_proof(old, size)
            con.append(time.perf_counter() - t)
        return statistics.median(inc) * 1000, statistics.median(con) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=3000)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rates = {}
        for writers in (1, 32):
            n = args.appends // (5 if writers == 1 else 1)
            with_tree = asyncio.run(appends(root / f"tree{writers}", n, writers))
            original = without_tree()
            try:
                plain = asyncio.run(appends(root / f"plain{writers}", n, writers, tree=False))
            finally:
                ledger_sqlite.SqliteTxn._grow_tree = original  # type: ignore[method-assign]
            rates[writers] = (with_tree, plain)
        proofs = []
        for size in sizes:
            folder = root / f"big{size}"
            big_tree(folder, size)
            proofs.append((size, *asyncio.run(proof_times(folder, size, args.rounds))))
    for writers, (with_tree, plain) in rates.items():
        print(
            f"{writers:2d} writer(s): with tree {with_tree:8,.0f}/s, plain {plain:8,.0f}/s, "
            f"ratio {with_tree / plain:4.2f} (target >= 0.80)"
        )
    print("proof times (median), ms:")
    for size, inc, con in proofs:
        print(f"  n = {size:>9,}: inclusion {inc:6.3f}  consistency {con:6.3f}")
    if len(proofs) > 1:
        first, last = proofs[0], proofs[-1]
        log_growth = _log_ratio(first[0], last[0])
        print(
            f"  growth {first[0]:,} -> {last[0]:,} entries: inclusion x{last[1] / first[1]:.2f}, "
            f"consistency x{last[2] / first[2]:.2f} (log n grows x{log_growth:.2f})"
        )


def _log_ratio(a: int, b: int) -> float:
    import math

    return math.log2(b) / math.log2(a)


if __name__ == "__main__":
    main()
