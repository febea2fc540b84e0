"""The default embedder's fill rate: batched model calls beside one call per store.

Run: ``.venv/bin/python benchmarks/embed_fill.py [--stores 600] [--fill 3000] [--quick]``

With the default embedder (all-MiniLM-L6-v2 int8 on onnxruntime), on real SQLite
data folders (WAL, synchronous=FULL), in one process run:

* **stores in flight.** ``--stores`` recorded-free ``engine.store`` calls, each with
  one realistic text (8 to 24 words), at 1, 8 and 32 calls in flight, by two
  contestants interleaved round by round (``--rounds``, medians kept):

  - *one call per store*: each store's text is embedded by its own model call, one
    call at a time (the path before stores in flight shared calls);
  - *batched*: the engine as it ships: texts that arrive while the model is busy go
    into the next call together, and up to one call per core runs at once
    (``engine/_batching.py``).

  It prints stores/s, the ratio batched / one call per store, and the p50 store
  latency at 1 in flight for both (the issue asks that it not get worse).
* **fill at open.** A folder of ``--fill`` memories stored with no embedder is opened
  with the default embedder, which embeds them all before serving (512 texts a call,
  a call per core); beside it, the same texts embedded one model call per text in
  one thread. Texts/s for both and the ratio.

``--quick`` is a smoke run (120 stores, 600 texts, one round): figures printed, none
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memseal.cli.engine import open_engine
from memseal.engine import Engine, Learning, NewItem
from memseal.engine._batching import Batcher
from memseal.engine.embedders import MiniLMEmbedder

PLACE = "team:acme/agent:writer"
WIDTHS = (1, 8, 32)


class OneCallPerStore(Batcher):
    """Each caller's texts alone, one model call at a time: no sharing of calls."""

    def __init__(self, embed: Any) -> None:
        super().__init__(embed, lanes=1)

    def _take(self) -> list[tuple[list[str], asyncio.Future[list[list[float]]]]]:
        return [self._pending.pop(0)]


def corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [
        "deploy", "pipeline", "review", "budget", "lisbon", "invoice", "tuesday", "release",
        "customer", "cache", "database", "prefers", "decided", "meeting", "owner", "quarter",
        "rollback", "staging", "approval", "latency", "contract", "renewal", "team", "alert",
    ]  # fmt: skip
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(8, 24))) + f" (note {seed}-{i})"
        for i in range(n)
    ]


async def stores(engine: Engine, texts: Sequence[str], width: int) -> tuple[float, float]:
    """(stores/s, p50 latency ms) for ``texts`` stored ``width`` at a time."""
    latencies: list[float] = []
    gate = asyncio.Semaphore(width)

    async def one(text: str) -> None:
        async with gate:
            start = time.perf_counter()
            await engine.store(Learning(text=text), namespace=PLACE)
            latencies.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(one(t) for t in texts))
    seconds = time.perf_counter() - start
    return len(texts) / seconds, statistics.median(latencies)


async def store_cell(
    folder: Path, embedder: MiniLMEmbedder, name: str, texts: Sequence[str], width: int
) -> tuple[float, float]:
    """One contestant's (stores/s, p50 ms) on a new folder: ``batched`` or one call per store."""
    async with open_engine(folder, create=True, embedder=embedder) as engine:
        if name != "batched":
            assert engine._vectors is not None
            engine._vectors._batcher = OneCallPerStore(lambda texts: list(embedder.embed(texts)))
        return await stores(engine, texts, width)


def line(label: str, value: str) -> None:
    print(f"  {label:<56} {value}", flush=True)


async def in_flight(where: Path, embedder: MiniLMEmbedder, count: int, rounds: int) -> None:
    print(f"\nstores in flight ({count} stores each, medians of {rounds} interleaved rounds)")
    figures: dict[tuple[str, int], list[tuple[float, float]]] = {}
    seed = 0
    for round_ in range(rounds):
        for width in WIDTHS:
            for name in ("one call per store", "batched"):
                seed += 1
                folder = where / f"stores-{round_}-{width}-{name.split()[0]}"
                figures.setdefault((name, width), []).append(
                    await store_cell(folder, embedder, name, corpus(count, seed), width)
                )
    for width in WIDTHS:
        rates = {}
        for name in ("one call per store", "batched"):
            rate = statistics.median(r for r, _ in figures[(name, width)])
            p50 = statistics.median(p for _, p in figures[(name, width)])
            rates[name] = rate
            line(f"{name}, {width} in flight", f"{rate:,.0f} stores/s (p50 {p50:.1f} ms)")
        line(
            f"ratio batched / one call per store, {width} in flight",
            f"{rates['batched'] / rates['one call per store']:.2f}x",
        )


async def fill_at_open(where: Path, embedder: MiniLMEmbedder, count: int) -> None:
    print(f"\nfill at open ({count:,} memories stored without an embedder)")
    texts = corpus(count, 10_000)
    folder = where / "fill"
    async with open_engine(folder, create=True) as engine:
        items = [NewItem(content=Learning(text=t), namespace=PLACE) for t in texts]
        for base in range(0, count, 1_000):
            await engine.store_many(items[base : base + 1_000])
    # The same texts, one model call per text in one thread: the unbatched fill.
    start = time.perf_counter()
    for text in texts:
        embedder.embed([text])
    one_by_one = count / (time.perf_counter() - start)
    start = time.perf_counter()
    async with open_engine(folder, embedder=embedder) as engine:
        seconds = time.perf_counter() - start
        filled = (await engine._store.rows("SELECT count(*) FROM engine_vectors"))[0][0]
    batched = int(filled) / seconds
    line("one model call per text, one thread", f"{one_by_one:,.0f} texts/s")
    line("fill at open (512 texts a call, a call per core)", f"{batched:,.0f} texts/s")
    line("ratio fill at open / one call per text", f"{batched / one_by_one:.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stores", type=int, default=600, help="stores per contestant")
    parser.add_argument("--fill", type=int, default=3_000, help="memories filled at open")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.stores, args.fill, args.rounds = 120, 600, 1
    embedder = MiniLMEmbedder()
    print(f"embedder {embedder.id}")
    with tempfile.TemporaryDirectory() as where:
        await in_flight(Path(where), embedder, args.stores, args.rounds)
        await fill_at_open(Path(where), embedder, args.fill)


if __name__ == "__main__":
    asyncio.run(main())
