"""The memory as of a point: what a cold (at N and at N/2) and a warm as-of read cost.

Run: ``.venv/bin/python benchmarks/as_of.py [--entries N] [--reads R]`` (default 5,000
entries; the issue's figure is ``--entries 100000``).

On real files in a temporary folder, ``--entries`` log entries are written: learnings
stored with ``engine.store_many`` at one place (exact search, no embedder), one in 50
then promoted and one in 100 forgotten (a signed entry each), so the log holds every
engine kind. Then, against the live exact ``memory_fetch`` (limit 10) of the same
queries, measured in the same run:

(a) **cold**: ``memory.as_of(size=N)`` and its first read, with no view cached: the
    live projection's rows below ``N`` read on one snapshot, written into a temporary
    store, its full-text index built (docs/history.md);
(b) **cold at N/2**: the same for a point halfway back (half the rows; the trust of
    the items changed since is set back);
(c) **warm**: reads of a cached view (p50 over ``--reads`` queries): the live read's
    cost plus the look at the forget watermark.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import memseal
from memseal.engine import Learning, NewItem
from memseal.tools import MemoryTools, ToolScope

PLACE = "team:bench/agent:reader"
SCOPE = ToolScope.placed_at(PLACE)
_SYLLABLES = ["ka", "lo", "mi", "ru", "ten", "sa", "vo", "ne", "pi", "dra", "ul", "shi", "bo"]


def _vocabulary(rng: random.Random, size: int = 3_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


async def _fill(memory: memseal.Memory, entries: int) -> None:
    rng = random.Random(5)
    vocab = _vocabulary(rng)
    stores = max(1, int(entries / 1.03))  # plus 1/50 promotions and 1/100 forgets
    ids: list[str] = []
    for start in range(0, stores, 2_000):
        batch = [
            NewItem(
                content=Learning(text=" ".join(rng.choices(vocab, k=rng.randint(8, 20)))),
                namespace=PLACE,
            )
            for _ in range(min(2_000, stores - start))
        ]
        ids += [s.id for s in await memory.engine.store_many(batch)]
    for item in ids[::50]:
        await memory.engine.promote(item, actor="bench", reason="checked")
    for item in ids[7::100]:
        await memory.engine.forget(ids=[item])


def _queries(n: int) -> list[dict[str, Any]]:
    rng = random.Random(11)
    middle = _vocabulary(random.Random(5))[50:1_500]
    return [
        {"query": " ".join(rng.sample(middle, rng.randint(1, 2))), "mode": "exact", "limit": 10}
        for _ in range(n)
    ]


async def _p50(call: Any, asked: list[dict[str, Any]]) -> float:
    times = []
    for args in asked:
        started = time.perf_counter()
        await call("memory_fetch", args)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def bench(entries: int, reads: int) -> None:
    with tempfile.TemporaryDirectory(prefix="memseal-bench-") as tmp:
        async with memseal.open(
            Path(tmp) / "data", embedder=None, checkpoint_interval=None
        ) as memory:
            started = time.perf_counter()
            await _fill(memory, entries)
            size = (await memory.ledger.store.head()).size
            print(f"log: {size} entries written in {time.perf_counter() - started:.1f} s")
            asked = _queries(reads)
            live = await _p50(MemoryTools(memory.engine, SCOPE).call, asked)

            started = time.perf_counter()
            view = (await memory.as_of(size=size)).tools(SCOPE)
            await view.call("memory_fetch", asked[0])
            cold = time.perf_counter() - started
            warm = await _p50(view.call, asked)

            await memory._views.clear()
            started = time.perf_counter()
            half = (await memory.as_of(size=size // 2)).tools(SCOPE)
            await half.call("memory_fetch", asked[0])
            halfway = time.perf_counter() - started

    print(f"live exact memory_fetch p50:            {live:9.2f} ms   (baseline)")
    print(
        f"as-of read, cold (view at {size}):   {cold * 1000:9.1f} ms   "
        f"x{cold * 1000 / live:,.0f} the live read"
    )
    print(
        f"as-of read, cold at {size // 2}:         {halfway * 1000:9.1f} ms   "
        f"x{halfway * 1000 / live:,.0f} the live read; {halfway / cold:.2f} of cold"
    )
    print(f"as-of read, warm p50:                   {warm:9.2f} ms   x{warm / live:.2f} the live")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=5_000, help="log entries (default 5000)")
    parser.add_argument("--reads", type=int, default=50, help="warm reads timed (default 50)")
    args = parser.parse_args()
    asyncio.run(bench(args.entries, args.reads))


if __name__ == "__main__":
    main()
