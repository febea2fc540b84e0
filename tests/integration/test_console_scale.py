"""The console's reads stay paged on a ledger larger than any one page or scan window.

``benchmarks/console_scale.py --build-only`` makes the ledger in bulk (120 runs of
49 calls, 6,000 entries, 12 runs recorded side by side); the script times the same
reads at 1,000 runs and 100,000 entries (docs/performance.md). Here each read is
checked over real HTTP: bounded rows a response, refused limits named, and every
cursor walks to the end without a repeat or a gap.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_service_support import ServerThread, assert_error

ROOT = Path(__file__).resolve().parents[2]
RUNS, CALLS, SIDE_BY_SIDE = 120, 49, 12
SIZE = RUNS * (CALLS + 1)


@pytest.fixture(scope="module")
def auditor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    folder = tmp_path_factory.mktemp("console-scale") / "data"
    script = ROOT / "benchmarks" / "console_scale.py"
    argv = [str(RUNS), "--calls", str(CALLS), "--interleave", str(SIDE_BY_SIDE)]
    subprocess.run(
        [sys.executable, str(script), "--build-only", str(folder), "--runs", *argv],
        check=True,
        capture_output=True,
        timeout=300,
    )
    with (
        ServerThread(folder) as server,
        server.client(server.token("auditor", "team:scale")) as client,
    ):
        yield client


def _get(c: httpx.Client, path: str, **params: Any) -> Any:
    r = c.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_ledger_pages_are_bounded_and_walk_to_the_end(auditor: httpx.Client) -> None:
    assert _get(auditor, "/v1/ledger")["size"] == SIZE
    too_many = assert_error(auditor.get("/v1/ledger/entries", params={"limit": 201}), 400)
    assert "limit" in too_many["error"]["message"]
    seqs: list[int] = []
    start: int | None = 0
    while start is not None:
        page = _get(auditor, "/v1/ledger/entries", start=start, limit=200)
        assert len(page["entries"]) <= 200
        seqs += [e["seq"] for e in page["entries"]]
        start = page["next"]
    assert seqs == list(range(SIZE))
    # A filter that matches nothing scans one window, not the log: the page says where.
    empty = _get(auditor, "/v1/ledger/entries", kind="run_forked", limit=50)
    assert empty["entries"] == [] and empty["next"] == 5000


def test_the_runs_list_pages_through_every_run_once(auditor: httpx.Client) -> None:
    assert_error(auditor.get("/v1/ledger/runs", params={"limit": 101}), 400)
    seen: list[str] = []
    before: int | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 50}
        if before is not None:
            params["before"] = before
        page = _get(auditor, "/v1/ledger/runs", **params)
        assert len(page["runs"]) <= 50
        seen += [r["run_id"] for r in page["runs"]]
        pages += 1
        before = page["next_before"]
        if before is None:
            break
    assert pages == 3 and len(seen) == len(set(seen)) == RUNS
    assert seen[0] == f"scale-{RUNS - 1:05d}"  # newest first


def test_a_run_timeline_pages_within_the_run_and_stops_at_its_last_call(
    auditor: httpx.Client,
) -> None:
    (run,) = _get(auditor, "/v1/ledger/runs", run="scale-00005")["runs"]
    assert run["recorded_steps"] == CALLS and run["memo_hits"] == 0
    start, end = run["started_seq"], run["last_seq"] + 1
    # Its entries are spread among 11 other runs': the span is about 12 times the run.
    assert end - start > 10 * CALLS
    bad = assert_error(
        auditor.get("/v1/ledger/entries", params={"run": "scale-00005", "start": 9, "end": 9}),
        400,
    )
    assert "`end`" in bad["error"]["message"]
    got: list[dict[str, Any]] = []
    at: int | None = start
    requests = 0
    while at is not None:
        page = _get(auditor, "/v1/ledger/entries", run="scale-00005", start=at, limit=20, end=end)
        assert len(page["entries"]) <= 20
        got += page["entries"]
        at = page["next"]
        requests += 1
    # The last page ends at the run's newest call, though the ledger goes on past it for
    # more than a scan window (without `end`, a fourth request would scan on from there).
    assert end < SIZE and requests == 3
    assert [e["kind"] for e in got] == ["run_started"] + ["memory_tool_call"] * CALLS
    assert [e["header"]["body"].get("step") for e in got[1:]] == list(range(CALLS))
    assert got[-1]["seq"] == end - 1
    memo = _get(auditor, "/v1/ledger/memos", run="scale-00005", limit=20)
    assert len(memo["memos"]) == 20 and memo["next_after"] == 19
