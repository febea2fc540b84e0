"""The console's Memory page in a real browser: an admin forgets an item (with the id typed
again), the forget shows at once in Ledger and in the item's history; an auditor lists the
items in its reach, never another tenant's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from browser.console_support import (
    ACME_TEXT,
    CORP_TEXT,
    REJECT_TEXT,
    Server,
    responses,
    shoot,
    sign_in,
)

from memseal.replay.evidence.bundle import verify_bundle

FORGET_TEXT = "the acme test card number is 4242"


def _agent(server: Server) -> httpx.Client:
    headers = {"Authorization": f"Bearer {server.tokens['agent']}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def test_an_admin_forgets_an_item_after_typing_its_id_and_ledger_shows_it_at_once(
    server: Server, page: Any, artifacts: Path
) -> None:
    with _agent(server) as agent:
        call = agent.post("/v1/tools/memory_store", json={"learning": {"text": FORGET_TEXT}})
        assert call.status_code == 200, call.text
        item = call.json()["result"]["id"]
    sign_in(page, server, server.admin, f"#/memory/{item}")
    page.get_by_role("table", name=f"History of {item}").wait_for()
    page.get_by_role("button", name="Forget", exact=True).click()
    confirm = page.get_by_role("button", name=f"Confirm: Forget {item}")
    typed = page.get_by_label("Type the item id to confirm")
    assert typed.evaluate("el => el === document.activeElement")
    assert confirm.is_disabled()
    typed.fill(item[:-1])  # one character short: still refused
    assert confirm.is_disabled()
    typed.fill(item)
    assert confirm.is_disabled()  # no reason yet: the API would refuse it
    page.get_by_label("Reason for the forget").fill("customer asked, ticket 881")
    confirm.click()
    status = page.get_by_role("status").filter(has_text="forgotten")
    status.wait_for()
    seq = status.get_by_role("link").inner_text().removeprefix("seq ")
    # The history shows the forget marker, and the stored entry's payload as erased by it.
    marker = page.locator(f"[data-forgotten='{seq}']")
    marker.wait_for()
    history = page.get_by_role("table", name=f"History of {item}").inner_text()
    assert f"erased by the forget at seq {seq}" in history and "memory_forgotten" in history
    # The forget's own row shows who asked and why, from its signed payload.
    assert "customer asked, ticket 881" in history and "first admin" in history
    shoot(page, artifacts, "memory-forget")
    # The signed entry, at once in Ledger.
    marker.get_by_role("link", name=f"seq {seq}").click()
    page.get_by_role("heading", name=f"Entry {seq}: memory_forgotten").wait_for()
    assert item in page.locator("main").inner_text()
    page.goto(f"{server.url}/#/ledger")
    page.get_by_label("Kind").select_option("memory_forgotten")
    page.get_by_role("button", name="Show").click()
    page.get_by_role("link", name=seq, exact=True).wait_for()
    with _agent(server) as agent:
        listed = agent.post("/v1/tools/memory_list", json={}).json()["result"]["items"]
        fetched = agent.post("/v1/tools/memory_fetch", json={"query": "test card number"})
    assert item not in [i["id"] for i in listed]
    assert FORGET_TEXT not in fetched.text


def test_a_forget_the_api_refuses_shows_its_error_and_forgets_nothing(
    server: Server, page: Any
) -> None:
    with _agent(server) as agent:
        items = agent.post("/v1/tools/memory_list", json={}).json()["result"]["items"]
    (item,) = [i["id"] for i in items if i["text"] == ACME_TEXT]
    # A placed admin of another tenant: the item is outside its reach, the API says so.
    other = server.token("admin", "team:globex")
    sign_in(page, server, other, f"#/memory/{item}")
    page.get_by_role("button", name="Forget", exact=True).click()
    page.get_by_label("Type the item id to confirm").fill(item)
    page.get_by_label("Reason for the forget").fill("not ours to keep")
    page.get_by_role("button", name=f"Confirm: Forget {item}").click()
    alert = page.locator("main [role=alert]")
    alert.wait_for()
    assert "in your reach" in alert.inner_text()
    with _agent(server) as agent:
        still = agent.post("/v1/tools/memory_list", json={}).json()["result"]["items"]
    assert item in [i["id"] for i in still]


def test_an_auditor_lists_and_searches_the_items_in_its_reach_and_no_other(
    server: Server, page: Any, artifacts: Path
) -> None:
    seen = responses(page)
    sign_in(page, server, server.tokens["auditor"], "#/memory")
    listed = page.get_by_role("table", name="Items in your reach")
    listed.wait_for()
    text = listed.inner_text()
    assert ACME_TEXT in text and "team:acme/agent:writer" in text
    # No trust action: an auditor reads.
    assert page.get_by_role("button", name="Forget", exact=True).count() == 0
    page.get_by_role("searchbox", name="Search").fill("vault deploy")
    page.get_by_label("Mode").select_option("exact")
    page.get_by_role("button", name="Search", exact=True).click()
    hits = page.get_by_role("table", name="Hits (exact)")
    hits.wait_for()
    assert ACME_TEXT in hits.inner_text()
    shoot(page, artifacts, "memory-auditor")
    page.get_by_role("searchbox", name="Search").fill("roadmap globex")
    page.get_by_role("button", name="Search", exact=True).click()
    page.get_by_text("No items here.").wait_for()
    for body in [page.content(), *seen]:
        assert CORP_TEXT not in body


def test_an_auditor_exports_a_run_bundle_from_the_timeline_and_it_verifies(
    server: Server, page: Any, tmp_path: Path
) -> None:
    sign_in(page, server, server.tokens["auditor"], "#/runs/acme-nightly")
    page.get_by_role("table", name="Timeline").wait_for()
    with page.expect_download() as info:
        page.get_by_role("button", name="Export the bundle").click()
    saved = tmp_path / "acme-nightly.bundle"
    info.value.save_as(saved)
    assert verify_bundle(saved.read_bytes(), server.vkey()).run_id == "acme-nightly"
    assert REJECT_TEXT.encode() not in saved.read_bytes()  # payloads are base64, as stored
    # Another tenant's run: the API answers as if there were none, and the page says so.
    page.goto(f"{server.url}/#/runs/corp-secret")
    page.get_by_text("no run corp-secret in your reach").wait_for()
