"""Two processes appending to one data folder at once keep one gapless chain.

The parent creates the folder and its keys, then starts two writer processes
that both load those keys; each waits on its stdin until the parent says go,
so their appends overlap, then makes 200 appends from 8 concurrent
coroutines and prints each acknowledged append as ``<seq> <token>``. The
head is read after ``BEGIN IMMEDIATE`` in each process, so the two must
never fork the chain: afterwards the ledger verifies, has exactly 400
entries at seqs 0..399, and every acknowledged token is present exactly
once, at its acknowledged seq.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest

import memseal
from memseal.memory import open_audit

pytestmark = pytest.mark.slow

APPENDS = 200
WORKERS = 8
PROCESSES = 2
TIMEOUT_S = 120.0

WRITER = r"""
import asyncio
import os
import sys

import memseal

APPENDS = int(sys.argv[3])
WORKERS = int(sys.argv[4])


async def main(folder: str, name: str) -> None:
    async with memseal.open(folder, create=False, embedder=None) as memory:
        print("ready", flush=True)
        # Wait for the parent: both processes start appending at the same moment.
        await asyncio.to_thread(sys.stdin.readline)
        queue = list(range(APPENDS))

        async def worker(number: int) -> None:
            while queue:
                i = queue.pop()
                token = f"{name}-{i}-{os.urandom(4).hex()}"
                appended = await memory.ledger.append(
                    "multi_probe", {"process": name, "i": i, "worker": number},
                    {"token": token}, mentions=[token],
                )
                print(f"{appended.seq} {token}", flush=True)

        await asyncio.gather(*(worker(n) for n in range(WORKERS)))


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_two_processes_append_one_chain(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    folder = tmp_path / "data"
    async with memseal.open(
        folder, embedder=None
    ) as memory:  # keys and database, before either writer
        vkey = memory.vkey
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            str(folder),
            f"p{n}",
            str(APPENDS),
            str(WORKERS),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for n in range(PROCESSES)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            ready = await asyncio.wait_for(proc.stdout.readline(), TIMEOUT_S)
            assert ready == b"ready\n", ready
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
            proc.stdin.close()
        outputs = await asyncio.wait_for(
            asyncio.gather(*(proc.communicate() for proc in procs)), TIMEOUT_S
        )
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    acked: list[tuple[int, str]] = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()[-3000:]
        lines = out.decode().splitlines()
        assert len(lines) == APPENDS, f"{len(lines)} acknowledgements, not {APPENDS}"
        for line in lines:
            seq, token = line.split()
            acked.append((int(seq), token))

    total = PROCESSES * APPENDS
    # No seq was handed to two appends, in one process or across both.
    seqs = Counter(seq for seq, _ in acked)
    assert sorted(seqs) == list(range(total)), "acknowledged seqs have gaps or repeats"
    async with open_audit(folder) as ledger:
        summary = await ledger.verify(trust=vkey)
        assert summary.size == total
        stored: dict[int, str] = {}
        async for record in ledger.scan():
            assert record.payload is not None
            stored[record.seq] = msgspec.json.decode(record.payload)["token"]
    assert sorted(stored) == list(range(total))
    assert Counter(stored.values()) == Counter(token for _, token in acked)
    assert all(stored[seq] == token for seq, token in acked)
    # Each process's entries are chained on top of the other's: both wrote, one log.
    writers = {token.split("-")[0] for token in stored.values()}
    assert writers == {f"p{n}" for n in range(PROCESSES)}
