"""HTTP load: memory_store and memory_fetch through `memseal serve`, next to a bare FastAPI route.

Its own load generator (asyncio, raw HTTP/1.1 keep-alive on loopback, one
connection per client) drives, for 1, 8 and 64 concurrent clients:

* ``bare``: ``GET /ping`` of a FastAPI app with one route, on uvicorn (the floor);
* ``memory_store``: ``POST /v1/tools/memory_store``, a new memory each request
  (a signed ``memory_stored`` and a signed ``memory_tool_call`` entry, group commit);
* ``memory_fetch``: ``POST /v1/tools/memory_fetch`` (exact search over 500 memories,
  recorded as a signed tool call).

Both servers are subprocesses on 127.0.0.1 (the service with ``--embedder none``),
so the client and the server share the machine's cores. Prints requests/s,
p50 and p99 latency and the ratio to the bare route, and the same as JSON.

    .venv/bin/python benchmarks/http_load.py            # 5 s a cell
    .venv/bin/python benchmarks/http_load.py --quick    # 2 s a cell
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
BARE = textwrap.dedent(
    """
    import sys, uvicorn
    from fastapi import FastAPI
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict:
        return {"ok": True}

    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                ws="none", access_log=False)
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(port: int, proc: subprocess.Popen[bytes], path: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("server did not come up")


class Conn:
    """One keep-alive HTTP/1.1 connection: send a request, read one response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def post(path: str, token: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()


async def drive(port: int, clients: int, seconds: float, make: Any) -> dict[str, Any]:
    conns = [await Conn.open(port) for _ in range(clients)]
    latencies: list[float] = []
    failures = 0
    stop_at = time.perf_counter() + seconds

    async def worker(n: int, conn: Conn) -> None:
        nonlocal failures
        i = 0
        while time.perf_counter() < stop_at:
            head, body = make(n, i)
            i += 1
            t0 = time.perf_counter()
            status, _ = await conn.request(head, body)
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                failures += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(n, c) for n, c in enumerate(conns)))
    took = time.perf_counter() - started
    for c in conns:
        c.close()
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    return {
        "clients": clients,
        "requests": len(latencies),
        "rps": len(latencies) / took,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "failures": failures,
    }


async def seed(port: int, token: str, count: int) -> None:
    conn = await Conn.open(port)
    for i in range(count):
        body = json.dumps({"learning": {"text": f"seed memory {i} about dark mode and tea"}})
        status, text = await conn.request(
            post("/v1/tools/memory_store", token, body.encode()), body.encode()
        )
        assert status == 200, text
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 seconds a cell instead of 5")
    parser.add_argument("--clients", default="1,8,64")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 5.0
    levels = [int(c) for c in args.clients.split(",")]
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        try:
            bare_port, svc_port = free_port(), free_port()
            procs.append(subprocess.Popen([sys.executable, "-c", BARE, str(bare_port)], cwd=tmp))
            log = (Path(tmp) / "serve.log").open("wb")
            serve = [str(BIN / "memseal"), "serve", "--data", str(data)]
            serve += ["--port", str(svc_port), "--embedder", "none"]
            procs.append(subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT))
            wait_up(bare_port, procs[0], "/ping")
            wait_up(svc_port, procs[1], "/healthz")
            add = ["tokens", "add", "--data", str(data), "--place", "team:bench"]
            token = subprocess.run(
                [str(BIN / "memseal"), *add],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            asyncio.run(seed(svc_port, token, 500))
            ping = b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            fetch_body = json.dumps({"query": "dark mode", "mode": "exact", "limit": 5}).encode()
            fetch_head = post("/v1/tools/memory_fetch", token, fetch_body)

            def store(n: int, i: int) -> tuple[bytes, bytes]:
                body = json.dumps({"learning": {"text": f"bench {n}-{i}-{time.time_ns()}"}})
                raw = body.encode()
                return post("/v1/tools/memory_store", token, raw), raw

            cases = {
                "bare": (bare_port, lambda n, i: (ping, b"")),
                "memory_store": (svc_port, store),
                "memory_fetch": (svc_port, lambda n, i: (fetch_head, fetch_body)),
            }
            results: list[dict[str, Any]] = []
            for clients in levels:
                floor = None
                for name, (port, make) in cases.items():
                    cell = asyncio.run(drive(port, clients, seconds, make))
                    cell["case"] = name
                    if name == "bare":
                        floor = cell["rps"]
                    cell["ratio_to_bare"] = cell["rps"] / floor if floor else None
                    results.append(cell)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(timeout=60)
    print(f"{os.cpu_count()} CPUs, {seconds:.0f} s a cell, client and servers on one machine")
    print(f"{'case':<14}{'clients':>8}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'x bare':>8}")
    for r in results:
        print(
            f"{r['case']:<14}{r['clients']:>8}{r['rps']:>10.0f}{r['p50_ms']:>9.2f}"
            f"{r['p99_ms']:>9.2f}{r['ratio_to_bare']:>8.2f}"
            + (f"  ({r['failures']} failed)" if r["failures"] else "")
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
