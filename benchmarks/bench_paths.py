"""The path rows of ``benchmarks/bench.py``: over HTTP, on PostgreSQL, with the default embedder.

Imported by ``bench.py`` (run that); each contestant keeps its own data folder (or
PostgreSQL schema) so the in-process rows' folder and figures stay as they were, and
each runs once a round, interleaved with its in-process baseline.

* **HTTP**: ``memseal serve`` on SQLite (a uvicorn subprocess on 127.0.0.1, the
  service with ``--embedder none``, a real token made by ``memseal tokens add``)
  over a folder seeded with the same memories as the in-process one. The load
  generator of ``http_load.py`` (raw HTTP/1.1 keep-alive, one connection per
  client) sends a fixed number of ``POST /v1/tools/memory_store`` and
  ``POST /v1/tools/memory_fetch`` requests (the same arguments as the in-process
  rows) from ``--http-clients`` clients (64). Each request is a one-shot recorded
  run: signed and committed before its 200. Only 200s are counted.
* **PostgreSQL**: ``memseal.open(store=URL)`` on a fresh schema of ``--postgres``
  (default ``$MEMSEAL_TEST_POSTGRES``), seeded like the SQLite folder, driven by the
  same recorded-store contestant; the schema is dropped at the end. Without a URL
  the row says so and no figure is made.
* **default embedder**: ``embed_fill.py``'s two contestants (batched, the engine as
  it ships, and one model call per store) at 1, 8 and 32 stores in flight, each
  round on new folders; skipped, saying so, when the model's packages are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import IO, Any

import msgspec

# Sibling modules: run as a script, this folder is on sys.path.
from embed_fill import corpus as embed_corpus
from embed_fill import store_cell
from http_load import Conn, free_port, post, wait_up
from store_compare import drop_schema, with_schema

import memseal
from memseal.engine import NewItem

BIN = Path(sys.executable).parent
EMBED_WIDTHS = (1, 8, 32)
EMBED_CONTESTANTS = ("one call per store", "batched")


async def seed(memory: memseal.Memory, items: Sequence[NewItem]) -> None:
    for base in range(0, len(items), 1_000):
        await memory.engine.store_many(items[base : base + 1_000])


# -- HTTP -----------------------------------------------------------------------------------


class HttpBench:
    """``memseal serve`` on one SQLite folder, driven by ``clients`` keep-alive connections."""

    def __init__(self, folder: Path, place: str, clients: int) -> None:
        self.folder, self.place, self.clients = folder, place, clients
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None
        self.port = 0
        self.token = ""
        self.failures = 0
        self.first_failure = ""

    async def seed(self, items: Sequence[NewItem]) -> None:
        """The folder, made and seeded in this process before the server opens it."""
        async with memseal.open(
            self.folder, store="sqlite", embedder=None, checkpoint_interval=None
        ) as memory:
            await seed(memory, items)

    def launch(self) -> None:
        """A token for ``place``, then ``memseal serve`` on the folder, once it answers."""
        # The folder's own SQLite file, whatever the environment names as the store.
        env = {k: v for k, v in os.environ.items() if k != "MEMSEAL_STORE"}
        memseal_bin = str(BIN / "memseal")
        made = subprocess.run(
            [memseal_bin, "tokens", "add", "--data", str(self.folder), "--place", self.place],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        self.token = made.stdout.strip()
        self.port = free_port()
        command = [memseal_bin, "serve", "--data", str(self.folder), "--port", str(self.port)]
        self.log = (self.folder.parent / "serve.log").open("ab")
        self.proc = subprocess.Popen(
            [*command, "--embedder", "none"], stdout=self.log, stderr=subprocess.STDOUT, env=env
        )
        wait_up(self.port, self.proc, "/healthz")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        if self.log is not None:
            self.log.close()

    async def run(self, tool: str, asked: list[dict[str, Any]]) -> float:
        """Acknowledged (200) calls/s of ``tool`` with ``clients`` connections in flight."""
        requests = []
        for arguments in asked:
            body = msgspec.json.encode(arguments)
            requests.append((post(f"/v1/tools/{tool}", self.token, body), body))
        conns = [await Conn.open(self.port) for _ in range(self.clients)]
        pending = iter(requests)
        acked = 0

        async def worker(conn: Conn) -> None:
            nonlocal acked
            for head, body in pending:
                status, answer = await conn.request(head, body)
                if status == 200:
                    acked += 1
                else:
                    self.failures += 1
                    self.first_failure = self.first_failure or f"{status} {answer[:200]!r}"

        start = time.perf_counter()
        try:
            await asyncio.gather(*(worker(c) for c in conns))
        finally:
            for c in conns:
                c.close()
        return acked / (time.perf_counter() - start)


# -- PostgreSQL -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def postgres_memory(
    folder: Path, url: str, items: Sequence[NewItem]
) -> AsyncIterator[memseal.Memory]:
    """A memory whose log is on a fresh schema of ``url``, seeded; the schema dropped after."""
    schema = f"bench_{secrets.token_hex(4)}"
    drop_schema(url, schema)
    try:
        async with memseal.open(
            folder, store=with_schema(url, schema), embedder=None, checkpoint_interval=None
        ) as memory:
            await seed(memory, items)
            yield memory
    finally:
        drop_schema(url, schema)


def postgres_round_trip(url: str, n: int) -> float:
    """p50 ms of one ``SELECT 1`` on a connection to ``url``: what each statement waits for."""
    import psycopg

    samples = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(n):
            began = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


# -- the default embedder -------------------------------------------------------------------


def default_embedder() -> Any | None:
    """The default MiniLM embedder, or None when its packages (or model files) are missing."""
    try:
        from memseal.engine.embedders import MiniLMEmbedder
        from memseal.ledger.errors import Unsupported

        try:
            return MiniLMEmbedder()
        except Unsupported:
            return None
    except ImportError:
        return None


class EmbedBench:
    """Stores with the default embedder, batched and one model call per store, per width."""

    def __init__(self, where: Path, embedder: Any, stores: int) -> None:
        self.where, self.embedder, self.stores = where, embedder, stores
        self.seed = 0

    async def round(self) -> dict[str, float]:
        """One interleaved round: ``embed_{batched|single}_{width}`` stores/s, and p50 ms."""
        out: dict[str, float] = {}
        for width in EMBED_WIDTHS:
            for name in EMBED_CONTESTANTS:
                self.seed += 1
                folder = self.where / f"embed-{self.seed}"
                texts = embed_corpus(self.stores, self.seed)
                rate, p50_ms = await store_cell(folder, self.embedder, name, texts, width)
                short = "batched" if name == "batched" else "single"
                out[f"embed_{short}_{width}"] = rate
                out[f"embed_{short}_{width}_p50"] = p50_ms
        return out
