"""Issue 41's items 1 and 3 measured before they are built: the writer in a process of its own.

Run: ``.venv/bin/python benchmarks/writer_ceiling.py [--quick] [--rounds R] [--calls N]
[--seq-calls N] [--width W] [--group G]``.

The split this measures. The main process runs the real API: ``run.call("memory_store",
...)`` in mode ``record``, every step of the event loop's side as it is today (argument
decoding, the store's plan, the input hash, the run's bookkeeping). Where the call hands
its command to the writer, the command runs at once on the event loop against
:class:`DataTxn` instead of on the writer thread against a SQLite transaction: the real
command's own Python (the projection's rows, the tool call's draft, the memo row) fills
the group's held rows exactly as the group-native writer would (``ledger/_txn.py``, whose
``LogTxn`` it subclasses), but nothing is executed and nothing is signed. Its reads are
answered as the writer would answer them for a new memory (the lease holder, the
projection's saved state, "absent" for the dedupe, which is checked once a group, as
PostgreSQL does), and are shipped to be run. ``append`` gives the next seq and the time
and keeps the draft. That is item 1, commands as data.

A group is sealed at ``--group`` commands (half the calls in flight by default: see
:class:`SplitWriter`) or, when the writer process is idle, at the end of the loop's turn;
one group at a time goes to the writer process as one msgspec message over a pipe: its
statements and parameters in order, and the entry drafts with their seqs and times.
The writer process (this file, ``--child``) runs memseal's own write half on them:
``BEGIN IMMEDIATE``, the head and signing-key reads (``SqliteTxn``), the shipped reads
and multi-row INSERTs, then each draft through ``SqliteTxn.append`` (the entry's
canonical bytes, its leaf hash, the Ed25519 signature, the Merkle edge read once a group
and grown), the entries, tree, payloads and mentions rows as one INSERT a table, the
checkpoint read and ``COMMIT`` with WAL and ``synchronous=FULL`` (the writer's own
connection settings). It answers each group with
its CPU clock; the calls resolve only then, so an acknowledged call is durable. That is
item 3.

Beside it, in the same rounds and interleaved, on the same data folder: the recorded
store as it is today (the writer thread), the bare floor and the ``eventsourcing`` peer
(``bench.py``'s own), at ``--width`` calls in flight and at 1. Each throughput cell also
takes the CPU a call of each side: the event loop's thread, the writer thread or the
writer process, and the rest of the main process; and the cores the cell kept busy (its
CPU a call times its calls/s). The split gains only where the host gives it a second
core: with another process busy on one of the two, the loop and the writer process take
turns on the other, and the column shows it (about 1 instead of up to 2).

A fidelity pass first counts what a call hands the writer: the writer thread's
statements (counted on its connection) beside the writer process's. After the rounds,
``Memory.verify(deep=True)`` checks that the split wrote what the writer thread would.

What the ceiling leaves out (it is an upper bound on items 1 and 3, not their design):
no retry of a failed group (a command that raises stops the run), no
check in the writer process that what the loop assumed (lease holder, saved state,
absent ids) is what it read, no handling of a killed writer process or another process
writing the same file (its head is checked and a mismatch stops the run), no checkpoint
cut (none is due at the bench's settings), and the loop assigns seqs and times itself,
as a sole writer can.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

# Siblings: run as a script, this folder is on sys.path.
from bench import SCOPE, Floor, corpus, in_flight, make_peer, store_arguments
from bench_cpu import HEADS, CpuSplit

import memseal
from memseal.ledger._txn import LogTxn
from memseal.ledger.entry import Draft, format_time
from memseal.ledger.note import NoteSigner
from memseal.ledger.sqlite import SqliteTxn, _connect_writer
from memseal.ledger.store import Appended

_LEASE = "SELECT holder FROM runs WHERE run_id = ?"
_SAVED = "SELECT (SELECT seq FROM engine_items WHERE id = ?), "
_HEAD = "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
_SAVED_KEY = "engine.saved_state"  # engine/_writes.py's key for the projection's state
_ACK = struct.Struct("!QQQd")  # groups, statements, bound values, CPU seconds
_LEN = struct.Struct("!I")


class Start(msgspec.Struct, array_like=True):
    path: str
    name: str
    seed: bytes


class Group(msgspec.Struct, array_like=True):
    """One writer group: its first seq, statements in order, drafts with their times."""

    first: int
    statements: list[tuple[str, list[Any]]]
    drafts: list[tuple[datetime, Draft]]


# -- the writer process -----------------------------------------------------------------------


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class _Counted:
    """A writer's connection (the writer process's; the writer thread's in the fidelity
    pass), counting its statements, bound values and transactions."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.statements = 0
        self.values = 0
        self.begins = 0

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        self.statements += 1
        self.begins += sql.startswith("BEGIN")
        self.values += len(params)
        return self.conn.execute(sql, params)

    @property
    def in_transaction(self) -> bool:
        return self.conn.in_transaction


