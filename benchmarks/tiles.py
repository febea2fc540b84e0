"""The log as C2SP tlog-tiles: stored reads per tile, export and read-back throughput.

Run: ``.venv/bin/python benchmarks/tiles.py [--entries 100000] [--store URL]``

* Stored reads per tile: how many store calls (the log's size, then tree reads or entry
  range reads) serving one full hash tile, one full entry bundle and one partial tile
  costs as the /tlog route serves it, counted at the store port, with the median time of
  each. The target is O(1): a full tile is one
  read of its 256 stored hashes whatever the log's size.
* Export: ``memseal tiles`` from scratch over a log of ``--entries`` entries (tiles
  per second, and the time for 10^6 entries: measured when ``--entries 1000000``,
  else extrapolated linearly from the measured rate and printed as an extrapolation;
  the work per entry is constant). Then an incremental export after 1% more entries.
* Read back: ``verify --tiles`` over the exported folder (every signature, the chain,
  every hash tile), entries per second.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import memseal
from memseal.ledger.errors import NotFound
from memseal.ledger.note import parse_vkey
from memseal.ledger.store import Record
from memseal.ledger.tiles import TileRef
from memseal.ledger.tiles_store import export_tiles, read_tile
from memseal.ledger.tiles_verify import verify_tiles


class Counting:
    """The store port, counting the calls a tile read makes."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.calls = 0
        self.rows = 0

    async def head(self) -> Any:
        self.calls += 1
        return await self.store.head()

    async def tree_read(self, work: Callable[[Callable[[Sequence[int]], list[bytes]]], Any]) -> Any:
        def counted(read: Callable[[Sequence[int]], list[bytes]]) -> Any:
            def once(indexes: Sequence[int]) -> list[bytes]:
                self.calls += 1
                self.rows += len(indexes)
                return read(indexes)

            return work(once)

        return await self.store.tree_read(counted)

    async def scan_chunks(
        self, start: int = 0, stop: int | None = None, size: int = 1024
    ) -> AsyncIterator[list[Record]]:
        async for chunk in self.store.scan_chunks(start, stop, size):
            self.calls += 1
            self.rows += len(chunk)
            yield chunk


async def grow(memory: memseal.Memory, count: int) -> float:
    start = time.perf_counter()
    for first in range(0, count, 500):
        await asyncio.gather(
            *(
                memory.ledger.append("note", {"i": i}, {"text": f"tile bench {i}"})
                for i in range(first, min(count, first + 500))
            )
        )
    return time.perf_counter() - start


async def per_tile(memory: memseal.Memory, size: int) -> None:
    counting = Counting(memory.ledger.store)
    full_tiles = size // 256
    cases = [
        ("full hash tile, level 0", TileRef(kind="hashes", index=full_tiles // 2)),
        ("full hash tile, level 1", TileRef(kind="hashes", index=0, level=1)),
        ("full entry bundle", TileRef(kind="entries", index=full_tiles // 2)),
        ("full signature bundle", TileRef(kind="signatures", index=full_tiles // 2)),
        ("partial hash tile", TileRef(kind="hashes", index=full_tiles, width=max(1, size % 256))),
    ]
    print(f"stored reads per tile (log of {size:,} entries):")
    for label, ref in cases:
        try:
            counting.calls = counting.rows = 0
            # What the /tlog route does: the log's size (one read), then the tile.
            bound = (await counting.head()).size
            await read_tile(counting, ref, bound)  # type: ignore[arg-type]
        except NotFound:
            continue
        calls, rows = counting.calls, counting.rows  # rows: hashes or entries, not the head's
        times = []
        for _ in range(50):
            start = time.perf_counter()
            await read_tile(memory.ledger.store, ref, size)
            times.append(time.perf_counter() - start)
        print(
            f"  {label:<26} {calls} store read(s), {rows} rows, "
            f"median {statistics.median(times) * 1000:.2f} ms"
        )


async def main(entries: int, store: str | None) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder, out = Path(scratch) / "d", Path(scratch) / "tiles"
        async with memseal.open(
            folder, store=store, embedder=None, checkpoint_interval=None, checkpoint_every=None
        ) as memory:
            took = await grow(memory, entries)
            print(f"made a log of {entries:,} entries in {took:.1f} s")
            note = await memory.ledger.checkpoint()
            size = await memory.ledger.size()
            await per_tile(memory, size)

            start = time.perf_counter()
            files = await export_tiles(memory.ledger.store, note, out)
            took = time.perf_counter() - start
            rate = size / took
            print(
                f"export: {files:,} files for {size:,} entries in {took:.2f} s "
                f"({rate:,.0f} entries/s, {files / took:,.0f} files/s)"
            )
            if size >= 1_000_000:
                print(f"export of 10^6 entries: {took * 1_000_000 / size:.1f} s (measured)")
            else:
                print(
                    f"export of 10^6 entries: about {1_000_000 / rate:.0f} s "
                    f"(EXTRAPOLATED linearly from {size:,} entries, not measured)"
                )
            await grow(memory, max(1, size // 100))
            note = await memory.ledger.checkpoint()
            start = time.perf_counter()
            files = await export_tiles(memory.ledger.store, note, out)
            took = time.perf_counter() - start
            print(f"incremental export after 1% more: {files} files in {took:.2f} s")
            trust = parse_vkey(memory.trust_root)

        def fetch(path: str) -> bytes:
            try:
                return (out / path).read_bytes()
            except FileNotFoundError as exc:
                raise NotFound(path) from exc

        start = time.perf_counter()
        done = verify_tiles(fetch, [trust])
        took = time.perf_counter() - start
        print(
            f"verify --tiles: {done.summary.size:,} entries, {done.tiles:,} hash tiles in "
            f"{took:.2f} s ({done.summary.size / took:,.0f} entries/s)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--store", default=None, help="a PostgreSQL URL (default: SQLite)")
    options = parser.parse_args()
    asyncio.run(main(options.entries, options.store))
