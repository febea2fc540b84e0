"""Durable runs: what recording every call costs, and what a replay hit saves, in one run.

Run: ``.venv/bin/python benchmarks/replay.py [--quick] [--calls N] [--concurrency C]``

On real files in a temporary folder (WAL, synchronous=FULL), over 10k memories
(``--quick``: 1k) stored with ``engine.store_many`` at one agent's place, and the same
exact ``memory_fetch`` queries (limit 10) throughout:

(a) **recorded call throughput**: ``run.call`` in mode ``record`` (the read, a signed
    ``memory_tool_call`` entry with its payload, and the memo row, committed) against
    the same call on ``MemoryTools.call`` (no call entry), sequentially and with
    ``--concurrency`` calls in flight; ratio recorded / direct, target >= 0.7. A
    recorded call is the read plus one durable commit, so a floor line prints one small
    signed append on its own (its commit's fsync included);
(b) **replay-hit latency**: a resumed run issuing the recorded calls again, every one
    a memo hit (memo row, signed entry and payload read and checked, result restored),
    against a live call's latency; ratio replay / live at p50, target <= 0.5. Live is
    the recorded call it replaces (``run.call`` in mode ``record``); the ratio to a
    direct, unrecorded call is printed too;
(c) **memory.tools(scope).call**, what a host hands its model (every call recorded: a
    fresh one-call run each, or one run bound with ``run_id=``), against the same
    unrecorded ``MemoryTools.call`` of (a), measured in the same run; ratio, target >= 0.7.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import memseal
from memseal.engine import Learning, NewItem
from memseal.tools import MemoryTools, ToolScope

PLACE = "team:bench/agent:writer"
SCOPE = ToolScope.placed_at(PLACE)
_SYLLABLES = ["ka", "lo", "mi", "ru", "ten", "sa", "vo", "ne", "pi", "dra", "ul", "shi", "bo"]


def vocabulary(rng: random.Random, size: int = 5_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def corpus(n: int) -> list[NewItem]:
    rng = random.Random(7)
    vocab = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf: a few very common words
    return [
        NewItem(
            content=Learning(text=" ".join(rng.choices(vocab, weights, k=rng.randint(8, 24)))),
            namespace=PLACE,
            tags=(f"tag{i % 20}",) if i % 4 == 0 else (),
        )
        for i in range(n)
    ]


def queries(n: int) -> list[dict[str, Any]]:
    rng = random.Random(11)
    middle = vocabulary(random.Random(7))[50:2_000]  # mid-frequency words: real searches
    return [
        {"query": " ".join(rng.sample(middle, rng.randint(1, 3))), "mode": "exact"}
        for _ in range(n)
    ]


Call = Callable[[dict[str, Any]], Awaitable[Any]]


async def sequential(call: Call, asked: list[dict[str, Any]]) -> tuple[float, list[float]]:
    """Calls per second, and each call's latency in milliseconds."""
    samples = []
    start = time.perf_counter()
    for arguments in asked:
        began = time.perf_counter()
        await call(arguments)
        samples.append((time.perf_counter() - began) * 1000)
    return len(asked) / (time.perf_counter() - start), samples


async def concurrent(call: Call, asked: list[dict[str, Any]], width: int) -> float:
    """Calls per second with ``width`` calls in flight."""
    pending = iter(asked)

    async def worker() -> None:
        for arguments in pending:
            await call(arguments)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(width)))
    return len(asked) / (time.perf_counter() - start)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def line(label: str, value: str) -> None:
    print(f"  {label:<52} {value}")


def verdict(ok: bool) -> str:
    return "ok" if ok else "BELOW TARGET"


