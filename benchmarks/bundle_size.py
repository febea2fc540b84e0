"""How big a session bundle gets with and without its reads section (``--with-read-proofs``).

Run: ``.venv/bin/python benchmarks/bundle_size.py [--before 2000]``

On a real SQLite data folder, another tenant makes ``--before`` one-shot stores
(each a ``run_started``, a ``memory_stored`` and a ``memory_tool_call`` entry),
then a short run stores one memory and makes two reads. The run is exported
twice, plain and with the reads section, and each bundle's size, its log entries
below the run's last read and the export time are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import memseal
from memseal.replay.evidence.bundle import encode_bundle, export_bundle

MINE = memseal.ToolScope.placed_at("team:acme/agent:writer")
OTHER = memseal.ToolScope.placed_at("team:other/agent:x")


async def main(before: int) -> None:
    folder = Path(tempfile.mkdtemp()) / "data"
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        for i in range(before):
            text = f"note {i} of the other team about topic {i % 97}"
            await memory.call("memory_store", {"learning": {"text": text}}, scope=OTHER)
        async with memory.run("r", MINE) as run:
            await run.call("memory_store", {"learning": {"text": "the deploy key is in vault"}})
            await run.call("memory_fetch", {"query": "deploy key", "mode": "exact"})
            await run.call("memory_list", {})
        keys = await memory.key_history()
        for with_read_proofs in (False, True):
            started = time.perf_counter()
            bundle = await export_bundle(
                memory.ledger, keys, "r", with_read_proofs=with_read_proofs
            )
            data = encode_bundle(bundle)
            took = time.perf_counter() - started
            prefix = 0 if bundle.reads is None else len(bundle.reads.prefix)
            print(
                f"{'with read proofs' if with_read_proofs else 'plain':>16}: "
                f"{len(data):,} bytes, {len(bundle.entries)} entries + {prefix} prefix "
                f"entries, exported in {took:.2f} s"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=int, default=2000)
    asyncio.run(main(parser.parse_args().before))
