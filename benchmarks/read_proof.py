"""Read proofs: what writing and checking one costs, against a full ledger audit, in one run.

Run: ``.venv/bin/python benchmarks/read_proof.py [--quick] [--memories N]``

On real files in a temporary folder, N memories (default 10k, ``--quick`` 1k) are
stored with ``engine.store_many``, half at the run's place and half at another
tenant's (out of its reach); then a run makes one exact ``memory_fetch`` and one
``memory_list``. Printed, for the list (its reach only) and the fetch (``--disclose
all``, so its BM25 scores re-derive byte for byte):

* ``prove_read``: seconds to write the proof, and its size (bytes, bytes per entry);
* ``verify_read``: seconds to check it offline and re-derive the read;
* the baseline, measured in the same run on the same folder: ``ledger.verify``, the
  full audit an auditor with the data folder runs, and the ratio verify_read / audit.
  A read proof re-checks every prefix entry too, and rebuilds the reach's memory in a
  temporary log, so its cost grows with the prefix like the audit's, plus the rebuild.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

import memseal
from memseal.engine import Learning, NewItem
from memseal.replay.evidence.read_proof import verify_read
from memseal.tools import ToolScope

PLACE = "team:bench/agent:reader"
OTHER = "team:other/agent:x"
WORDS = [f"w{i}" for i in range(2_000)]


def corpus(n: int) -> list[NewItem]:
    rng = random.Random(5)
    return [
        NewItem(
            content=Learning(text=" ".join(rng.choices(WORDS, k=rng.randint(8, 20)))),
            namespace=PLACE if i % 2 == 0 else OTHER,
        )
        for i in range(n)
    ]


async def main(memories: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with memseal.open(
            Path(tmp) / "data", embedder=None, checkpoint_interval=None
        ) as memory:
            items = corpus(memories)
            for base in range(0, len(items), 1_000):
                await memory.engine.store_many(items[base : base + 1_000])
            async with memory.run("bench", ToolScope.placed_at(PLACE)) as run:
                await run.call("memory_fetch", {"query": "w17 w203", "mode": "exact"})
                await run.call("memory_list", {"limit": 20})
            size = await memory.ledger.size()
            start = time.perf_counter()
            await memory.ledger.verify()
            audit = time.perf_counter() - start
            vkey = memory.trust_root
            print(f"ledger of {size:,} entries; full audit (ledger.verify) {audit:.2f} s")
            for step, disclose, what in ((1, "reach", "list"), (0, "all", "exact fetch")):
                start = time.perf_counter()
                data = await memory.prove_read("bench", step, disclose=disclose)  # type: ignore[arg-type]
                made = time.perf_counter() - start
                start = time.perf_counter()
                verified = await verify_read(data, vkey)
                checked = time.perf_counter() - start
                print(
                    f"{what} (--disclose {disclose}): prove_read {made:.2f} s, "
                    f"{len(data):,} bytes ({len(data) / verified.size:.0f} per entry); "
                    f"verify_read {checked:.2f} s ({verified.how}{': ' if verified.why else ''}"
                    f"{verified.why[:60]}); "
                    f"verify_read / audit {checked / audit:.1f}x"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k memories")
    parser.add_argument("--memories", type=int, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.memories or (1_000 if args.quick else 10_000)))
