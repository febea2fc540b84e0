"""What the registry's memo-hit count costs a served run call, measured in one run.

Run: ``.venv/bin/python benchmarks/run_tally.py [--calls N]``

The service holds runs in a :class:`~memseal.service.registry.RunRegistry`; to count
the memo hits a step's calls get (they write no entry), it reads whether the step has a
memo before each unkeyed call: one primary-key lookup in ``memos``. On real files in a
temporary folder, sequentially:

(a) **live**: ``RunRegistry.call`` of ``memory_list`` at new steps (each a signed entry);
(b) **replayed**: the same steps called again by number (memo hits, as a client retry);
(c) **the lookup alone**: the memo read the count adds, on the same store.

Prints the per-call times at p50 and the lookup's share of a live and of a replayed call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import memseal
from memseal import ToolScope
from memseal.engine import Learning
from memseal.service.registry import RunRegistry


async def _main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with memseal.open(Path(tmp), embedder=None, checkpoint_interval=None) as memory:
            scope = ToolScope.placed_at("team:bench/agent:a")
            for i in range(50):
                await memory.engine.store(
                    Learning(text=f"memory {i}"), namespace="team:bench/agent:a"
                )
            runs = RunRegistry(memory)
            live, replayed, lookup = [], [], []
            for step in range(calls):
                t = time.perf_counter()
                await runs.call("bench", scope, "memory_list", {}, step=step)
                live.append(time.perf_counter() - t)
            for step in range(calls):
                t = time.perf_counter()
                await runs.call("bench", scope, "memory_list", {}, step=step)
                replayed.append(time.perf_counter() - t)
            for step in range(calls):
                t = time.perf_counter()
                await runs._has_memo("bench", step)
                lookup.append(time.perf_counter() - t)
            assert runs.answered_here("bench") == {s: (1, 1) for s in range(calls)}
            await runs.close()
    p50 = {k: statistics.median(v) * 1e3 for k, v in
           (("live", live), ("replayed", replayed), ("lookup", lookup))}  # fmt: skip
    print(f"calls per kind: {calls}")
    for name, ms in p50.items():
        print(f"{name:>9}: p50 {ms:.3f} ms")
    print(f"lookup / live call:     {p50['lookup'] / p50['live']:.3f}")
    print(f"lookup / replayed call: {p50['lookup'] / p50['replayed']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(_main(parser.parse_args().calls))


if __name__ == "__main__":
    main()
