"""The web console in a real browser: roles, in-browser verification, the run timeline,
an admin's trust action, keyboard use and labels. Each test signs in with a real token
on a real server; the data folder is seeded through the public Python API."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser.console_support import (
    ACME_TEXT,
    CORP,
    CORP_TEXT,
    REJECT_TEXT,
    Server,
    in_thread,
    responses,
    shoot,
    sign_in,
)

import memseal

PAGES = ["overview", "ledger", "verify", "runs", "memory", "tokens"]


def nav_links(page: Any) -> list[str]:
    return page.locator("#nav a").all_inner_texts()


def test_agent_at_acme_never_sees_acme_corp_items_in_the_page_or_its_requests(
    server: Server, page: Any, artifacts: Path
) -> None:
    seen = responses(page)
    sign_in(page, server, server.tokens["agent"], "#/memory")
    page.get_by_role("table", name="Items in your reach").wait_for()
    # No ledger or token pages; Verify here reads only what the server's tiles make public.
    assert nav_links(page) == ["Verify here", "Runs", "Memory"]
    main = page.locator("main").inner_text()
    assert ACME_TEXT in main and REJECT_TEXT in main
    page.get_by_role("searchbox", name="Search").fill("roadmap globex")
    page.get_by_role("button", name="Search", exact=True).click()
    page.get_by_role("table", name="Hits (hybrid)").or_(page.get_by_role("alert")).wait_for()
    shoot(page, artifacts, "memory-agent")
    # The other tenant's text and namespace: not in the page, not in any answer it got.
    for body in [page.content(), *seen]:
        assert CORP_TEXT not in body and "acme-corp" not in body
    # Its ledger routes are the API's to refuse, not the console's to hide.
    page.goto(f"{server.url}/#/ledger")
    assert nav_links(page) == ["Verify here", "Runs", "Memory"]


def test_auditor_sees_only_its_tenants_runs_and_payloads(
    server: Server, page: Any, artifacts: Path
) -> None:
    seen = responses(page)
    sign_in(page, server, server.tokens["auditor"], "#/runs")
    page.get_by_role("table", name="Runs in your reach, newest first").wait_for()
    assert nav_links(page) == ["Overview", "Ledger", "Verify here", "Runs", "Memory"]
    runs = page.locator("main").inner_text()
    assert "acme-nightly" in runs and "corp-secret" not in runs
    page.goto(f"{server.url}/#/ledger")
    page.get_by_role("table", name="Entries").wait_for()
    ledger = page.locator("main").inner_text()
    # Every header is an auditor's (the chain needs them); the other tenant's payload not.
    assert "withheld (outside your reach)" in ledger
    shoot(page, artifacts, "ledger-auditor")
    for body in [page.content(), *seen]:
        assert CORP_TEXT not in body


def test_admin_sees_every_page(server: Server, page: Any, artifacts: Path) -> None:
    sign_in(page, server, server.admin)
    assert nav_links(page) == ["Overview", "Ledger", "Verify here", "Runs", "Memory", "Tokens"]
    for name in PAGES:
        page.goto(f"{server.url}/#/{name}")
        page.locator("main h2").first.wait_for()
        page.wait_for_load_state("networkidle")
        assert page.locator("main [role=alert]").count() == 0, page.locator("main").inner_text()
        shoot(page, artifacts, f"page-{name}")
    page.goto(f"{server.url}/#/overview")
    page.get_by_text("tool calls/s").wait_for(timeout=10_000)
    assert "-----" not in page.locator("main").inner_text()


def verify_in_browser(page: Any, server: Server) -> Any:
    page.get_by_label("Trusted vkeys (one a line)").fill(server.vkey())
    page.get_by_role("button", name="Verify checkpoint and entries").click()
    verdict = page.locator("[data-verdict]").first
    verdict.wait_for(timeout=30_000)
    return verdict


def test_in_browser_verify_passes_on_a_good_ledger(
    server: Server, page: Any, artifacts: Path
) -> None:
    sign_in(page, server, server.tokens["auditor"], "#/verify")
    verdict = verify_in_browser(page, server)
    assert verdict.get_attribute("data-verdict") == "pass", verdict.inner_text()
    checks = page.get_by_role("list", name="Checks of the checkpoint and entries").inner_text()
    assert "computed here, is the checkpoint's" in checks
    # Inclusion of one entry, checked against the proof's signed checkpoint.
    page.get_by_label("Entry seq").fill("3")
    page.get_by_role("button", name="Verify inclusion").click()
    page.get_by_text("Entry 3 is included in the checkpoint").wait_for()
    shoot(page, artifacts, "verify-pass", doc="console-verify.png")
    # Keep this checkpoint; the log grows and a new one is cut; the two are consistent.
    page.get_by_role("button", name="Keep this checkpoint").click()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        call = client.post(
            "/v1/tools/memory_store",
            headers={"Authorization": f"Bearer {server.tokens['agent']}"},
            json={"learning": {"text": "a later note"}},
        )
        assert call.status_code == 200, call.text
    in_thread(lambda: _checkpoint(server.folder))
    page.get_by_role("button", name="Check consistency from size").first.click()
    page.get_by_text("you kept is a prefix of the current tree").wait_for()


async def _checkpoint(folder: Path) -> None:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        await memory.ledger.checkpoint()


def test_in_browser_verify_turns_red_on_an_entry_edited_in_the_database(
    tmp_path: Path, page: Any, artifacts: Path
) -> None:
    folder = tmp_path / "data"
    in_thread(lambda: _tampered(folder))
    server = seeded_server_unseeded(folder)
    try:
        sign_in(page, server, server.tokens["auditor"], "#/verify")
        verdict = verify_in_browser(page, server)
        text = verdict.inner_text()
        assert verdict.get_attribute("data-verdict") == "fail", text
        assert "seq 2: signature" in text
        shoot(page, artifacts, "verify-tampered")
    finally:
        server.stop()


async def _tampered(folder: Path) -> None:
    from memseal import ToolScope

    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        async with memory.run("r", ToolScope.placed_at("team:acme/agent:writer")) as run:
            await run.call("memory_store", {"learning": {"text": "one"}})
            await run.call("memory_store", {"learning": {"text": "two"}})
        await memory.ledger.checkpoint()
    # Rewrite entry 2's bytes in place (its time: valid JSON, same length), as an attacker
    # with the file would; the stored signature is now over other bytes.
    with sqlite3.connect(folder / "ledger.db") as db:
        (leaf,) = db.execute("SELECT leaf FROM entries WHERE seq = 2").fetchone()
        edited = bytes(leaf).replace(b'"at":"20', b'"at":"19', 1)
        assert edited != bytes(leaf)
        db.execute("UPDATE entries SET leaf = ? WHERE seq = 2", (edited,))


def seeded_server_unseeded(folder: Path) -> Server:
    server = Server(folder)
    server.tokens = {"auditor": server.token("auditor", "team:acme")}
    return server.start()


def test_run_timeline_matches_the_recorded_steps(
    server: Server, page: Any, artifacts: Path
) -> None:
    recorded = _run_entries(server)
    sign_in(page, server, server.tokens["auditor"], "#/runs/acme-nightly")
    timeline = page.get_by_role("table", name="Timeline")
    timeline.wait_for()
    rows = timeline.locator("tbody tr")
    assert rows.count() == len(recorded)
    for i, (seq, kind, body) in enumerate(recorded):
        cells = rows.nth(i).locator("td").all_inner_texts()
        assert cells[-1] == str(seq)
        if kind == "memory_tool_call":
            assert cells[0] == str(body["step"]) and cells[1] == body["tool"]
    by_seq = {seq: rows.nth(i).inner_text() for i, (seq, _, _) in enumerate(recorded)}
    step2 = [s for s, k, b in recorded if k == "memory_tool_call" and b["step"] == 2]
    revalidated, replaced = step2[-1], step2[0]
    forked = [s for s, k, b in recorded if k == "memory_tool_call" and b["step"] == 3][-1]
    diverged = next(s for s, k, _ in recorded if k == "run_forked")
    assert "revalidated" in by_seq[revalidated] and "result_hash" in by_seq[revalidated]
    assert "forked" in by_seq[forked]
    assert "diverged" in by_seq[diverged] and "divergence" in by_seq[diverged]
    assert f"superseded by seq {revalidated}" in by_seq[replaced]
    shoot(page, artifacts, "run-timeline", doc="console-run-timeline.png")


def _run_entries(server: Server) -> list[tuple[int, str, dict[str, Any]]]:
    with sqlite3.connect(server.folder / "ledger.db") as db:
        rows = db.execute("SELECT seq, leaf FROM entries ORDER BY seq").fetchall()
    out = []
    for seq, leaf in rows:
        entry = json.loads(leaf)
        if entry["body"].get("run_id") == "acme-nightly":
            out.append((seq, entry["kind"], entry["body"]))
    return out


def test_admins_reject_appears_in_ledger_and_hides_the_item_from_agent_reads(
    server: Server, page: Any, artifacts: Path
) -> None:
    agent = {"Authorization": f"Bearer {server.tokens['agent']}"}
    with httpx.Client(base_url=server.url, headers=agent, timeout=30) as client:
        items = client.post("/v1/tools/memory_list", json={}).json()["result"]["items"]
        (item,) = [i["id"] for i in items if i["text"] == REJECT_TEXT]
    sign_in(page, server, server.admin, f"#/memory/{item}")
    page.get_by_role("table", name=f"History of {item}").wait_for()
    page.get_by_label("Reason").fill("the release date moved")
    page.get_by_role("button", name="Reject", exact=True).click()
    page.get_by_role("button", name=f"Confirm: Reject {item}").click()
    status = page.get_by_role("status").filter(has_text="rejected")
    status.wait_for()
    seq = status.get_by_role("link").inner_text().removeprefix("seq ")
    shoot(page, artifacts, "memory-reject")
    # The signed entry, at once in Ledger.
    page.get_by_role("link", name=f"seq {seq}").click()
    page.get_by_role("heading", name=f"Entry {seq}: trust_changed").wait_for()
    assert item in page.locator("main").inner_text()
    page.goto(f"{server.url}/#/ledger")
    page.get_by_label("Kind").select_option("trust_changed")
    page.get_by_role("button", name="Show").click()
    page.get_by_role("link", name=seq, exact=True).wait_for()
    # The agent's reads no longer return it.
    with httpx.Client(base_url=server.url, headers=agent, timeout=30) as client:
        listed = client.post("/v1/tools/memory_list", json={}).json()["result"]["items"]
        fetched = client.post("/v1/tools/memory_fetch", json={"query": "release friday"})
    assert item not in [i["id"] for i in listed]
    assert REJECT_TEXT not in fetched.text


def test_keyboard_navigation_and_labels(server: Server, page: Any) -> None:
    page.goto(server.url)
    snapshot = page.locator("body").aria_snapshot()
    assert 'textbox "API token"' in snapshot and 'button "Sign in"' in snapshot
    # Sign in by keyboard alone: the token field has focus, Enter submits.
    page.keyboard.type(server.tokens["auditor"])
    page.keyboard.press("Enter")
    page.get_by_role("navigation", name="Pages").wait_for()
    snapshot = page.locator("body").aria_snapshot()
    for name in ("Overview", "Ledger", "Verify here", "Runs"):
        assert f'link "{name}"' in snapshot
    # Once the first page is in (it takes the focus), Tab from the first link to the
    # Ledger link and follow it with Enter.
    page.get_by_role("heading", name="Overview", exact=True).wait_for()
    page.wait_for_load_state("networkidle")
    page.locator("#nav a").first.focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Ledger"
    page.keyboard.press("Enter")
    page.get_by_role("table", name="Entries").wait_for()
    assert page.get_by_role("link", name="Ledger").get_attribute("aria-current") == "page"
    snapshot = page.locator("main").aria_snapshot()
    for label in ("Kind", "Run", "From seq"):
        assert label in snapshot
    page.goto(f"{server.url}/#/verify")
    page.get_by_label("Trusted vkeys (one a line)").wait_for()
    snapshot = page.locator("main").aria_snapshot()
    assert 'button "Verify checkpoint and entries"' in snapshot
    assert 'spinbutton "Entry seq"' in snapshot


@pytest.mark.parametrize("path", ["/", "/console/", "/console/app.js"])
def test_console_files_forbid_inline_script_and_other_origins(server: Server, path: str) -> None:
    answer = httpx.get(f"{server.url}{path}", timeout=30)
    assert answer.status_code == 200
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    # Other origins only to read a tiles mirror (Verify here), never to load code from.
    assert "connect-src 'self' https: http://127.0.0.1:* http://localhost:*;" in policy
    assert CORP not in answer.text
