"""Crash safety: a writer killed with SIGKILL never loses an acknowledged append.

A writer subprocess appends under load (16 coroutines appending entries
with payloads in a loop) and prints each append the ledger acknowledged
(returned from ``append``) as ``<seq> <token>``, flushed, only after the
call returned. The parent kills it with SIGKILL at a random moment after
the first acknowledgement, at least 20 times, reusing one data folder, so
every run starts from whatever the last kill left (a hot WAL included).

After each kill an auditor opens the folder read-only and checks that the
ledger verifies under the folder's key, that every token ever acknowledged
is in the payload at its acknowledged seq, that no token was written twice,
and that no checkpoint the policy owed (one every 500 entries, cut in the
group commit that crosses the mark) is missing.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import time
from pathlib import Path

import msgspec
import pytest

import memseal
from memseal.memory import open_audit

pytestmark = pytest.mark.slow

KILLS = 20
CHECKPOINT_EVERY = 500  # small, so kills also land on groups that cut a checkpoint
DEADLINE_S = 75.0  # the whole loop; a hung writer or a slow machine fails, not stalls
FIRST_ACK_TIMEOUT_S = 30.0

WRITER = r"""
import asyncio
import os
import random
import sys

import memseal

WORKERS = 16


async def main(folder: str, run: str, every: int) -> None:
    options = dict(checkpoint_every=every, checkpoint_interval=None, embedder=None)
    async with memseal.open(folder, **options) as memory:
        out = sys.stdout

        async def worker(number: int) -> None:
            rng = random.Random(f"{run}-{number}")
            i = 0
            while True:
                token = f"r{run}-w{number}-i{i}-{os.urandom(4).hex()}"
                payload = {"token": token, "pad": "x" * rng.randrange(0, 1500)}
                appended = await memory.ledger.append(
                    "crash_probe", {"run": run, "worker": number, "i": i}, payload,
                    mentions=[token],
                )
                # Printed only once append has returned: an acknowledgement.
                out.write(f"{appended.seq} {token}\n")
                out.flush()
                i += 1
                # A little jitter keeps the ledger (and each verify) small enough to
                # kill twenty times, while 16 callers still keep groups in flight.
                await asyncio.sleep(rng.uniform(0, 0.02))

        await asyncio.gather(*(worker(n) for n in range(WORKERS)))


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def run_and_kill(script: Path, folder: Path, run: int, log: Path) -> list[tuple[int, str]]:
    """Start a writer, SIGKILL it at a random moment after its first ack; return all acks."""
    with log.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            str(folder),
            str(run),
            str(CHECKPOINT_EVERY),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
    assert proc.stdout is not None
    lines: list[bytes] = []
    try:
        first = await asyncio.wait_for(proc.stdout.readline(), FIRST_ACK_TIMEOUT_S)
        assert first.endswith(b"\n"), f"run {run}: no ack; stderr: {log.read_text()[-2000:]}"
        lines.append(first)

        async def collect() -> None:
            assert proc.stdout is not None
            while line := await proc.stdout.readline():
                lines.append(line)

        reader = asyncio.create_task(collect())
        await asyncio.sleep(random.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        # What the writer printed before it died is still in the pipe: read it all.
        await asyncio.wait_for(reader, 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"run {run} ended on its own: {log.read_text()}"
    acks = []
    for line in lines:
        if not line.endswith(b"\n"):
            continue  # cut mid-line by the kill: never a whole acknowledgement
        seq, token = line.decode().split()
        acks.append((int(seq), token))
    return acks


async def test_sigkill_never_loses_an_acknowledged_append(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    folder = tmp_path / "data"
    async with memseal.open(
        folder, embedder=None
    ) as memory:  # keys made once, before any writer runs
        vkey = memory.vkey
    acked: dict[int, str] = {}
    kills = 0
    sizes: list[int] = []
    started = time.monotonic()
    while kills < KILLS:
        assert time.monotonic() - started < DEADLINE_S, f"only {kills} kills in {DEADLINE_S} s"
        acks = await run_and_kill(script, folder, kills, tmp_path / f"writer-{kills}.log")
        kills += 1
        for seq, token in acks:
            assert acked.setdefault(seq, token) == token, f"seq {seq} acknowledged twice"
        async with open_audit(folder) as ledger:
            summary = await ledger.verify(trust=vkey)
            tokens: dict[str, int] = {}
            async for record in ledger.scan():
                assert record.payload is not None
                token = msgspec.json.decode(record.payload)["token"]
                assert token not in tokens, f"{token} written at {tokens[token]} and {record.seq}"
                tokens[token] = record.seq
            stored = await ledger.checkpoints()
        # A group that crosses the mark commits with its checkpoint, or not at all.
        assert summary.checkpoints == len(stored)
        assert summary.size - (stored[-1].size if stored else 0) < CHECKPOINT_EVERY
        lost = {seq: token for seq, token in acked.items() if tokens.get(token) != seq}
        assert not lost, f"after kill {kills}: acknowledged appends lost or moved: {lost}"
        assert summary.size == len(tokens) > max(acked)
        sizes.append(summary.size)
    # Every run acknowledged something, so each kill landed on a ledger under load.
    assert len(acked) >= KILLS
    assert sizes == sorted(sizes)
    # The folder still takes appends after twenty crashes.
    async with memseal.open(folder, embedder=None) as memory:
        appended = await memory.ledger.append("crash_probe", {"after": "kills"}, {"token": "end"})
        assert appended.seq == sizes[-1]
        await memory.ledger.verify(trust=vkey)