async def bench(folder: Path, memories: int, calls: int, width: int) -> None:
    asked = queries(calls)
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        items = corpus(memories)
        start = time.perf_counter()
        for base in range(0, memories, 1_000):
            await memory.engine.store_many(items[base : base + 1_000])
        line("store_many", f"{memories:,} memories in {time.perf_counter() - start:.1f} s")
        tools = MemoryTools(memory.engine, SCOPE)

        def direct(arguments: dict[str, Any]) -> Awaitable[Any]:
            return tools.call("memory_fetch", arguments)

        # Warm the page cache and the query path for every query once.
        await sequential(direct, asked)
        hits = [len((await direct(a))["hits"]) for a in asked[:50]]
        line("hits per fetch (first 50 queries, mean)", f"{statistics.mean(hits):.1f}")

        # (a) throughput, sequential.
        direct_seq, direct_lat = await sequential(direct, asked)
        async with memory.run("bench-seq", SCOPE, mode="record") as run:
            recorded_seq, recorded_lat = await sequential(
                lambda a: run.call("memory_fetch", a), asked
            )
        # (a) throughput, concurrent (one run, its calls in flight together).
        direct_conc = await concurrent(direct, asked, width)
        async with memory.run("bench-conc", SCOPE, mode="record") as run:
            recorded_conc = await concurrent(lambda a: run.call("memory_fetch", a), asked, width)

        # (c) what a host gets from memory.tools(scope): one fresh one-call run per call,
        # and a run bound with run_id=, against the unrecorded MemoryTools.call.
        host_tools = memory.tools(SCOPE)
        fresh_seq, fresh_lat = await sequential(lambda a: host_tools.call("memory_fetch", a), asked)
        async with memory.tools(SCOPE, run_id="bench-tools", mode="record") as bound:
            bound_seq, _ = await sequential(lambda a: bound.call("memory_fetch", a), asked)

        # (d) keyed calls (the model's tool-call id as the key) against unkeyed ones, each
        # in a run of its own, then both resumed: the key must cost nothing noticeable.
        async with memory.run("bench-unkeyed", SCOPE, mode="record") as run:
            unkeyed_seq, _ = await sequential(lambda a: run.call("memory_fetch", a), asked)
        counter = iter(range(10**9))
        async with memory.run("bench-keyed", SCOPE, mode="record") as run:
            keyed_seq, _ = await sequential(
                lambda a: run.call("memory_fetch", a, key=f"call_{next(counter)}"), asked
            )
        async with memory.run("bench-unkeyed", SCOPE, mode="resume") as run:
            _, unkeyed_replay = await sequential(lambda a: run.call("memory_fetch", a), asked)
        counter = iter(range(10**9))
        async with memory.run("bench-keyed", SCOPE, mode="resume") as run:
            _, keyed_replay = await sequential(
                lambda a: run.call("memory_fetch", a, key=f"call_{next(counter)}"), asked
            )

        # The floor under any recorded call: one small signed entry, durably committed.
        _, append_lat = await sequential(
            lambda a: memory.ledger.append("bench_probe", {"n": 1}), asked[:200]
        )

        # (b) replay hits: the sequential run resumed, every step memoised.
        size = (await memory.ledger.head()).size
        async with memory.run("bench-seq", SCOPE, mode="resume") as run:
            _, replay_lat = await sequential(lambda a: run.call("memory_fetch", a), asked)
        assert (await memory.ledger.head()).size == size, "a replay hit wrote something"

    print(f"\n(a) recorded call throughput, {calls} exact memory_fetch calls")
    line("direct MemoryTools.call, sequential", f"{direct_seq:,.0f} calls/s")
    line("recorded run.call, sequential", f"{recorded_seq:,.0f} calls/s")
    line(
        "floor: one durable signed append, p50 / p95",
        f"{pct(append_lat, 0.5):.3f} / {pct(append_lat, 0.95):.3f} ms",
    )
    ratio_seq = recorded_seq / direct_seq
    line(
        "ratio recorded / direct, sequential (>= 0.7)",
        f"{ratio_seq:.2f} {verdict(ratio_seq >= 0.7)}",
    )
    line(f"direct MemoryTools.call, {width} concurrent", f"{direct_conc:,.0f} calls/s")
    line(f"recorded run.call, {width} concurrent", f"{recorded_conc:,.0f} calls/s")
    ratio_conc = recorded_conc / direct_conc
    line(
        f"ratio recorded / direct, {width} concurrent (>= 0.7)",
        f"{ratio_conc:.2f} {verdict(ratio_conc >= 0.7)}",
    )

    print(f"\n(c) memory.tools(scope).call, {calls} exact memory_fetch calls, sequential")
    line("memory.tools(scope): a fresh run per call", f"{fresh_seq:,.0f} calls/s")
    line("memory.tools(scope, run_id=...): one bound run", f"{bound_seq:,.0f} calls/s")
    line(
        "fresh run per call, p50 / p95",
        f"{pct(fresh_lat, 0.5):.3f} / {pct(fresh_lat, 0.95):.3f} ms",
    )
    ratio_fresh = fresh_seq / direct_seq
    line(
        "ratio memory.tools / unrecorded MemoryTools (>= 0.7)",
        f"{ratio_fresh:.2f} {verdict(ratio_fresh >= 0.7)}",
    )
    ratio_bound = bound_seq / direct_seq
    line(
        "ratio bound memory.tools / unrecorded (>= 0.7)",
        f"{ratio_bound:.2f} {verdict(ratio_bound >= 0.7)}",
    )

    print(f"\n(d) keyed calls, {calls} exact memory_fetch calls, sequential")
    line("recorded run.call, unkeyed", f"{unkeyed_seq:,.0f} calls/s")
    line("recorded run.call, keyed (key=the tool-call id)", f"{keyed_seq:,.0f} calls/s")
    ratio_keyed = keyed_seq / unkeyed_seq
    line("ratio keyed / unkeyed, live (>= 0.9)", f"{ratio_keyed:.2f} {verdict(ratio_keyed >= 0.9)}")
    ratio_keyed_replay = pct(keyed_replay, 0.5) / pct(unkeyed_replay, 0.5)
    line(
        "ratio keyed / unkeyed replay hit, p50 (<= 1.1)",
        f"{ratio_keyed_replay:.2f} {verdict(ratio_keyed_replay <= 1.1)}",
    )

    print("\n(b) replay-hit latency (p50 / p95)")
    line(
        "live call, recorded (run.call, record)",
        f"{pct(recorded_lat, 0.5):.3f} / {pct(recorded_lat, 0.95):.3f} ms",
    )
    line(
        "live call, direct (MemoryTools.call)",
        f"{pct(direct_lat, 0.5):.3f} / {pct(direct_lat, 0.95):.3f} ms",
    )
    line(
        "replay hit (run.call, resume)",
        f"{pct(replay_lat, 0.5):.3f} / {pct(replay_lat, 0.95):.3f} ms",
    )
    ratio_live = pct(replay_lat, 0.5) / pct(recorded_lat, 0.5)
    ratio_direct = pct(replay_lat, 0.5) / pct(direct_lat, 0.5)
    line(
        "ratio replay / live recorded call, p50 (<= 0.5)",
        f"{ratio_live:.2f} {verdict(ratio_live <= 0.5)}",
    )
    line("ratio replay / direct call, p50 (for reference)", f"{ratio_direct:.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k memories, fewer calls")
    parser.add_argument("--calls", type=int, default=None, help="calls per measurement")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    memories = 1_000 if args.quick else 10_000
    calls = args.calls or (200 if args.quick else 1_000)
    print(
        f"memseal replay benchmark ({'quick' if args.quick else 'full'}): "
        f"{memories:,} memories, {calls} calls per measurement"
    )
    with tempfile.TemporaryDirectory() as where:
        await bench(Path(where) / "data", memories, calls, args.concurrency)


if __name__ == "__main__":
    asyncio.run(main())
