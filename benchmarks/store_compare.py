"""Durable recorded calls/s: PostgreSQL next to SQLite, with 1 and 4 `memseal serve` processes.

For each store, SQLite (the data folder's own file: WAL, ``synchronous=FULL``)
and PostgreSQL (a fresh schema, ``synchronous_commit=on``; dropped at the end),
and for 1 and 4 server processes on that one store (one data folder for the
keys and tokens, each process on its own port, all started at once), the load
generator of ``http_load.py`` drives, from ``--clients`` concurrent keep-alive
connections spread evenly over the processes, for a fixed time:

* ``memory_store``: ``POST /v1/tools/memory_store``, a new memory each call (a
  one-shot recorded run: a signed ``memory_stored`` and a signed
  ``memory_tool_call`` entry, committed together before the answer);
* ``memory_fetch``: ``POST /v1/tools/memory_fetch``, exact search over 200 memories,
  recorded (a signed ``memory_tool_call`` entry and its memo row, committed).

Every call counted is a 200: acknowledged, so committed and signed. Prints calls/s,
p50 and p99 latency per configuration, then within the run the ratio PostgreSQL /
SQLite at each process count and the ratio 4 processes / 1 on each store, and the
same as JSON. Clients, servers and the PostgreSQL server share the machine's cores,
so more processes than cores measure contention, not scale-out.

    eval "$(sudo .ci/postgres.sh)"    # or pass --postgres postgresql://USER:PW@HOST:PORT/DB
    .venv/bin/python benchmarks/store_compare.py            # 5 s a cell
    .venv/bin/python benchmarks/store_compare.py --quick    # 2 s a cell

Without a PostgreSQL URL it measures SQLite alone and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from http_load import drive, free_port, post, seed, wait_up

BIN = Path(sys.executable).parent
SEEDED = 200
CASES = ("memory_store", "memory_fetch")


def with_schema(dsn: str, schema: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET client_min_messages TO warning")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def start(folder: Path, store: str | None, processes: int, log: Path) -> list[tuple[int, Any]]:
    """``processes`` servers on one store; returns (port, Popen) once each answers /healthz."""
    out = log.open("ab")
    started = []
    for _ in range(processes):
        port = free_port()
        command = [str(BIN / "memseal"), "serve", "--data", str(folder), "--port", str(port)]
        command += ["--embedder", "none"] + ([] if store is None else ["--store", store])
        started.append((port, subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)))
    for port, proc in started:
        wait_up(port, proc, "/healthz")
    return started


def stop(servers: list[tuple[int, Any]]) -> None:
    for _, proc in servers:
        proc.send_signal(signal.SIGTERM)
    for _, proc in servers:
        proc.wait(timeout=60)


async def measure(ports: list[int], clients: int, seconds: float, make: Any) -> dict[str, Any]:
    """``clients`` connections over ``ports`` (round robin), all driven for ``seconds``."""
    shares = [clients // len(ports) + (i < clients % len(ports)) for i in range(len(ports))]
    cells = await asyncio.gather(
        *(drive(port, share, seconds, make) for port, share in zip(ports, shares, strict=True))
    )
    # drive() counts every answer; only 200s are acknowledged, committed calls.
    acked = sum(c["requests"] - c["failures"] for c in cells)
    took = max(c["requests"] / c["rps"] for c in cells if c["rps"])
    return {
        "calls_per_s": acked / took,
        "calls": acked,
        "failures": sum(c["failures"] for c in cells),
        # Latencies are per process; the slowest process's percentiles are the ones a client
        # pinned to it would see.
        "p50_ms": max(c["p50_ms"] for c in cells),
        "p99_ms": max(c["p99_ms"] for c in cells),
    }


def configuration(
    name: str, store: str | None, processes: int, clients: int, seconds: float, tmp: Path
) -> list[dict[str, Any]]:
    folder = tmp / f"{name}-{processes}"
    servers = start(folder, store, processes, tmp / f"{name}-{processes}.log")
    try:
        ports = [port for port, _ in servers]
        made = subprocess.run(
            [str(BIN / "memseal"), "tokens", "add", "--data", str(folder), "--place", "team:bench"],
            capture_output=True,
            text=True,
            check=True,
        )
        token = made.stdout.strip()
        asyncio.run(seed(ports[0], token, SEEDED))
        fetch_body = json.dumps({"query": "dark mode", "mode": "exact", "limit": 5}).encode()
        fetch_head = post("/v1/tools/memory_fetch", token, fetch_body)

        def store_call(n: int, i: int) -> tuple[bytes, bytes]:
            body = json.dumps({"learning": {"text": f"bench {n}-{i}-{time.time_ns()}"}}).encode()
            return post("/v1/tools/memory_store", token, body), body

        makers = {"memory_store": store_call, "memory_fetch": lambda n, i: (fetch_head, fetch_body)}
        results = []
        for case in CASES:
            cell = asyncio.run(measure(ports, clients, seconds, makers[case]))
            cell.update(store=name, processes=processes, case=case)
            results.append(cell)
            print(
                f"  {name:<11}{processes:>3} proc  {case:<13}{cell['calls_per_s']:>8.0f} calls/s",
                file=sys.stderr,
                flush=True,
            )
        return results
    finally:
        stop(servers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 seconds a cell instead of 5")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients in all")
    parser.add_argument("--processes", default="1,4", help="server process counts")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("MEMSEAL_TEST_POSTGRES"),
        help="a PostgreSQL URL (default: $MEMSEAL_TEST_POSTGRES); a schema of its own is "
        "made in it and dropped afterwards",
    )
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 5.0
    levels = [int(p) for p in args.processes.split(",")]
    schema = f"bench_{secrets.token_hex(4)}"
    stores: dict[str, str | None] = {"sqlite": None}
    if args.postgres:
        stores["postgresql"] = with_schema(args.postgres, schema)
    else:
        print("no PostgreSQL URL (--postgres or MEMSEAL_TEST_POSTGRES): SQLite only")
    results: list[dict[str, Any]] = []
    # Other work on the machine moves these figures more than anything measured here.
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for processes in levels:
                for name, store in stores.items():
                    if store is not None:
                        drop_schema(args.postgres, schema)  # each configuration from empty
                    results += configuration(
                        name, store, processes, args.clients, seconds, Path(tmp)
                    )
        finally:
            if args.postgres:
                drop_schema(args.postgres, schema)
    print(
        f"{os.cpu_count()} CPUs (load average {load:.1f} at the start), {seconds:.0f} s a cell, "
        f"{args.clients} clients; clients, servers and PostgreSQL on one machine"
    )
    print(f"{'store':<12}{'procs':>6}  {'case':<14}{'calls/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for r in results:
        print(
            f"{r['store']:<12}{r['processes']:>6}  {r['case']:<14}{r['calls_per_s']:>9.0f}"
            f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
            + (f"  ({r['failures']} failed)" if r["failures"] else "")
        )
    rate = {(r["store"], r["processes"], r["case"]): r["calls_per_s"] for r in results}
    ratios: dict[str, float] = {}
    for case in CASES:
        for processes in levels:
            pg, lite = rate.get(("postgresql", processes, case)), rate[("sqlite", processes, case)]
            if pg is not None and lite:
                ratios[f"pg/sqlite {case} {processes} proc"] = pg / lite
        if len(levels) > 1:
            for name in stores:
                low, high = rate[(name, levels[0], case)], rate[(name, levels[-1], case)]
                if low:
                    ratios[f"{name} {case} {levels[-1]}/{levels[0]} proc"] = high / low
    for label, value in ratios.items():
        print(f"{label:<40}{value:>6.2f}x")
    print(json.dumps({"results": results, "ratios": ratios}))


if __name__ == "__main__":
    main()
