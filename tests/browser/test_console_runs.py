"""The console's Runs page in a real browser: per step, which signed call the run's memo
replays on resume, and the lifecycle's runs (session start, turns, background jobs) driven
through the served lifecycle routes, listed and labelled."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from browser.console_support import ACME, Server, shoot, sign_in


def test_the_timeline_marks_the_call_each_steps_memo_replays(
    server: Server, page: Any, artifacts: Path
) -> None:
    with sqlite3.connect(server.folder / "ledger.db") as db:
        memo = dict(db.execute("SELECT step, seq FROM memos WHERE run_id = 'acme-nightly'"))
        # The seed's two resumes, in another Memory than the server's: their memo hits.
        hits = dict(db.execute("SELECT seq, hits FROM memo_hits WHERE run_id = 'acme-nightly'"))
    assert sorted(hits.values()) == [1, 2, 2]
    sign_in(page, server, server.tokens["auditor"], "#/runs/acme-nightly")
    timeline = page.get_by_role("table", name="Timeline")
    timeline.wait_for()
    marked: dict[int, bool] = {}
    shown_hits: dict[int, int] = {}
    for row in timeline.locator("tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        if cells[1] in ("run started", "divergence"):
            continue
        assert "live, recorded" in cells[4]
        marked[int(cells[-1])] = "memo: a resume replays this" in cells[4]
        counted = re.search(r"memo hits ×(\d+) \(all processes, unsigned count\)", cells[4])
        if counted:
            shown_hits[int(cells[-1])] = int(counted.group(1))
    # Each call's hits as the table holds them, from a process that is not the server.
    assert shown_hits == hits
    assert "5 memo hits in all processes" in page.locator("main").inner_text()
    # Exactly the seqs the memo table names: the revalidated and forked replacements, not
    # the calls they superseded.
    assert {seq for seq, on in marked.items() if on} == set(memo.values())
    assert len(marked) > len(memo)
    # Nothing the page builds shows as the text "null" (an absent part appended as such).
    assert "null" not in page.locator("main").inner_text()
    shoot(page, artifacts, "run-memo")


def test_lifecycle_runs_are_listed_and_labelled(server: Server, page: Any) -> None:
    agent = server.token("agent", ACME, reach="subtree:team:acme")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {agent}"}, timeout=60
    ) as c:
        r = c.post("/v1/sessions/t1/start", json={})
        assert r.status_code == 200, r.text
        r = c.post("/v1/sessions/t1/pre-turn", json={"message": "where do I live?", "turn": 0})
        assert r.status_code == 200, r.text
        r = c.post("/v1/sessions/t1/post-turn", json={"turn": 0, "user": "I live in Lisbon."})
        assert r.status_code == 200, r.text
        assert r.json()["build"]["job"]
        # Plain runs named as the lifecycle names its own: the kind is the signed entry's,
        # not the id's, so these stay plain runs.
        for fake in ("job-impostor", "t9/thread"):
            r = c.post(f"/v1/runs/{quote(fake, safe='')}/tools/memory_list", json={})
            assert r.status_code == 200, r.text
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.admin}"}, timeout=60
    ) as admin:
        r = admin.post("/v1/admin/jobs/run", json={"place": ACME})
        assert r.status_code == 200, r.text
        (outcome,) = r.json()["outcomes"]
        assert outcome["state"] == "done", outcome
    sign_in(page, server, server.tokens["auditor"], "#/runs")
    runs = page.get_by_role("table", name="Runs in your reach, newest first")
    runs.wait_for()
    rows = {
        cells[0]: cells[1]
        for cells in (r.locator("td").all_inner_texts() for r in runs.locator("tbody tr").all())
    }
    sessions = {rid: kind for rid, kind in rows.items() if "lifecycle: session" in kind}
    assert any(rid.endswith("/thread") for rid in sessions), rows
    assert rows[outcome["run_id"]].startswith("lifecycle: job"), rows
    assert "background job" in rows[outcome["run_id"]]
    assert rows["acme-nightly"] == "run"
    assert rows["job-impostor"] == "run" and rows["t9/thread"] == "run", rows
    # A session run's timeline names its moments: the start, the turn's context, the log.
    thread = next(rid for rid in sessions if rid.endswith("/thread"))
    runs.get_by_role("link", name=thread, exact=True).click()
    text = _timeline(page)
    for moment in ("session start", "turn 0: context before the turn", "turn 0: the turn logged"):
        assert moment in text, text
    # The background job's: its belief stored.
    page.goto(f"{server.url}/#/runs/{quote(outcome['run_id'], safe='')}")
    assert "job: a belief stored" in _timeline(page)


def _timeline(page: Any) -> str:
    timeline = page.get_by_role("table", name="Timeline")
    timeline.wait_for()
    return str(timeline.inner_text())


def test_the_timeline_counts_the_memo_hits_this_server_answered(server: Server, page: Any) -> None:
    agent = server.tokens["agent"]
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {agent}"}, timeout=60
    ) as c:
        for headers in ({}, {"X-Memseal-Step": "0"}, {"X-Memseal-Step": "0"}):
            r = c.post("/v1/runs/served-run/tools/memory_list", json={}, headers=headers)
            assert r.status_code == 200, r.text
    sign_in(page, server, server.tokens["auditor"], "#/runs/served-run")
    timeline = page.get_by_role("table", name="Timeline")
    timeline.wait_for()
    (row,) = [
        r for r in timeline.locator("tbody tr").all() if r.locator("td").first.inner_text() == "0"
    ]
    marks = row.locator("td").nth(4).inner_text()
    assert "memo hit ×2 on this server" in marks and "live ×1 on this server" in marks, marks
    assert page.get_by_text("This server holds the run").count() == 1