def _commit_group(conn: _Counted, signer: NoteSigner, group: Group) -> None:
    """memseal's write half of one group (see the module docstring)."""
    at: list[datetime] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        txn = SqliteTxn(conn, signer, lambda: at[-1], ())  # type: ignore[arg-type]
        txn.adopt_current_key(None)
        if txn.size != group.first:
            raise RuntimeError(f"head {txn.size}, group starts at {group.first}: another writer")
        for sql, params in group.statements:
            conn.execute(sql, params).fetchall()
        for when, draft in group.drafts:
            at.append(when)
            txn.append(draft)
        txn.flush()
        txn.latest_checkpoint()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.conn.execute("ROLLBACK")
        raise


def child() -> None:
    """The writer process: one group a message on stdin, one ack each on stdout."""
    start = msgspec.msgpack.decode(_read_exact(0, _LEN.unpack(_read_exact(0, 4))[0]), type=Start)
    conn = _Counted(_connect_writer(Path(start.path)))
    signer = NoteSigner.from_seed(start.name, start.seed)
    decode = msgspec.msgpack.Decoder(Group).decode
    groups = 0
    os.write(1, _ACK.pack(groups, 0, 0, time.process_time()))
    while True:
        try:
            size = _LEN.unpack(_read_exact(0, 4))[0]
        except EOFError:
            break
        _commit_group(conn, signer, decode(_read_exact(0, size)))
        groups += 1
        os.write(1, _ACK.pack(groups, conn.statements, conn.values, time.process_time()))
    conn.conn.close()


# -- the event loop's side --------------------------------------------------------------------


class DataTxn(LogTxn[Any]):
    """A writer group's transaction as data: what the commands write is kept to ship."""

    dialect = "sqlite"
    _ROLLBACK_TO = "ROLLBACK TO {}"
    _RELEASE = "RELEASE {}"

    def __init__(self, split: SplitWriter) -> None:
        self.split = split
        self.statements: list[tuple[str, list[Any]]] = []
        self.drafts: list[tuple[datetime, Draft]] = []
        super().__init__(None, split.signer, split.clock, ())
        self.first = self._size
        self.assumes = True  # a dedupe read is one IN read a group, in the writer
        self._grouped = True  # no savepoints: the group is one unit

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if sql == _HEAD:
            size = self.split.size
            return [(size - 1, b"")] if size else []
        self._touch(sql)
        self.statements.append((sql, list(params)))
        return self.split.answer(sql, params)

    def _raw(self, sql: str, params: Sequence[Any]) -> None:
        self.statements.append((sql, list(params)))

    def append(self, draft: Draft) -> Appended:
        seq, at = self._size, self._clock()
        self.drafts.append((at, draft))
        self._size = seq + 1
        return Appended(seq=seq, leaf_hash=b"", at=format_time(at))

    def tree_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        raise AssertionError("the writer process grows the tree")

    def _erase(self, earlier: Sequence[int], seq: int) -> None:
        raise AssertionError("no redaction in a store")


