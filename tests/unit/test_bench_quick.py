"""`make bench` in its smoke mode: the table prints, every row of it; no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench.py"


def test_bench_quick_prints_one_table_of_every_row(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert table[0].split("|")[1].strip() == "contestant"
    for row in (
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
        assert any(row in line for line in table), row
    assert table[0].split("|")[5].strip() == "met"
    medians = json.loads(out.read_text())["medians"]
    assert medians["store"] > 0 and medians["verify"] > 0
    # A proof reads O(log n) stored hashes: the leaf, the root's subtrees and the path.
    assert 0 < medians["proof_hashes"] <= 2 * 11 + 2
    assert medians["fetch_scale_p95"] > 0 and medians["bare_fts_p95"] > 0
