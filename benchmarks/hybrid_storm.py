"""Recorded hybrid reads beside a storm of stores: how often a read runs again.

Run: ``.venv/bin/python benchmarks/hybrid_storm.py [--items 500] [--reads 60] [--writers 4]``

A real SQLite data folder with the hashing embedder holds ``--items`` memories;
``--writers`` tasks then store memories sharing the question's words as fast as
they can, while one run makes ``--reads`` recorded hybrid fetches. A recorded
read runs again when its snapshots name different tree sizes and the engine
cannot vouch for the prefix it ranked (docs/engine.md, "Which log prefix a
hybrid read ranks"). It prints the reads' p50/p95, the Conflicts (a read that
ran again 16 times), and the tries the reads took (each live call's size
observation is counted; the storm's stores take one each and are subtracted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import memseal
import memseal.replay.runs._live as live
from memseal.engine import HashingEmbedder
from memseal.ledger.store import observing_sizes

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
_tries = [0]


@contextlib.contextmanager
def _counted() -> Iterator[list[int]]:
    # One size observation per try of a live call (a read retried counts once per try).
    _tries[0] += 1
    with observing_sizes() as sizes:
        yield sizes


async def main(items: int, reads: int, writers: int) -> None:
    # The live calls' module looks the name up at each call: count its tries there.
    live.__dict__["observing_sizes"] = _counted
    folder = Path(tempfile.mkdtemp()) / "data"
    async with memseal.open(folder, embedder=HashingEmbedder(), checkpoint_interval=None) as m:
        for i in range(items):
            text = f"note {i} about the deploy key {i % 17}"
            await m.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
        stop = asyncio.Event()
        stored = [0]

        async def storm() -> None:
            while not stop.is_set():
                text = f"storm note {stored[0]} about the deploy key"
                await m.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
                stored[0] += 1

        tasks = [asyncio.create_task(storm()) for _ in range(writers)]
        times: list[float] = []
        conflicts = 0
        _tries[0] = 0
        async with m.run("storm-reads", SCOPE) as run:
            for _ in range(reads):
                started = time.perf_counter()
                try:
                    await run.call("memory_fetch", {"query": "deploy key"})
                except memseal.Conflict:
                    conflicts += 1
                times.append(time.perf_counter() - started)
        stop.set()
        await asyncio.gather(*tasks)
        tries = _tries[0] - stored[0]
    times.sort()
    p50, p95 = times[len(times) // 2], times[min(len(times) - 1, len(times) * 95 // 100)]
    print(
        f"{reads} recorded hybrid reads beside {writers} writers ({stored[0]} stores): "
        f"p50 {1000 * p50:.1f} ms, p95 {1000 * p95:.1f} ms, {conflicts} Conflict(s), "
        f"{tries} tries ({tries / reads:.2f} a read)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--reads", type=int, default=60)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.items, args.reads, args.writers))
