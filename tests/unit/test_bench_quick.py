"""`make bench` in its smoke mode: the table prints, every row of it; no timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench.py"
POSTGRES = os.environ.get("MEMSEAL_TEST_POSTGRES") or None
PNG = b"\x89PNG\r\n\x1a\n"


def quick(tmp_path: Path, postgres: str | None) -> tuple[list[str], str, dict[str, float]]:
    """One ``--quick`` run: its table lines, its whole output and its medians."""
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
    return table, done.stdout, json.loads(out.read_text())["medians"]


def row(table: list[str], name: str) -> list[str]:
    found = [line for line in table if name in line]
    assert found, name
    return [cell.strip() for cell in found[0].split("|")[1:-1]]


def test_bench_quick_prints_one_table_of_every_row(tmp_path: Path) -> None:
    table, printed, medians = quick(tmp_path, None)
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


@pytest.mark.skipif(POSTGRES is None, reason="MEMSEAL_TEST_POSTGRES is not set")
def test_bench_quick_measures_postgresql_beside_sqlite_when_given(tmp_path: Path) -> None:
    assert POSTGRES is not None
    table, _, medians = quick(tmp_path, POSTGRES)
    cells = row(table, "PostgreSQL recorded memory_store")
    assert cells[1].endswith("calls/s") and cells[2].endswith("of SQLite")
    assert cells[3] == ">= 0.7 of SQLite" and cells[4] in ("met", "not met")
    assert medians["pg_store"] > 0 and medians["store"] > 0
