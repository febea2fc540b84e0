"""`make bench` in its smoke mode: the table prints, every row of it; no timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench.py"
POSTGRES = os.environ.get("MEMSEAL_TEST_POSTGRES") or None
PNG = b"\x89PNG\r\n\x1a\n"
CPU_HEADS = ["loop us/call", "writer us/call", "other us/call"]
# Each throughput row measured in this process, and its key in the JSON's CPU split.
CPU_ROWS = {
    "bare floor": "floor",
    "memseal recorded memory_store (32 in flight)": "store",
    "eventsourcing on SQLite (one event a call, 32 threads)": "peer",
    "eventsourcing on SQLite (one event a call, one thread)": "peer_1",
    "memseal unrecorded memory_fetch": "fetch_unrecorded",
    "memseal recorded memory_fetch (32 in flight)": "fetch_recorded",
    "in-process memory_store, a one-shot run each": "oneshot_store",
    "in-process memory_fetch, a one-shot run each": "oneshot_fetch",
}


def quick(tmp_path: Path, postgres: str | None) -> tuple[list[str], str, dict[str, Any]]:
    """One ``--quick`` run: its table lines, its whole output and its JSON."""
    out = tmp_path / "figures.json"
    env = {k: v for k, v in os.environ.items() if k not in ("MEMSEAL_TEST_POSTGRES",)}
    command = [sys.executable, str(BENCH), "--quick", "--json", str(out)]
    command += ["--plots", str(tmp_path / "plots")]
    if postgres is not None:
        command += ["--postgres", postgres]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    return table, done.stdout, json.loads(out.read_text())


def row(table: list[str], name: str) -> list[str]:
    found = [line for line in table if name in line]
    assert found, name
    return [cell.strip() for cell in found[0].split("|")[1:-1]]


def test_bench_quick_prints_one_table_of_every_row(tmp_path: Path) -> None:
    table, printed, figures = quick(tmp_path, None)
    medians = figures["medians"]
    assert table[0].split("|")[1].strip() == "contestant"
    for name in (
        "bare floor",
        "memseal recorded memory_store",
        "eventsourcing",
        "memseal unrecorded memory_fetch",
        "memseal recorded memory_fetch",
        "sequential recorded memory_fetch",
        "replay hit",
        "full verify",
        "bare pynacl verify on",
        "inclusion proof",
        "stored hashes one proof reads",
        "memory_fetch exact",
        "bare FTS5 query, same table",
    ):
        row(table, name)
    assert table[0].split("|")[5].strip() == "met"
    assert medians["store"] > 0 and medians["verify"] > 0
    # A proof reads O(log n) stored hashes: the leaf, the root's subtrees and the path.
    assert 0 < medians["proof_hashes"] <= 2 * 11 + 2
    assert medians["fetch_scale_p95"] > 0 and medians["bare_fts_p95"] > 0
    # Issue 41's targets, each with its verdict; the one-call row shows its ceiling.
    cells = row(table, "memseal recorded memory_store (32 in flight)")
    assert cells[2].endswith("of floor") and cells[3] == ">= 0.4 of floor"
    cells = row(table, "sequential recorded memory_store (1 in flight)")
    assert cells[3] == ">= 1x" and cells[4] in ("met", "not met")
    ratio = medians["sweep_store_1"] / medians["peer_1"]
    assert cells[2] == f"{ratio:.2f}x" and cells[4] == ("met" if ratio >= 1 else "not met")
    assert row(table, "  bound: bare floor, 1 in flight")[2].endswith("x the peer")

    # Over HTTP against a real `memseal serve`, beside the in-process rate of the same run.
    for tool in ("memory_store", "memory_fetch"):
        cells = row(table, f"HTTP recorded {tool} (64 clients")
        assert cells[1].endswith("calls/s") and "of in-process" in cells[2]
        assert cells[3] == ">= 0.5 of in-process" and cells[4] in ("met", "not met")
    assert medians["http_store"] > 0 and medians["http_fetch"] > 0
    assert "HTTP answers not 200" not in printed
    # No PostgreSQL given: the row says so, and no figure stands for it.
    cells = row(table, "PostgreSQL recorded memory_store")
    assert cells[1].startswith("not measured: no PostgreSQL") and cells[4] == ""
    assert "pg_store" not in medians
    # The default embedder is a runtime dependency: its rows are measured.
    for width in (1, 8, 32):
        cells = row(table, f"default embedder, store, {width} in flight, batched")
        assert cells[1].endswith("stores/s") and "x one call per store" in cells[2]
        row(table, f"one model call per store, {width} in flight")
        assert medians[f"embed_batched_{width}"] > 0 and medians[f"embed_single_{width}"] > 0

    # The plots: throughput against calls in flight, the latency CDF.
    for width in (1, 8, 32, 64):
        for who in ("floor", "store", "peer"):
            assert medians[f"sweep_{who}_{width}"] > 0
    for name in ("bench-throughput.png", "bench-latency-cdf.png"):
        png = (tmp_path / "plots" / name).read_bytes()
        assert png.startswith(PNG) and len(png) > 10_000

    check_cpu_split(table, printed, figures["cpu_us_per_call"])


def check_cpu_split(table: list[str], printed: str, split: dict[str, Any]) -> None:
    """Beside each throughput row, the per-call CPU of the loop, the writer and the rest."""
    assert [c.strip() for c in table[0].split("|")[6:9]] == CPU_HEADS
    if not hasattr(time, "pthread_getcpuclockid"):  # the table says it cannot split
        assert "n/a (this platform has no per-thread CPU clock)" in printed and split == {}
        assert row(table, "memseal recorded memory_store (32 in flight)")[5:8] == ["n/a"] * 3
        return
    for name, key in CPU_ROWS.items():
        cells = row(table, name)[5:8]
        assert all(float(c) >= 0 for c in cells), (name, cells)
        assert sorted(split[key]) == ["loop", "other", "writer"]
        assert [f"{split[key][p]:.0f}" for p in ("loop", "writer", "other")] == cells
    # The memseal-writer thread is found and does a recorded store's commit; the floor
    # and the one-thread peer run on the loop's thread and give the writer nothing.
    assert split["store"]["loop"] > 0 and split["store"]["writer"] > 0
    assert split["fetch_recorded"]["writer"] > 0
    for quiet in ("floor", "peer_1"):
        assert split[quiet]["loop"] > 0 and split[quiet]["writer"] < split["store"]["writer"]
    # The peer's 32 threads are neither the loop nor a writer: their CPU is other.
    assert split["peer"]["other"] > 0
    # Rows measured in another process (the HTTP server) leave the split blank.
    assert row(table, "HTTP recorded memory_store (64 clients")[5:8] == ["", "", ""]


@pytest.mark.skipif(POSTGRES is None, reason="MEMSEAL_TEST_POSTGRES is not set")
def test_bench_quick_measures_postgresql_beside_sqlite_when_given(tmp_path: Path) -> None:
    assert POSTGRES is not None
    table, _, figures = quick(tmp_path, POSTGRES)
    medians = figures["medians"]
    cells = row(table, "PostgreSQL recorded memory_store")
    assert cells[1].endswith("calls/s") and cells[2].endswith("of SQLite")
    assert cells[3] == ">= 0.6 of SQLite" and cells[4] in ("met", "not met")
    if hasattr(time, "pthread_getcpuclockid"):  # the memseal-pg-writer thread is found
        assert float(cells[5]) >= 0 and float(cells[6]) > 0
        assert figures["cpu_us_per_call"]["pg_store"]["writer"] > 0
    assert medians["pg_store"] > 0 and medians["store"] > 0
