"""The PostgreSQL writer at issue 17: recorded ``memory_store`` calls/s beside SQLite's,
and what each call waits for on the writer's connection.

Both stores are seeded alike (``--memories``), as ``bench.py`` seeds its PostgreSQL
row, and in each round a run of ``--calls`` recorded stores (``--width`` in flight)
goes to SQLite, then one to PostgreSQL; the table gives the medians and the
PostgreSQL / SQLite ratio of the same round. Then one more PostgreSQL run of
``--traced`` stores runs with libpq's protocol trace on the writer's connection
(not timed: tracing slows it) and counts, per store:

* statements: the Parse/Bind/Execute or simple Query messages the writer sent;
* waits: the answers the writer waited for (a ReadyForQuery, one per Sync or
  simple query, or a Flush inside the pipeline): its round trips.

    .venv/bin/python benchmarks/pg_writer.py --postgres postgresql://USER:PW@HOST:PORT/DB

The URL defaults to ``$MEMSEAL_TEST_POSTGRES``; a schema of its own is made and dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import SCOPE, corpus, in_flight, store_arguments
from bench_paths import postgres_memory, postgres_round_trip, seed

import memseal

CPU: dict[str, list[float]] = {"sqlite": [], "postgresql": []}


async def recorded_stores(
    memory: memseal.Memory, name: str, n: int, width: int, seed: int
) -> float:
    asked = store_arguments(n, seed=seed)
    store: Any = memory.ledger.store
    backend = None
    if store.dialect == "postgresql":
        backend = await store.exclusive(lambda conn: conn.info.backend_pid)
    began, served = time.process_time(), backend_cpu(backend)
    async with memory.run(name, SCOPE, mode="record") as run:
        rate = await in_flight(lambda a: run.call("memory_store", a), asked, width)
    # This process's CPU a store (all its threads): on 2 cores shared with the
    # database server, what bounds the rate once the waits are gone.
    CPU[store.dialect].append((time.process_time() - began) * 1000 / n)
    if served is not None and (now := backend_cpu(backend)) is not None:
        SERVER.append((now - served) * 1000 / n)
    return rate


SERVER: list[float] = []


def backend_cpu(pid: int | None) -> float | None:
    """CPU seconds of the writer's PostgreSQL backend, when the server is on this Linux host."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def traced(memory: memseal.Memory, n: int, width: int) -> tuple[float, float]:
    """Statements and waits per recorded store, from the writer's libpq trace."""
    store: Any = memory.ledger.store
    with tempfile.TemporaryFile() as trace:
        await store.exclusive(lambda conn: conn.pgconn.trace(trace.fileno()))
        await recorded_stores(memory, "traced", n, width, seed=999)
        await store.exclusive(lambda conn: conn.pgconn.untrace())
        trace.seek(0)
        lines = trace.read().decode(errors="replace").splitlines()
    sent = sum(
        1 for line in lines if "\tF\t" in line and ("\tExecute\t" in line or "\tQuery\t" in line)
    )
    waits = sum(1 for line in lines if "\tReadyForQuery" in line or "\tF\t4\tFlush" in line)
    return sent / n, waits / n


async def main(args: argparse.Namespace) -> None:
    seeded = corpus(args.memories)
    with tempfile.TemporaryDirectory() as where:
        async with memseal.open(
            Path(where) / "sqlite", store="sqlite", embedder=None, checkpoint_interval=None
        ) as sq:
            await seed(sq, seeded)
            async with postgres_memory(Path(where) / "pg", args.postgres, seeded) as pg:
                rows: list[tuple[float, float]] = []
                for r in range(args.rounds):
                    s = await recorded_stores(sq, f"sq-{r}", args.calls, args.width, 100 + r)
                    p = await recorded_stores(pg, f"pg-{r}", args.calls, args.width, 200 + r)
                    print(f"round {r}: SQLite {s:,.0f}/s  PostgreSQL {p:,.0f}/s  {p / s:.2f}")
                    rows.append((s, p))
                cpu = {k: statistics.median(v) for k, v in CPU.items()}
                sent, waits = await traced(pg, args.traced, args.width)
    s = statistics.median(r[0] for r in rows)
    p = statistics.median(r[1] for r in rows)
    ratio = statistics.median(r[1] / r[0] for r in rows)
    print(f"recorded memory_store ({args.width} in flight), medians of {args.rounds} rounds:")
    print(f"  SQLite      {s:,.0f} calls/s")
    print(f"  PostgreSQL  {p:,.0f} calls/s, {ratio:.2f} of SQLite (target >= 0.7)")
    print(f"  PostgreSQL writer: {sent:.2f} statements and {waits:.2f} waits a store")
    print(
        f"  this process's CPU a store: SQLite {cpu['sqlite']:.3f} ms, "
        f"PostgreSQL {cpu['postgresql']:.3f} ms (the server's own not counted)"
    )
    if SERVER:
        print(
            f"  the writer's PostgreSQL backend's CPU a store: {statistics.median(SERVER):.3f} ms"
        )
    print(
        f"  PostgreSQL round trip (SELECT 1), p50: {postgres_round_trip(args.postgres, 200):.3f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("MEMSEAL_TEST_POSTGRES"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000, help="calls a run (2000)")
    parser.add_argument("--width", type=int, default=32, help="calls in flight (32)")
    parser.add_argument("--memories", type=int, default=2000, help="memories seeded (2000)")
    parser.add_argument("--traced", type=int, default=300, help="stores of the traced run (300)")
    args = parser.parse_args()
    if not args.postgres:
        parser.error("no PostgreSQL: --postgres URL or MEMSEAL_TEST_POSTGRES")
    asyncio.run(main(args))
