"""The console's pages on a ledger bigger than a page, in a real browser: the Runs list's
"Older runs", the Ledger's "Previous page" and a run timeline's "Load more steps" each
fetch the next page through the API's cursor, never the whole ledger.

The ledger is built in bulk by ``benchmarks/console_scale.py --build-only`` (60 runs of
249 calls, 15,000 entries, 3 runs side by side); the script times the same reads at
1,000 runs and 100,000 entries (docs/performance.md).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from browser.console_support import REPO, Server, sign_in

RUNS, CALLS = 60, 249


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("console-paging") / "data"
    script = REPO / "benchmarks" / "console_scale.py"
    sizes = ["--runs", str(RUNS), "--calls", str(CALLS), "--interleave", "3"]
    subprocess.run(
        [sys.executable, str(script), "--build-only", str(folder), *sizes],
        check=True,
        capture_output=True,
        timeout=300,
    )
    server = Server(folder)
    server.tokens = {"auditor": server.token("auditor", "team:scale")}
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _requests(page: Any) -> list[dict[str, list[str]]]:
    """The query of every API request the page makes from here on."""
    seen: list[dict[str, list[str]]] = []

    def keep(request: Any) -> None:
        url = urlparse(request.url)
        if url.path.startswith("/v1/"):
            seen.append({"path": [url.path], **parse_qs(url.query)})

    page.on("request", keep)
    return seen


def _first_cells(table: Any) -> list[str]:
    return [row.locator("td").first.inner_text() for row in table.locator("tbody tr").all()]


def test_the_runs_list_pages_with_older_runs(big: Server, page: Any) -> None:
    sent = _requests(page)
    sign_in(page, big, big.tokens["auditor"], "#/runs")
    table = page.get_by_role("table", name="Runs in your reach, newest first")
    table.wait_for()
    first = _first_cells(table)
    assert len(first) == 50 and first[0] == f"scale-{RUNS - 1:05d}"
    # Each run's memo hits, from every process (none: these runs were never resumed).
    heads = table.locator("thead th").all_inner_texts()
    hits = heads.index("memo hits")
    assert {
        row.locator("td").nth(hits).inner_text() for row in table.locator("tbody tr").all()
    } == {"0"}
    page.get_by_role("button", name="Older runs").click()
    page.get_by_role("table", name="Runs in your reach, newest first").locator(
        "tbody tr td", has_text="scale-00000"
    ).wait_for()
    second = _first_cells(page.get_by_role("table", name="Runs in your reach, newest first"))
    assert len(second) == RUNS - 50 and not set(first) & set(second)
    assert page.get_by_role("button", name="Older runs").count() == 0
    listed = [q for q in sent if q["path"] == ["/v1/ledger/runs"]]
    assert all(int(q["limit"][0]) <= 50 for q in listed) and "before" in listed[-1]


def test_the_ledger_pages_back_from_the_newest_entries(big: Server, page: Any) -> None:
    size = RUNS * (CALLS + 1)
    sent = _requests(page)
    sign_in(page, big, big.tokens["auditor"], "#/ledger")
    entries = page.get_by_role("table", name="Entries")
    entries.wait_for()
    assert _first_cells(entries) == [str(s) for s in range(size - 50, size)]
    page.get_by_role("button", name="Previous page").click()
    page.get_by_role("table", name="Entries").locator(
        "tbody tr td", has_text=str(size - 100)
    ).first.wait_for()
    shown = _first_cells(page.get_by_role("table", name="Entries"))
    assert shown == [str(s) for s in range(size - 100, size - 50)]
    page.get_by_role("button", name="Next page").wait_for()
    asked = [q for q in sent if q["path"] == ["/v1/ledger/entries"]]
    assert all(int(q["limit"][0]) <= 50 for q in asked)


def test_a_long_runs_timeline_loads_more_steps_on_request(big: Server, page: Any) -> None:
    sent = _requests(page)
    sign_in(page, big, big.tokens["auditor"], "#/runs/scale-00007")
    timeline = page.get_by_role("table", name="Timeline")
    timeline.wait_for()
    status = page.locator("main p[aria-live]")
    assert "entries loaded; the run's entries go on from seq" in status.inner_text()
    assert timeline.locator("tbody tr").count() == 200
    more = page.get_by_role("button", name="Load more steps")
    more.click()
    page.get_by_text(f"All {CALLS + 1} entries of the run loaded").wait_for()
    assert page.get_by_role("table", name="Timeline").locator("tbody tr").count() == CALLS + 1
    assert more.is_hidden()
    asked = [q for q in sent if q["path"] == ["/v1/ledger/entries"]]
    # Every request names the run's span: it scans from the run's start to its last call.
    assert asked and all(q["run"] == ["scale-00007"] and "end" in q for q in asked)
    assert all(int(q["limit"][0]) <= 200 for q in asked)
