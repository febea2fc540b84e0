"""memseal at the floor: one table of recorded calls beside their floors and a peer, one run.

Run: ``make bench`` (installs the ``bench`` extra), or
``.venv/bin/python benchmarks/bench.py [--quick] [--rounds R] [--calls N] [--json FILE]
[--postgres URL] [--plots DIR]``.

Everything runs in this one process on real files in one temporary folder, SQLite
with memseal's durability (WAL, ``synchronous=FULL``), embedder none, and the
contestants of each row run interleaved: every round runs each of them once, in
turn, and the table shows the median of the rounds. So a neighbour's load moves
all of a row's figures together and the ratio stays meaningful.

Rows (issue 17):

* **bare floor**: per call, canonical-encode the arguments and the result, blake3
  them, build, hash (SHA-256 leaf) and Ed25519-sign an entry, insert the entry, its
  payload, a memo row and one FTS5 row; the calls in flight (``--width``, 32) share
  one transaction, as memseal's group commit lets them;
* **memseal recorded memory_store**: ``run.call("memory_store", ...)`` in mode
  ``record``, ``--width`` calls in flight in one run (the memory's signed entry, the
  call's signed entry, the projection rows, the FTS row and the memo, committed
  before each answer);
* **eventsourcing on SQLite**: the ``eventsourcing`` library, one aggregate created
  and saved per call (one event, one transaction), its SQLite defaults, on
  ``--width`` threads (the same calls in flight as memseal: the target row) and on
  one (call after call); skipped,
  saying so, when the library is missing (``pip install -e '.[bench]'``);
* **memory_fetch** unrecorded (``MemoryTools.call``) and recorded (``run.call``),
  ``--width`` in flight, exact search over a seeded store;
* **sequential recorded call** p50 against the unrecorded call's p50 plus one
  durable commit of one row (its fsync) measured on its own;
* **replay hit** p50 (a resumed run, every step a checked memo) against the live
  recorded call it replaces;
* **full verify** (``Memory.verify``: every entry, signature, tree hash, checkpoint,
  then the memo, runs, redactions and mentions tables) entries/s against bare pynacl
  verify/s times the cores; beside it, bare pynacl verify on as many threads as cores,
  which is what the machine gave that round (a loaded host gives less than cores x one);
* **inclusion proof** on a log of ``--proof-size`` entries (10^6; its tree table filled
  in bulk, see ``bench_reads.py``): ms a proof and the stored hashes it reads, against
  log2(n), beside one bare ``SELECT`` of the same hashes;
* **exact memory_fetch at scale**: the unrecorded ``memory_fetch`` tool, mode exact,
  p95 over ``--fetch-memories`` memories (10^5), against a bare FTS5 query of the same
  ``engine_fts`` table in the same file;
* **HTTP recorded memory_store and memory_fetch**: ``--http-clients`` (64) keep-alive
  clients against a real ``memseal serve`` on SQLite (a uvicorn subprocess on loopback,
  a real token; ``bench_paths.py``), against the in-process recorded rows of the same
  round; beside each, the same tool in this process with a one-shot run a call (what
  the server does for each request), so the table shows the request path's share;
* **PostgreSQL recorded memory_store** against SQLite's, the same contestant on a fresh
  schema of ``--postgres`` (default ``$MEMSEAL_TEST_POSTGRES``), beside a bare
  ``SELECT 1`` round trip; without a URL it prints "not measured: no PostgreSQL";
* **the default embedder on store**: ``embed_fill.py``'s contestants (batched, and one
  model call per store) at 1, 8 and 32 stores in flight, when its packages are there.

After the table, a sweep of 1, 8, 32 and 64 calls in flight for the floor, the recorded
store and the peer (on as many threads) and a latency CDF of live recorded fetches and
their replay hits are drawn as PNGs into ``--plots`` (``docs/``; ``bench_plots.py``).

Every row prints its figures, the ratio, the target and whether this run met it; each
throughput row measured in this process also prints the CPU a call of the event loop's
thread, the writer thread and the rest of the process (``bench_cpu.py``).

``--quick`` is a smoke mode (tiny counts, one round: figures mean nothing); CI runs it
only to see that it works.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import blake3
import msgspec

# A sibling module: run as a script, this folder is on sys.path.
from bench_cpu import HEADS, CpuSplit
from bench_paths import (
    EMBED_WIDTHS,
    EmbedBench,
    HttpBench,
    default_embedder,
    postgres_memory,
    postgres_round_trip,
)
from bench_plots import write_plots
from bench_reads import FetchBench, ProofBench
from nacl.signing import SigningKey

import memseal
from memseal.engine import Learning, NewItem
from memseal.replay.runs.run import new_run_id
from memseal.tools import MemoryTools, ToolScope

DOCS = Path(__file__).resolve().parents[1] / "docs"
PLACE = "team:bench/agent:writer"
SCOPE = ToolScope.placed_at(PLACE)
_enc = msgspec.json.Encoder(order="deterministic")
_SYLLABLES = ["ka", "lo", "mi", "ru", "ten", "sa", "vo", "ne", "pi", "dra", "ul", "shi", "bo"]


# -- material -------------------------------------------------------------------------------


def vocabulary(rng: random.Random, size: int = 5_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


_VOCAB = vocabulary(random.Random(7))
_WEIGHTS = [1 / (rank + 1) for rank in range(len(_VOCAB))]  # Zipf: a few very common words


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(_VOCAB, _WEIGHTS, k=rng.randint(8, 24)))


def store_arguments(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"learning": {"text": f"{sentence(rng)} ({seed}-{i})"}} for i in range(n)]


def fetch_arguments(n: int) -> list[dict[str, Any]]:
    rng = random.Random(11)
    middle = _VOCAB[50:2_000]  # mid-frequency words: real searches
    return [
        {"query": " ".join(rng.sample(middle, rng.randint(1, 3))), "mode": "exact"}
        for _ in range(n)
    ]


def corpus(n: int) -> list[NewItem]:
    rng = random.Random(5)
    return [NewItem(content=Learning(text=sentence(rng)), namespace=PLACE) for _ in range(n)]


Call = Callable[[dict[str, Any]], Awaitable[Any]]


async def in_flight(call: Call, asked: list[dict[str, Any]], width: int) -> float:
    """Calls per second with ``width`` calls in flight."""
    pending = iter(asked)

    async def worker() -> None:
        for arguments in pending:
            await call(arguments)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(width)))
    return len(asked) / (time.perf_counter() - start)


async def one_by_one(call: Call, asked: list[dict[str, Any]]) -> list[float]:
    """Each call's latency in milliseconds, one call at a time."""
    samples = []
    for arguments in asked:
        began = time.perf_counter()
        await call(arguments)
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