class SplitWriter:
    """Stands in for the store's ``GroupCommitWriter``: commands run as data on the loop,
    groups committed by the writer process, one in flight at a time.

    A group is sealed when it holds ``most`` commands, or when the writer process is idle
    and the loop's turn ends (as the writer thread takes everything queued). With every
    call in flight in one group, the loop waits while the writer process commits and the
    other way round; groups of half the calls in flight let the two overlap."""

    running = True

    def __init__(
        self, store: Any, holder: dict[str, str], proc: subprocess.Popen[bytes], most: int
    ) -> None:
        self.signer, self.clock = store.signer, store._clock
        self.holders, self.proc, self.most = holder, proc, most
        self.loop = asyncio.get_running_loop()
        with sqlite3.connect(f"file:{store.path}?mode=ro", uri=True) as conn:
            head = conn.execute(_HEAD).fetchone()
            meta = dict(conn.execute("SELECT key, value FROM engine_meta").fetchall())
        self.size = 0 if head is None else head[0] + 1
        self.saved: tuple[Any, Any] = (meta.get("position"), meta.get("state_sum"))
        self.forming: DataTxn | None = None
        self.jobs: list[tuple[asyncio.Future[Any], Any]] = []
        self.sealed: list[tuple[bytes, list[tuple[asyncio.Future[Any], Any]]]] = []
        self.flight: list[tuple[asyncio.Future[Any], Any]] | None = None
        self.flush_soon = False
        self.failures = self.calls = self.groups = 0
        self.acks: list[tuple[int, int, int, float]] = []
        self._buffer = b""
        self._encode = msgspec.msgpack.Encoder().encode

    def answer(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """What the writer would read for a new memory in a run this process holds."""
        if sql == _LEASE:
            return [(self.holders[params[0]],)]
        if sql.startswith(_SAVED):
            return [(None, *self.saved)]
        if sql.startswith("SELECT 1 FROM"):  # an id taken as absent, a reissued step
            return []
        if sql.startswith("UPDATE runs SET lease_until") and "RETURNING" in sql:
            return [(params[1],)]
        if sql.startswith("SELECT"):
            raise AssertionError(f"no answer for a read the ceiling does not model: {sql}")
        return []

    async def run(self, command: Any) -> Any:
        future: asyncio.Future[Any] = self.loop.create_future()
        if self.forming is None:
            self.forming = DataTxn(self)
        try:
            value = command(self.forming)
        except BaseException as exc:  # the ceiling does not retry: counted, and said
            self.failures += 1
            future.set_exception(exc)
        else:
            self.jobs.append((future, value))
            if len(self.jobs) >= self.most:
                self._seal()
            if self.flight is None and not self.flush_soon:
                self.flush_soon = True
                self.loop.call_soon(self._flush)
        return await future

    def _seal(self) -> None:
        """The forming group as its message: held rows written, the log state carried on."""
        txn, jobs = self.forming, self.jobs
        assert txn is not None
        txn.flush()
        known = txn.known(_SAVED_KEY)
        if known is not None:
            self.saved = known
        self.size = txn.size
        data = self._encode(Group(first=txn.first, statements=txn.statements, drafts=txn.drafts))
        self.sealed.append((data, jobs))
        self.forming, self.jobs = None, []

    def _flush(self) -> None:
        self.flush_soon = False
        if self.flight is not None:
            return
        if not self.sealed and self.jobs:
            self._seal()
        if not self.sealed:
            return
        data, self.flight = self.sealed.pop(0)
        _write_all(self.proc.stdin.fileno(), _LEN.pack(len(data)) + data)  # type: ignore[union-attr]
        self.calls += len(self.flight)
        self.groups += 1

    def on_ack(self) -> None:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        try:
            self._buffer += os.read(fd, 4096)
        except BlockingIOError:
            return
        while len(self._buffer) >= _ACK.size:
            self.acks.append(_ACK.unpack(self._buffer[: _ACK.size]))
            self._buffer = self._buffer[_ACK.size :]
            done, self.flight = self.flight or [], None
            self._flush()  # the next group first: the writer process works meanwhile
            for future, value in done:
                if not future.done():
                    future.set_result(value)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def start_child(path: Path, signer: NoteSigner) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    with contextlib.suppress(OSError):  # Linux: room for a whole group in the pipe
        fcntl.fcntl(proc.stdin.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    seed = bytes(signer.signing_key)
    data = msgspec.msgpack.encode(Start(path=str(path), name=signer.name, seed=seed))
    _write_all(proc.stdin.fileno(), _LEN.pack(len(data)) + data)
    return proc


# -- the contestants ------------------------------------------------------------------------


class Ceiling:
    """The contestants of one run, on one data folder, the writer process kept up."""

    def __init__(self, memory: memseal.Memory, where: Path, args: argparse.Namespace) -> None:
        self.memory, self.args = memory, args
        self.store: Any = memory.ledger.store
        self.floor = Floor(where / "floor.db")
        self.peer = make_peer(where / "peer.db")
        self.proc = start_child(self.store.path, self.store.signer)
        assert self.proc.stdout is not None
        first = _ACK.unpack(_read_exact(self.proc.stdout.fileno(), _ACK.size))
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.child_at: tuple[int, int, int, float] = first
        self.cpu = CpuSplit()
        self.child_cpu: dict[str, list[float]] = {}
        self.group_sizes: dict[str, list[float]] = {}
        self.runs = 0

    def most(self, width: int) -> int:
        """The most calls a group of the writer process holds at ``width`` in flight."""
        return self.args.group or max(1, width // 2)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()

    def _name(self) -> str:
        self.runs += 1
        return f"ceiling-{self.runs}"

    async def real(self, asked: list[dict[str, Any]], width: int) -> float:
        """Recorded stores as today: the writer thread."""
        async with self.memory.run(self._name(), SCOPE, mode="record") as run:
            return await in_flight(lambda a: run.call("memory_store", a), asked, width)

    async def split(self, asked: list[dict[str, Any]], width: int) -> tuple[float, SplitWriter]:
        """Recorded stores with the commands as data and the writer process."""
        async with self.memory.run(self._name(), SCOPE, mode="record") as run:
            holder = {run.run_id: run._holder}  # the lease this process holds
            writer = SplitWriter(self.store, holder, self.proc, self.most(width))
            fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
            loop = asyncio.get_running_loop()
            loop.add_reader(fd, writer.on_ack)
            thread, self.store._group = self.store._group, writer
            try:
                rate = await in_flight(lambda a: run.call("memory_store", a), asked, width)
            finally:
                self.store._group = thread
                loop.remove_reader(fd)
        if writer.failures:
            raise RuntimeError(f"{writer.failures} commands raised: the ceiling has no retry")
        return rate, writer

    async def cell(self, key: str, asked: list[dict[str, Any]], width: int) -> float:
        """One timed cell: its calls/s, its CPU split kept under ``key``."""
        with self.cpu.window(key, len(asked)):
            if key.startswith("floor"):
                return self.floor.run(asked, width)
            if key.startswith("peer"):
                assert self.peer is not None
                return self.peer(asked, threads=width)
            if key.startswith("real"):
                return await self.real(asked, width)
            rate, writer = await self.split(asked, width)
        last = writer.acks[-1]
        self.child_cpu.setdefault(key, []).append((last[3] - self.child_at[3]) * 1e6 / len(asked))
        self.group_sizes.setdefault(key, []).append(writer.calls / writer.groups)
        self.child_at = last
        return rate

    async def fidelity(self, asked: list[dict[str, Any]], width: int) -> dict[str, float]:
        """What a call hands the writer: the writer thread's statements (counted on its
        connection, the run's start and close not counted) beside the writer process's
        (counted in it), untimed; half the calls each."""
        half = len(asked) // 2
        async with self.memory.run(self._name(), SCOPE, mode="record") as run:
            counted = _Counted(self.store._writer)
            self.store._writer = counted
            try:
                await in_flight(lambda a: run.call("memory_store", a), asked[:half], width)
            finally:
                self.store._writer = counted.conn
        _, writer = await self.split(asked[half:], width)
        last, was = writer.acks[-1], self.child_at
        self.child_at = last
        return {
            "thread_statements": counted.statements / half,
            "thread_values": counted.values / half,
            "thread_group": half / counted.begins,
            "process_statements": (last[1] - was[1]) / half,
            "process_values": (last[2] - was[2]) / half,
            "process_group": writer.calls / writer.groups,
        }


# -- the run and its table --------------------------------------------------------------------

#: The cells of a round, in turn; those ending in ``_1`` run 1 call in flight.
CELLS = ("floor", "real", "split", "peer", "peer_1", "floor_1", "real_1", "split_1")


async def measure(where: Path, args: argparse.Namespace) -> tuple[Ceiling, dict[str, Any]]:
    figures: dict[str, list[float]] = {}
    async with memseal.open(where / "data", embedder=None, checkpoint_interval=None) as memory:
        seeded = corpus(args.memories)
        for base in range(0, len(seeded), 1_000):
            await memory.engine.store_many(seeded[base : base + 1_000])
        ceiling = Ceiling(memory, where, args)
        try:
            await ceiling.real(store_arguments(args.width * 4, seed=900), args.width)  # warm
            fidelity = await ceiling.fidelity(store_arguments(args.calls, 901), args.width)
            for r in range(args.rounds):
                for i, key in enumerate(CELLS):
                    wide = not key.endswith("_1")
                    if key.startswith("peer") and ceiling.peer is None:
                        continue
                    n = args.calls if wide else args.seq_calls
                    asked = store_arguments(n, seed=1_000 * (r + 1) + i)
                    rate = await ceiling.cell(key, asked, args.width if wide else 1)
                    figures.setdefault(key, []).append(rate)
            await memory.verify(deep=True)  # the split wrote what the writer thread would
        finally:
            ceiling.close()
    m = {key: statistics.median(values) for key, values in figures.items()}
    return ceiling, {"m": m, "fidelity": fidelity, "rounds": figures}


def _cpu_cells(ceiling: Ceiling, key: str, rate: float) -> tuple[str, ...]:
    """The CPU columns of row ``key``, and the cores it kept busy (CPU a call x calls/s)."""
    split = ceiling.cpu.medians().get(key)
    if split is None:
        return ("n/a", "n/a", "n/a", "n/a")
    writer = split["writer"]
    if key in ceiling.child_cpu:
        writer += statistics.median(ceiling.child_cpu[key])
    busy = (split["loop"] + writer + split["other"]) * rate / 1e6
    return (f"{split['loop']:.0f}", f"{writer:.0f}", f"{split['other']:.0f}", f"{busy:.2f}")


def report(ceiling: Ceiling, out: dict[str, Any], args: argparse.Namespace) -> None:
    m, f, w = out["m"], out["fidelity"], args.width
    groups = {k: statistics.median(v) for k, v in ceiling.group_sizes.items()}
    print(
        f"what a recorded store hands the writer ({args.calls // 2} calls each, {w} in flight): "
        f"writer thread {f['thread_statements']:.1f} statements and {f['thread_values']:.0f} "
        f"bound values a call, {f['thread_group']:.1f} calls a group; writer process "
        f"{f['process_statements']:.1f} statements and {f['process_values']:.0f} values a call, "
        f"{f['process_group']:.1f} calls a group"
    )
    rows: list[tuple[str, str, str, str]] = [
        (f"bare floor ({w} in flight, one txn)", "floor", "1.00", ""),
        (f"recorded memory_store today, writer thread ({w} in flight)", "real", "", ""),
        (f"recorded memory_store, writer process ({w} in flight)", "split", "", ""),
    ]
    for label, key, _, _ in rows[1:]:
        i = rows.index((label, key, "", ""))
        ratio = f"{m[key] / m['floor']:.2f} of floor"
        if "peer" in m:
            ratio += f", {m[key] / m['peer']:.2f}x peer"
        rows[i] = (label, key, ratio, ">= 0.4 of floor, >= 3x peer")
    if "peer" in m:
        rows.append((f"eventsourcing on SQLite ({w} threads)", "peer", "", ""))
        rows.append(("eventsourcing on SQLite (one thread)", "peer_1", "", ""))
    rows.append(("bare floor (1 in flight)", "floor_1", "", ""))
    for label, key in (("today, writer thread", "real_1"), ("writer process", "split_1")):
        ratio = f"{m[key] / m['floor_1']:.2f} of floor"
        if "peer_1" in m:
            ratio += f", {m[key] / m['peer_1']:.2f}x peer"
        rows.append((f"recorded memory_store, {label} (1 in flight)", key, ratio, ">= 1x peer"))
    heads = ("contestant", "calls/s", "ratio", "target", *HEADS, "cores busy")
    print("\n| " + " | ".join(heads) + " |\n" + "|---" * len(heads) + "|")
    for label, key, ratio, target in rows:
        cells = " | ".join(_cpu_cells(ceiling, key, m[key]))
        print(f"| {label} | {m[key]:,.0f} | {ratio} | {target} | {cells} |")
    print(
        f"\nwriter us/call of the writer process is its own CPU clock; calls a group: "
        f"{groups.get('split', 0):.1f} at {w} in flight, {groups.get('split_1', 0):.1f} at 1; "
        "calls/s by round: "
        + "; ".join(
            f"{key} " + ", ".join(f"{v:,.0f}" for v in out["rounds"][key])
            for key in ("floor", "real", "split", "peer")
            if key in out["rounds"]
        )
    )
    wanted(ceiling, m)


def wanted(ceiling: Ceiling, m: dict[str, float]) -> None:
    """The per-call CPU the bottleneck side would have to reach for the targets."""
    cpu = ceiling.cpu.medians()
    if "split" not in cpu or "peer" not in m:
        return
    loop = cpu["split"]["loop"] + cpu["split"]["other"]
    writer = statistics.median(ceiling.child_cpu["split"])
    need = max(0.4 * m["floor"], 3 * m["peer"])
    budget = 1e6 / need
    side, worst = ("event loop", loop) if loop >= writer else ("writer process", writer)
    print(
        f"the targets ask {need:,.0f} calls/s at {ceiling.args.width} in flight "
        f"(max of 0.4 x floor {0.4 * m['floor']:,.0f} and 3 x peer {3 * m['peer']:,.0f}): "
        f"each side at most {budget:.0f} us of CPU a call on a core of its own, both "
        f"together at most {2 * budget:.0f}; the split's bottleneck, the {side}, takes "
        f"{worst:.0f} us a call (main process {loop:.0f}, writer process {writer:.0f}: "
        f"{1e6 / worst:,.0f} calls/s if it had a core to itself), {worst / budget:.1f}x the budget"
    )


def main() -> None:
    if sys.argv[1:] == ["--child"]:
        child()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: tiny counts, 1 round")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3)")
    parser.add_argument("--calls", type=int, default=None, help="calls a cell (2000)")
    parser.add_argument("--seq-calls", type=int, default=None, help="calls a 1-in-flight cell")
    parser.add_argument("--width", type=int, default=32, help="calls in flight (32)")
    parser.add_argument("--memories", type=int, default=None, help="memories seeded (2000)")
    parser.add_argument(
        "--group", type=int, default=0, help="most calls a group of the writer process (width/2)"
    )
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.calls = args.calls or (64 if args.quick else 2_000)
    args.seq_calls = args.seq_calls or (16 if args.quick else 500)
    args.memories = args.memories or (100 if args.quick else 2_000)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        ceiling, out = asyncio.run(measure(Path(tmp), args))
    cores = os.cpu_count() or 1
    print(
        f"writer ceiling ({'quick' if args.quick else 'full'}): {cores} CPU(s), load "
        f"{load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; SQLite "
        f"{sqlite3.sqlite_version}, WAL, synchronous=FULL, embedder none; {args.calls} calls a "
        f"cell ({args.seq_calls} at 1 in flight), median of {args.rounds} interleaved round(s); "
        "the ledger verified deep after the rounds"
    )
    report(ceiling, out, args)


if __name__ == "__main__":
    main()
