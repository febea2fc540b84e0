"""What each part of ``memseal verify`` costs, and whether ``--deep`` could be the default.

Run: ``.venv/bin/python benchmarks/verify.py [--items 10000] [--calls 1000]``

On a real data folder in a temporary directory (SQLite, memseal's durability):
``--items`` memories stored with ``store_many`` and a run of ``--calls`` recorded
tool calls (half stores, half fetches). Then, each timed on its own:

* the ledger's verify (every entry, signature, tree hash and checkpoint);
* the derived tables (``verify_derived``: memo rows, runs and redactions against the log);
* the deep check (``check_projections``: the projections rebuilt from the log into an
  in-memory scratch store, compared row by row with the live ones);
* a resume's memo look-up (``reconcile_memos``: the run's signed calls read from its
  start), the cost a resumed run pays once when it starts.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import memseal
from memseal import ToolScope
from memseal.engine import Learning, NewItem
from memseal.replay.runs.provenance import reconcile_memos, verify_derived

SCOPE = ToolScope.placed_at("team:bench/agent:a")


def line(label: str, value: str) -> None:
    print(f"  {label:<44} {value}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        folder = Path(where) / "data"
        async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
            batch = [
                NewItem(
                    content=Learning(text=f"memory {i}: the build of service {i % 97} is green"),
                    namespace=f"team:bench/agent:a{i % 8}",
                    tags=(f"tag{i % 20}",),
                )
                for i in range(args.items)
            ]
            for base in range(0, len(batch), 1_000):
                await memory.engine.store_many(batch[base : base + 1_000])
            async with memory.run("bench", SCOPE) as run:
                for i in range(args.calls):
                    if i % 2:
                        await run.call("memory_fetch", {"query": f"service {i % 97}"})
                    else:
                        await run.call("memory_store", {"learning": {"text": f"call {i} ran"}})
            size = await memory.ledger.size()
            print(f"{args.items:,} items, a run of {args.calls:,} calls, {size:,} entries")

            start = time.perf_counter()
            summary = await memory.ledger.verify()
            ledger_s = time.perf_counter() - start
            line("ledger verify", f"{ledger_s:.2f} s ({size / ledger_s:,.0f} entries/s)")

            start = time.perf_counter()
            await verify_derived(memory.ledger.store, summary.size)
            memo_s = time.perf_counter() - start
            line(
                "memo, runs, redactions (verify_derived)",
                f"{memo_s:.2f} s (+{memo_s / ledger_s:.0%})",
            )

            check = await memory.engine.check_projections()
            assert check.matches, check
            line(
                "deep check (check_projections)",
                f"{check.seconds:.2f} s (+{check.seconds / ledger_s:.0%} of the ledger verify)",
            )

            run = memory.run("bench", SCOPE)
            keys = run._keys()
            start = time.perf_counter()
            found = await reconcile_memos(memory.ledger.store, keys, "bench", "nobody", False)
            resume_s = time.perf_counter() - start
            assert len(found.recorded) == args.calls
            line("resume memo look-up (reconcile_memos)", f"{resume_s * 1000:.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