# -- the floor ------------------------------------------------------------------------------


_FLOOR_SCHEMA = """
CREATE TABLE entries (seq INTEGER PRIMARY KEY, leaf BLOB, hash BLOB, sig BLOB);
CREATE TABLE payloads (seq INTEGER PRIMARY KEY, salt BLOB, data BLOB);
CREATE TABLE memos (run_id TEXT, step INTEGER, memo_key TEXT, seq INTEGER,
                    PRIMARY KEY (run_id, step)) WITHOUT ROWID;
CREATE VIRTUAL TABLE fts USING fts5(text, tokenize='porter unicode61 remove_diacritics 2');
"""


class Floor:
    """The bare signed-append loop of issue 17, on its own SQLite file."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.executescript(_FLOOR_SCHEMA)
        self.key = SigningKey.generate()
        self.prev = b"\x00" * 32
        self.seq = 0

    def run(self, asked: list[dict[str, Any]], width: int) -> float:
        conn, key = self.conn, self.key
        start = time.perf_counter()
        for base in range(0, len(asked), width):
            conn.execute("BEGIN IMMEDIATE")
            for arguments in asked[base : base + width]:
                seq = self.seq
                text = arguments["learning"]["text"]
                result = {"id": secrets.token_hex(16), "stored": True, "text": text}
                payload = _enc.encode({"arguments": arguments, "result": result})
                salt = secrets.token_bytes(16)
                body = {
                    "input_hash": blake3.blake3(_enc.encode(arguments)).hexdigest(),
                    "result_hash": blake3.blake3(_enc.encode(result)).hexdigest(),
                    "step": seq,
                }
                leaf = _enc.encode(
                    {
                        "v": 1,
                        "seq": seq,
                        "prev": self.prev.hex(),
                        "body": body,
                        "payload_hash": blake3.blake3(salt + payload).hexdigest(),
                    }
                )
                digest = hashlib.sha256(b"\x00" + leaf).digest()
                sig = key.sign(b"memseal/entry/v1\x00" + digest).signature
                conn.execute("INSERT INTO entries VALUES (?, ?, ?, ?)", (seq, leaf, digest, sig))
                conn.execute("INSERT INTO payloads VALUES (?, ?, ?)", (seq, salt, payload))
                memo = blake3.blake3(_enc.encode(["memseal/memo/v1", "floor", seq])).hexdigest()
                conn.execute("INSERT INTO memos VALUES (?, ?, ?, ?)", ("floor", seq, memo, seq))
                conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (seq, text))
                self.prev, self.seq = digest, seq + 1
            conn.execute("COMMIT")
        return len(asked) / (time.perf_counter() - start)

    def commit_p50(self, n: int) -> float:
        """One durable commit of one small row, p50 in ms: the fsync a recorded call adds."""
        self.conn.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
        samples = []
        for i in range(n):
            began = time.perf_counter()
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT INTO probe VALUES (?)", (i,))
            self.conn.execute("COMMIT")
            samples.append((time.perf_counter() - began) * 1000)
        return p50(samples)


def bare_verify_rate(n: int, threads: int = 1) -> float:
    """Bare pynacl verify/s on ``threads`` threads (libsodium lets go of the GIL)."""
    key = SigningKey.generate()
    verify = key.verify_key
    signed = [key.sign(secrets.token_bytes(49)) for _ in range(n)]

    def check(part: list[Any]) -> None:
        for s in part:
            verify.verify(s.message, s.signature)

    start = time.perf_counter()
    if threads == 1:
        check(signed)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(check, [signed[i::threads] for i in range(threads)]))
    return n / (time.perf_counter() - start)


# -- the peer -------------------------------------------------------------------------------


def make_peer(path: Path) -> Callable[..., float] | None:
    """The eventsourcing library on SQLite (its defaults), or None when it is not installed.

    The peer is synchronous: its calls in flight are ``threads`` threads. The table's
    target row runs it on as many threads as memseal has calls in flight, so both have
    the same work outstanding; a second row runs it on one, call after call, as its
    simplest use would.
    """
    try:
        from eventsourcing.application import Application
        from eventsourcing.domain import Aggregate, event
    except ImportError:
        return None

    class Note(Aggregate):  # type: ignore[misc]
        @event("Stored")  # type: ignore[misc]
        def __init__(self, text: str) -> None:
            self.text = text

    class Notes(Application):  # type: ignore[misc]
        def store(self, text: str) -> Any:
            note = Note(text)
            self.save(note)
            return note.id

    app = Notes(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})

    def run(asked: list[dict[str, Any]], threads: int = 1) -> float:
        start = time.perf_counter()
        if threads == 1:
            for arguments in asked:
                app.store(arguments["learning"]["text"])
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(app.store, (a["learning"]["text"] for a in asked)))
        return len(asked) / (time.perf_counter() - start)

    return run


# -- memseal --------------------------------------------------------------------------------


class Ours:
    """memseal's contestants, on one data folder kept open across the rounds."""

    def __init__(self, memory: memseal.Memory, width: int) -> None:
        self.memory = memory
        self.width = width
        self.tools = MemoryTools(memory.engine, SCOPE)
        self.runs = 0

    def _name(self, what: str) -> str:
        self.runs += 1
        return f"bench-{what}-{self.runs}"

    async def store(self, asked: list[dict[str, Any]]) -> float:
        async with self.memory.run(self._name("store"), SCOPE, mode="record") as run:
            return await in_flight(lambda a: run.call("memory_store", a), asked, self.width)

    async def fetch_unrecorded(self, asked: list[dict[str, Any]]) -> float:
        return await in_flight(lambda a: self.tools.call("memory_fetch", a), asked, self.width)

    async def fetch_recorded(self, asked: list[dict[str, Any]]) -> float:
        async with self.memory.run(self._name("fetch"), SCOPE, mode="record") as run:
            return await in_flight(lambda a: run.call("memory_fetch", a), asked, self.width)

    async def sequential(self, asked: list[dict[str, Any]]) -> tuple[float, float, float]:
        """p50 ms of: the unrecorded call, the recorded (live) call, its replay hit."""
        direct = p50(await one_by_one(lambda a: self.tools.call("memory_fetch", a), asked))
        name = self._name("seq")
        async with self.memory.run(name, SCOPE, mode="record") as run:
            live = p50(await one_by_one(lambda a: run.call("memory_fetch", a), asked))
        async with self.memory.run(name, SCOPE, mode="resume") as run:
            hit = p50(await one_by_one(lambda a: run.call("memory_fetch", a), asked))
        return direct, live, hit

    async def verify(self) -> float:
        size = (await self.memory.ledger.head()).size
        start = time.perf_counter()
        await self.memory.verify()
        return size / (time.perf_counter() - start)


