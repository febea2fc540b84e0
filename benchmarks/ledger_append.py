"""Ledger append and verify throughput, next to this machine's bare limits.

Run: ``.venv/bin/python benchmarks/ledger_append.py [--entries N]``

Everything is measured in the same run, on a real SQLite file in a
temporary folder with the durability memseal uses (WAL, synchronous=FULL):

* memseal appends/s with 1 writer and with 32 concurrent writers;
* the bare loop of canonical encode + blake3 + pynacl sign + SQLite insert,
  at one transaction per row and at 100 rows per transaction;
* memseal verify entries/s on 1 and on 2 cores, and bare pynacl verify/s.

Targets (issue "Signed ledger core"): 1 writer >= 70% of the one-row bare
loop; 32 writers >= 70% of the 100-row bare loop; verify >= 80% of bare
verify/s per core used.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import secrets
import sqlite3
import tempfile
import time
from pathlib import Path

import blake3
import msgspec
from nacl.signing import SigningKey

import memseal

_enc = msgspec.json.Encoder(order="deterministic")


def _payload(i: int) -> dict[str, object]:
    return {"text": f"memory number {i}: the user prefers dark mode", "tags": ["ui", "pref"]}


def bare_loop(path: Path, n: int, per_txn: int) -> float:
    """Encode + blake3 + sign + insert, ``per_txn`` rows per durable commit."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, leaf BLOB, hash BLOB, sig BLOB)")
    conn.execute("CREATE TABLE p (seq INTEGER PRIMARY KEY, salt BLOB, data BLOB)")
    key = SigningKey.generate()
    prev = b"\x00" * 32
    start = time.perf_counter()
    for base in range(0, n, per_txn):
        conn.execute("BEGIN IMMEDIATE")
        for seq in range(base, min(n, base + per_txn)):
            data = _enc.encode(_payload(seq))
            salt = secrets.token_bytes(16)
            digest = blake3.blake3(salt + data).hexdigest()
            leaf = _enc.encode({"seq": seq, "prev": prev.hex(), "payload_hash": digest})
            prev = hashlib.sha256(b"\x00" + leaf).digest()
            sig = key.sign(b"memseal/entry/v1\x00" + prev).signature
            conn.execute("INSERT INTO t VALUES (?, ?, ?, ?)", (seq, leaf, prev, sig))
            conn.execute("INSERT INTO p VALUES (?, ?, ?)", (seq, salt, data))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def bare_verify(n: int) -> float:
    key = SigningKey.generate()
    verify = key.verify_key
    signed = [key.sign(secrets.token_bytes(49)) for _ in range(n)]
    start = time.perf_counter()
    for s in signed:
        verify.verify(s.message, s.signature)
    return n / (time.perf_counter() - start)


async def ours(folder: Path, n: int, writers: int) -> float:
    async with memseal.open(folder) as memory:
        per = n // writers

        async def writer(w: int) -> None:
            for i in range(per):
                await memory.ledger.append("note", {"w": w, "i": i}, _payload(i))

        start = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(writers)))
        return per * writers / (time.perf_counter() - start)


async def verify_rate(folder: Path, workers: int) -> tuple[float, int]:
    async with memseal.open(folder) as memory:
        start = time.perf_counter()
        summary = await memory.ledger.verify(memory.vkey, workers=workers)
        return summary.size / (time.perf_counter() - start), summary.size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=3000, help="appends per measurement")
    parser.add_argument("--verify-entries", type=int, default=20000)
    args = parser.parse_args()
    n = args.entries
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare1 = bare_loop(root / "bare1.db", max(300, n // 5), 1)
        bare100 = bare_loop(root / "bare100.db", n * 2, 100)
        one = asyncio.run(ours(root / "one", max(300, n // 5), 1))
        many = asyncio.run(ours(root / "many", n * 2, 32))
        # A bigger ledger for verification, written with many writers (fast).
        asyncio.run(ours(root / "verify", args.verify_entries, 64))
        v1, size = asyncio.run(verify_rate(root / "verify", 1))
        v2, _ = asyncio.run(verify_rate(root / "verify", 2))
        bare_v = bare_verify(5000)

    print(f"machine: {cores} core(s); SQLite {sqlite3.sqlite_version}; WAL, synchronous=FULL")
    print(f"bare loop, 1 row/txn:        {bare1:10,.0f} rows/s")
    print(f"bare loop, 100 rows/txn:     {bare100:10,.0f} rows/s")
    print(
        f"memseal, 1 writer:           {one:10,.0f} appends/s  = {one / bare1:5.2f} x bare 1/txn"
        "   (target >= 0.70)"
    )
    print(
        f"memseal, 32 writers:         {many:10,.0f} appends/s  = "
        f"{many / bare100:5.2f} x bare 100/txn (target >= 0.70)"
    )
    print(f"bare pynacl verify:          {bare_v:10,.0f} /s per core")
    print(
        f"memseal verify, 1 core:      {v1:10,.0f} entries/s = {v1 / bare_v:5.2f} x bare"
        f"            (target >= 0.80; {size:,} entries)"
    )
    used = min(2, cores)
    print(
        f"memseal verify, {used} cores:     {v2:10,.0f} entries/s = {v2 / (bare_v * used):5.2f} x"
        f" bare x {used} cores  (target >= 0.80)"
    )


if __name__ == "__main__":
    main()