# -- the table ------------------------------------------------------------------------------


class Table:
    """The rows, each with its per-call CPU split beside it when ``cpu`` names its window."""

    def __init__(self, split: CpuSplit) -> None:
        self.split = split
        self.rows: list[tuple[str, ...]] = []

    def add(
        self,
        contestant: str,
        figure: str,
        ratio: str = "",
        target: str = "",
        ok: bool | None = None,
        cpu: str | None = None,
    ) -> None:
        met = "" if ok is None else ("met" if ok else "not met")
        split = ("", "", "") if cpu is None else self.split.cells(cpu)
        self.rows.append((contestant, figure, ratio, target, met, *split))

    def print(self) -> None:
        heads = ("contestant", "figure", "ratio", "target", "met", *HEADS)
        widths = [max(len(r[i]) for r in [heads, *self.rows]) for i in range(len(heads))]
        print("| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in self.rows:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


# -- the path rows and the plots (bench_paths.py, bench_plots.py) ---------------------------

SWEEP_WIDTHS = (1, 8, 32, 64)


async def recorded_stores(
    memory: memseal.Memory, name: str, asked: list[dict[str, Any]], width: int
) -> float:
    """Recorded ``memory_store`` calls/s, ``width`` in flight in one new run ``name``."""
    async with memory.run(name, SCOPE, mode="record") as run:
        return await in_flight(lambda a: run.call("memory_store", a), asked, width)


async def oneshot_calls(
    memory: memseal.Memory, tool: str, asked: list[dict[str, Any]], width: int
) -> float:
    """Calls/s of ``tool``, each in a fresh one-shot recorded run, ``width`` in flight.

    What ``memseal serve`` does for each request without a named run
    (``Service.call_tool``), in this process: the HTTP rows' work without HTTP.
    """

    async def call(arguments: dict[str, Any]) -> Any:
        run = memory.run(new_run_id(), SCOPE, mode="record", oneshot=True)
        try:
            return await run.call(tool, arguments)
        finally:
            await run.close(check=False)

    return await in_flight(call, asked, width)


async def latency_samples(
    memory: memseal.Memory, asked: list[dict[str, Any]]
) -> dict[str, list[float]]:
    """Latencies (ms) of live recorded ``memory_fetch`` calls, then of their replay hits."""
    name = f"bench-cdf-{secrets.token_hex(4)}"
    async with memory.run(name, SCOPE, mode="record") as run:
        live = await one_by_one(lambda a: run.call("memory_fetch", a), asked)
    async with memory.run(name, SCOPE, mode="resume") as run:
        hit = await one_by_one(lambda a: run.call("memory_fetch", a), asked)
    return {"live recorded memory_fetch": live, "replay hit of the same call": hit}


class Paths:
    """The HTTP, PostgreSQL and default-embedder rows, and the in-flight sweep of the plots.

    Each contestant runs once a round beside the in-process rows of the same round;
    ``rows`` adds them to the table from the round medians.
    """

    def __init__(
        self,
        where: Path,
        args: argparse.Namespace,
        stack: contextlib.AsyncExitStack,
        cpu: CpuSplit,
    ) -> None:
        self.where, self.args, self.stack, self.cpu = where, args, stack, cpu
        self.http = HttpBench(where / "http", PLACE, args.http_clients)
        self.pg: Ours | None = None
        self.embed: EmbedBench | None = None
        self.embedder_id = ""
        self.sweeps = 0

    async def start(self, seeded: list[NewItem]) -> None:
        await self.http.seed(seeded)
        self.stack.callback(self.http.stop)
        self.http.launch()
        if self.args.postgres:
            memory = await self.stack.enter_async_context(
                postgres_memory(self.where / "pg", self.args.postgres, seeded)
            )
            self.pg = Ours(memory, self.args.width)
        embedder = default_embedder()
        if embedder is not None:
            self.embed = EmbedBench(self.where / "embed", embedder, self.args.embed_stores)
            self.embedder_id = str(embedder.id).split("/")[0]  # the model's name

    async def round(
        self,
        r: int,
        floor: Floor,
        memory: memseal.Memory,
        peer: Callable[..., float] | None,
        stores: list[dict[str, Any]],
        fetches: list[dict[str, Any]],
    ) -> dict[str, float]:
        clients, cpu = self.args.http_clients, self.cpu
        out = {"http_store": await self.http.run("memory_store", stores)}
        with cpu.window("oneshot_store", len(stores)):
            out["oneshot_store"] = await oneshot_calls(memory, "memory_store", stores, clients)
        out["http_fetch"] = await self.http.run("memory_fetch", fetches)
        with cpu.window("oneshot_fetch", len(fetches)):
            out["oneshot_fetch"] = await oneshot_calls(memory, "memory_fetch", fetches, clients)
        if self.pg is not None:
            with cpu.window("pg_store", len(stores)):
                out["pg_store"] = await self.pg.store(stores)
            out["pg_round_trip_ms"] = postgres_round_trip(self.args.postgres, 200)
        if self.embed is not None:
            out.update(await self.embed.round())
        # The sweep of the throughput plot: each width, each contestant in turn, new texts.
        for width in SWEEP_WIDTHS:
            asked = store_arguments(self.args.sweep_calls, seed=10_000 + 100 * r + width)
            out[f"sweep_floor_{width}"] = floor.run(asked, width)
            self.sweeps += 1
            name = f"bench-sweep-{self.sweeps}"
            out[f"sweep_store_{width}"] = await recorded_stores(memory, name, asked, width)
            if peer is not None:
                out[f"sweep_peer_{width}"] = peer(asked, threads=width)
        return out

    def rows(self, t: Table, m: dict[str, float]) -> None:
        width, clients = self.args.width, self.args.http_clients
        for tool, key, base in (
            ("memory_store", "http_store", "store"),
            ("memory_fetch", "http_fetch", "fetch_recorded"),
        ):
            ratio = m[key] / m[base]
            t.add(
                f"HTTP recorded {tool} ({clients} clients, memseal serve, SQLite)",
                f"{m[key]:,.0f} calls/s",
                f"{ratio:.2f} of in-process ({width} in flight)",
                ">= 0.5 of in-process",
                ok=ratio >= 0.5,
            )
            oneshot = m[f"oneshot_{key.removeprefix('http_')}"]
            t.add(
                f"  in-process {tool}, a one-shot run each ({clients} in flight)",
                f"{oneshot:,.0f} calls/s",
                f"HTTP {m[key] / oneshot:.2f} of it",
                cpu=f"oneshot_{key.removeprefix('http_')}",
            )
        if self.http.failures:
            t.add("  HTTP answers not 200 (not counted)", f"{self.http.failures}")
        if self.pg is None:
            t.add(
                f"PostgreSQL recorded memory_store ({width} in flight)",
                "not measured: no PostgreSQL (--postgres URL or MEMSEAL_TEST_POSTGRES)",
            )
        else:
            ratio = m["pg_store"] / m["store"]
            t.add(
                f"PostgreSQL recorded memory_store ({width} in flight)",
                f"{m['pg_store']:,.0f} calls/s",
                f"{ratio:.2f} of SQLite",
                ">= 0.6 of SQLite",
                ok=ratio >= 0.6,
                cpu="pg_store",
            )
            t.add("  PostgreSQL round trip (SELECT 1), p50", f"{m['pg_round_trip_ms']:.3f} ms")
        if self.embed is None:
            t.add(
                "default embedder on memory store",
                "not measured: the model's packages are not installed",
            )
            return
        for w in EMBED_WIDTHS:
            batched, single = m[f"embed_batched_{w}"], m[f"embed_single_{w}"]
            t.add(
                f"default embedder, store, {w} in flight, batched "
                f"(p50 {m[f'embed_batched_{w}_p50']:.1f} ms)",
                f"{batched:,.0f} stores/s",
                f"{batched / single:.2f}x one call per store",
                "report" if w == 1 else "> 1x: batched into shared calls",
                ok=None if w == 1 else batched > single,
            )
            t.add(
                f"  one model call per store, {w} in flight "
                f"(p50 {m[f'embed_single_{w}_p50']:.1f} ms)",
                f"{single:,.0f} stores/s",
            )

    def sweep_table(self, m: dict[str, float], peer: bool) -> dict[str, list[float]]:
        names = {"floor": "bare floor", "store": "memseal recorded memory_store"}
        if peer:
            names["peer"] = "eventsourcing on SQLite (threads)"
        curves = {
            label: [m[f"sweep_{key}_{w}"] for w in SWEEP_WIDTHS] for key, label in names.items()
        }
        print(f"\ncalls/s by calls in flight ({self.args.sweep_calls} calls a cell):")
        print("| contestant | " + " | ".join(str(w) for w in SWEEP_WIDTHS) + " |")
        print("|---|" + "---|" * len(SWEEP_WIDTHS))
        for label, rates in curves.items():
            print(f"| {label} | " + " | ".join(f"{v:,.0f}" for v in rates) + " |")
        return curves

    def described(self) -> str:
        pg = "none"
        if self.args.postgres:
            at = urlsplit(self.args.postgres)
            pg = f"{at.hostname}:{at.port}"
        embedder = self.embedder_id or "not installed"
        return (
            f"HTTP: memseal serve (one uvicorn process) on SQLite, {self.args.http_clients} "
            f"clients on loopback; PostgreSQL: {pg}; default embedder: {embedder}, "
            f"{self.args.embed_stores} stores a cell"
        )


def sequential_rows(t: Table, m: dict[str, float]) -> None:
    """Issue 41's one-call-at-a-time row: the recorded store at 1 in flight (the sweep's
    cell) against the peer on one thread, with the bare floor at 1 in flight beside it.

    The floor is one signed append and one durable commit a call; nothing that signs
    and commits each call before answering it runs faster than that row, so the floor's
    ratio to the peer is the ceiling of the target's."""
    if "sweep_store_1" not in m or "peer_1" not in m:
        return
    seq_ratio = m["sweep_store_1"] / m["peer_1"]
    t.add(
        "sequential recorded memory_store (1 in flight) vs eventsourcing (one thread)",
        f"{m['sweep_store_1']:,.0f} calls/s",
        f"{seq_ratio:.2f}x",
        ">= 1x",
        ok=seq_ratio >= 1,
        cpu=None,
    )
    t.add(
        "  bound: bare floor, 1 in flight (one signed append, one commit a call)",
        f"{m['sweep_floor_1']:,.0f} calls/s",
        f"{m['sweep_floor_1'] / m['peer_1']:.2f}x the peer",
        cpu=None,
    )


async def bench(where: Path, args: argparse.Namespace) -> dict[str, Any]:
    n, width, rounds = args.calls, args.width, args.rounds
    floor = Floor(where / "floor.db")
    peer = make_peer(where / "peer.db")
    figures: dict[str, list[float]] = {}
    cpu = CpuSplit()

    def keep(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    proofs = ProofBench(where / "proof", args.proof_size)
    await proofs.build()
    rng = random.Random(5)
    texts = [sentence(rng) for _ in range(args.fetch_memories)]
    at_scale = FetchBench(where / "scale", texts, PLACE)
    await at_scale.build()
    questions = [a["query"] for a in fetch_arguments(args.sequential)]
    async with (
        contextlib.AsyncExitStack() as stack,
        memseal.open(where / "data", embedder=None, checkpoint_interval=None) as memory,
    ):
        ours = Ours(memory, width)
        seeded = corpus(args.memories)
        for base in range(0, len(seeded), 1_000):
            await memory.engine.store_many(seeded[base : base + 1_000])
        paths = Paths(where, args, stack, cpu)
        await paths.start(seeded)
        fetches = fetch_arguments(n)
        await ours.fetch_unrecorded(fetches)  # warm the page cache and the query path
        for r in range(rounds):
            stores = store_arguments(n, seed=r)
            # Interleaved: each contestant once per round, in turn.
            # Each throughput window also takes its threads' CPU (bench_cpu.py).
            with cpu.window("floor", n):
                keep("floor", floor.run(stores, width))
            with cpu.window("store", n):
                keep("store", await ours.store(stores))
            if peer is not None:
                # At memseal's calls in flight (its threads), and call after call.
                with cpu.window("peer", n):
                    keep("peer", peer(store_arguments(n, seed=1_000 + r), threads=width))
                with cpu.window("peer_1", n):
                    keep("peer_1", peer(store_arguments(n, seed=2_000 + r)))
            with cpu.window("fetch_unrecorded", len(fetches)):
                keep("fetch_unrecorded", await ours.fetch_unrecorded(fetches))
            with cpu.window("fetch_recorded", len(fetches)):
                keep("fetch_recorded", await ours.fetch_recorded(fetches))
            direct, live, hit = await ours.sequential(fetches[: args.sequential])
            keep("seq_direct", direct)
            keep("seq_live", live)
            keep("seq_hit", hit)
            keep("fsync", floor.commit_p50(args.sequential))
            keep("verify", await ours.verify())
            keep("bare_verify", bare_verify_rate(args.verify_sigs))
            keep("bare_verify_threads", bare_verify_rate(args.verify_sigs, os.cpu_count() or 1))
            for name, value in (await proofs.round(args.proofs)).items():
                keep(name, value)
            for name, value in (await at_scale.round(questions)).items():
                keep(name, value)
            for name, value in (await paths.round(r, floor, memory, peer, stores, fetches)).items():
                keep(name, value)
        latencies = await latency_samples(memory, fetches[: args.sequential])
        entries = (await memory.ledger.head()).size
    m = {name: statistics.median(values) for name, values in figures.items()}
    cores = os.cpu_count() or 1

    t = Table(cpu)
    t.add(
        f"bare floor ({width} in flight, one txn)",
        f"{m['floor']:,.0f} calls/s",
        "1.00",
        cpu="floor",
    )
    store_floor = m["store"] / m["floor"]
    t.add(
        f"memseal recorded memory_store ({width} in flight)",
        f"{m['store']:,.0f} calls/s",
        f"{store_floor:.2f} of floor",
        ">= 0.4 of floor",
        ok=store_floor >= 0.4,
        cpu="store",
    )
    if "peer" in m:
        t.add(
            f"eventsourcing on SQLite (one event a call, {width} threads)",
            f"{m['peer']:,.0f} calls/s",
            cpu="peer",
        )
        t.add(
            "eventsourcing on SQLite (one event a call, one thread)",
            f"{m['peer_1']:,.0f} calls/s",
            f"memseal {m['store'] / m['peer_1']:.2f}x",
            cpu="peer_1",
        )
        vs_peer = m["store"] / m["peer"]
        t.add(
            f"memseal recorded memory_store vs eventsourcing ({width} in flight each)",
            "",
            f"{vs_peer:.2f}x",
            ">= 3x",
            ok=vs_peer >= 3,
        )
        sequential_rows(t, m)
    else:
        t.add("eventsourcing on SQLite", "skipped: not installed (the bench extra)")
    t.add(
        f"memseal unrecorded memory_fetch ({width} in flight)",
        f"{m['fetch_unrecorded']:,.0f}/s",
        cpu="fetch_unrecorded",
    )
    fetch_ratio = m["fetch_recorded"] / m["fetch_unrecorded"]
    t.add(
        f"memseal recorded memory_fetch ({width} in flight)",
        f"{m['fetch_recorded']:,.0f} calls/s",
        f"{fetch_ratio:.2f} of unrecorded",
        ">= 0.7 of unrecorded",
        ok=fetch_ratio >= 0.7,
        cpu="fetch_recorded",
    )
    bound = m["seq_direct"] + m["fsync"]
    t.add(
        "sequential recorded memory_fetch, p50",
        f"{m['seq_live']:.3f} ms",
        f"{m['seq_live'] / bound:.2f} of bound",
        "<= unrecorded + one fsync",
        ok=m["seq_live"] <= bound,
    )
    t.add(
        "  bound: unrecorded p50 + one commit's fsync p50",
        f"{m['seq_direct']:.3f} + {m['fsync']:.3f} ms",
    )
    hit_ratio = m["seq_hit"] / m["seq_live"]
    t.add(
        "replay hit, p50",
        f"{m['seq_hit']:.3f} ms",
        f"{hit_ratio:.2f} of live",
        "<= 0.5 of live",
        ok=hit_ratio <= 0.5,
    )
    ceiling = m["bare_verify"] * cores
    verify_ratio = m["verify"] / ceiling
    t.add(
        f"full verify ({entries:,} entries)",
        f"{m['verify']:,.0f} entries/s",
        f"{verify_ratio:.2f} of bare x {cores}",
        ">= 0.8 of bare x cores",
        ok=verify_ratio >= 0.8,
    )
    t.add(f"  bare pynacl verify x {cores} cores", f"{ceiling:,.0f} /s")
    given = m["bare_verify_threads"]
    t.add(
        f"  bare pynacl verify on {cores} threads (what the host gave)",
        f"{given:,.0f} /s",
        f"full verify {m['verify'] / given:.2f} of it",
    )
    size, hashes, log_n = args.proof_size, m["proof_hashes"], math.log2(args.proof_size)
    t.add(
        f"inclusion proof, {size:,} entries (p50; p95 {m['proof_p95_ms']:.3f} ms)",
        f"{m['proof_ms']:.3f} ms",
        f"{m['proof_ms'] / 10:.3f} of 10 ms",
        "< 10 ms",
        ok=m["proof_ms"] < 10,
    )
    t.add(
        "  stored hashes one proof reads (leaf, root, path)",
        f"{hashes:.0f} in {m['proof_reads']:.0f} reads",
        f"{hashes / log_n:.2f} x log2(n) = {log_n:.1f}",
        "O(log n): <= 2 log2(n) + 2",
        ok=hashes <= 2 * math.ceil(log_n) + 2,
    )
    t.add("  bare SELECT of the same hashes, p50", f"{m['proof_bare_ms']:.3f} ms")
    scale_ratio = m["fetch_scale_p95"] / m["bare_fts_p95"]
    memories = args.fetch_memories
    t.add(
        f"memory_fetch exact, {memories:,} memories, p95 (p50 {m['fetch_scale_p50']:.2f} ms)",
        f"{m['fetch_scale_p95']:.2f} ms",
        f"{scale_ratio:.2f}x bare FTS5",
        "<= 3x bare FTS5 (p95)",
        ok=scale_ratio <= 3,
    )
    t.add(
        f"  bare FTS5 query, same table, p95 (p50 {m['bare_fts_p50']:.2f} ms)",
        f"{m['bare_fts_p95']:.2f} ms",
    )
    paths.rows(t, m)
    load = os.getloadavg()[0]
    print(
        f"memseal bench ({'quick' if args.quick else 'full'}): {cores} CPU(s), load "
        f"{load:.1f}; SQLite {sqlite3.sqlite_version}, WAL, synchronous=FULL, embedder none; "
        f"{n} calls a cell, {args.memories:,} memories seeded, median of {rounds} "
        f"interleaved round(s); proof log built in {proofs.build_s:.1f} s, "
        f"{args.fetch_memories:,} memories stored in {at_scale.fill_s:.1f} s"
    )
    if peer is None:
        print("eventsourcing is not installed: its row is skipped (pip install -e '.[bench]')")
    print(paths.described())
    print(cpu.note)
    t.print()
    curves = paths.sweep_table(m, peer is not None)
    title = f"{cores} CPU(s), load {load:.1f}, SQLite WAL synchronous=FULL, embedder none"
    plots = write_plots(args.plots, SWEEP_WIDTHS, curves, latencies, title)
    if isinstance(plots, str):
        print(plots)
    else:
        print("plots: " + ", ".join(str(p) for p in plots))
    return {
        "medians": m,
        "rounds": figures,
        "cores": cores,
        "entries": entries,
        # Per row, microseconds of CPU a call by thread; {} where the platform has no clock.
        "cpu_us_per_call": cpu.medians(),
        "cpu_rounds": cpu.rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: tiny counts, 1 round")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3)")
    parser.add_argument("--calls", type=int, default=None, help="calls a cell (2000)")
    parser.add_argument("--width", type=int, default=32, help="calls in flight (32)")
    parser.add_argument("--memories", type=int, default=None, help="memories seeded (2000)")
    parser.add_argument("--proof-size", type=int, default=None, help="proof log size (10^6)")
    parser.add_argument(
        "--fetch-memories", type=int, default=None, help="memories of the fetch-at-scale row (10^5)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("MEMSEAL_TEST_POSTGRES"),
        help="a PostgreSQL URL for the PostgreSQL row (default: $MEMSEAL_TEST_POSTGRES); a "
        "schema of its own is made in it and dropped afterwards",
    )
    parser.add_argument("--http-clients", type=int, default=64, help="HTTP clients (64)")
    parser.add_argument(
        "--embed-stores", type=int, default=None, help="stores a cell, embedder rows (200)"
    )
    parser.add_argument(
        "--sweep-calls", type=int, default=None, help="calls a cell of the plot's sweep (500)"
    )
    parser.add_argument(
        "--plots", type=Path, default=DOCS, help="folder the PNG plots go to (docs/)"
    )
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.calls = args.calls or (64 if args.quick else 2_000)
    args.memories = args.memories or (100 if args.quick else 2_000)
    args.sequential = min(args.calls, 300)
    args.verify_sigs = 500 if args.quick else 20_000
    args.proof_size = args.proof_size or (2_000 if args.quick else 1_000_000)
    args.fetch_memories = args.fetch_memories or (300 if args.quick else 100_000)
    args.proofs = 20 if args.quick else 300
    args.embed_stores = args.embed_stores or (8 if args.quick else 200)
    args.sweep_calls = args.sweep_calls or min(args.calls, 500)
    with tempfile.TemporaryDirectory() as tmp:
        out = asyncio.run(bench(Path(tmp), args))
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
