"""The API routes the console's admin and auditor pages use, over real HTTP: an admin's
forget (confirmed by the id typed twice, within the admin's reach), and the run bundle an
auditor exports (only of runs inside its reach), a run's memo; on the folder's SQLite file and
on PostgreSQL when the test server is there."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator

import httpx
import msgspec
import pytest
from stores import ADAPTERS, drop_schemas, fresh_url
from test_service_support import ServerThread, assert_error


@pytest.fixture(scope="module", params=ADAPTERS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerThread]:
    adapter: str = request.param
    url, schema = (None, None) if adapter == "sqlite" else fresh_url("consoleapi", adapter)
    try:
        with ServerThread(tmp_path_factory.mktemp("console-api") / "data", store=url) as running:
            yield running
    finally:
        if schema is not None:
            asyncio.run(drop_schemas([schema], adapter))


def store(c: httpx.Client, text: str, **headers: str) -> str:
    r = c.post("/v1/tools/memory_store", json={"learning": {"text": text}}, headers=headers)
    assert r.status_code == 200, r.text
    return str(r.json()["result"]["id"])


def listed(c: httpx.Client) -> list[str]:
    r = c.post("/v1/tools/memory_list", json={"limit": 50})
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["result"]["items"]]


def size(admin: httpx.Client) -> int:
    return int(admin.get("/v1/ledger").json()["size"])


def test_an_admins_forget_is_a_signed_entry_that_erases_the_items_payloads(
    server: ServerThread,
) -> None:
    with server.client(server.token("agent", "team:fgt/agent:x")) as agent:
        item = store(agent, "the staging password is hunter2")
        with server.client(server.admin) as admin:
            stored = admin.get(f"/v1/ledger/entries?item={item}").json()["entries"][0]
            assert stored["payload"] is not None
            body = {"confirm": item, "reason": "a leaked secret"}
            r = admin.post(f"/v1/admin/items/{item}/forget", json=body)
            assert r.status_code == 200, r.text
            done = r.json()
            assert done["id"] == item and len(done["seqs"]) == 1
            assert stored["seq"] in done["redacted"]
            entry = admin.get(f"/v1/ledger/entries/{done['seqs'][0]}").json()
            assert entry["kind"] == "memory_forgotten"
            assert entry["header"]["body"]["items"] == [item]
            again = admin.get(f"/v1/ledger/entries/{stored['seq']}").json()
            assert again["payload"] is None and again["redacted"]
            assert again["redacted_by"] == done["seqs"][0]
            # Forgotten once: a second forget finds nothing to forget.
            gone = admin.post(
                f"/v1/admin/items/{item}/forget", json={"confirm": item, "reason": "again"}
            )
            assert_error(gone, 404, "not_found")
        assert item not in listed(agent)
        fetched = agent.post("/v1/tools/memory_fetch", json={"query": "staging password"})
        assert "hunter2" not in fetched.text


def test_a_forget_without_the_id_typed_again_is_refused_naming_the_field(
    server: ServerThread,
) -> None:
    with server.client(server.token("agent", "team:fgt2/agent:x")) as agent:
        item = store(agent, "kept: the forget was never confirmed")
        with server.client(server.admin) as admin:
            before = size(admin)
            other = item[:-1] + ("1" if item.endswith("0") else "0")
            why = {"reason": "cleanup"}
            for body in ({}, {"confirm": "", **why}, {"confirm": other, **why}, {"confirm": 7}):
                r = admin.post(f"/v1/admin/items/{item}/forget", json=body)
                message = assert_error(r, 400, "invalid_request")["error"]["message"]
                assert "`confirm`" in message, message
            bad = admin.post("/v1/admin/items/n%20o/forget", json={"confirm": "n o", **why})
            assert "`item_id`" in assert_error(bad, 400, "invalid_request")["error"]["message"]
            assert size(admin) == before  # nothing signed, nothing erased
        assert item in listed(agent)


def test_a_forget_signs_its_reason_and_actor_and_refuses_a_missing_reason_or_unknown_field(
    server: ServerThread,
) -> None:
    with server.client(server.token("agent", "team:fgt4/agent:x")) as agent:
        item = store(agent, "the forget reason is signed with it")
        with server.client(server.admin) as admin:
            before = size(admin)
            for body, name in (
                ({"confirm": item}, "reason"),
                ({"confirm": item, "reason": ""}, "reason"),
                ({"confirm": item, "reason": "   "}, "reason"),
                ({"confirm": item, "reason": "ok", "reasn": "typo"}, "reasn"),
            ):
                r = admin.post(f"/v1/admin/items/{item}/forget", json=body)
                message = assert_error(r, 400, "invalid_request")["error"]["message"]
                assert f"`{name}`" in message, message
            assert size(admin) == before and item in listed(agent)
            body = {"confirm": item, "reason": "GDPR request 17"}
            done = admin.post(f"/v1/admin/items/{item}/forget", json=body)
            assert done.status_code == 200, done.text
            entry = admin.get(f"/v1/ledger/entries/{done.json()['seqs'][0]}").json()
            why = msgspec.json.decode(base64.b64decode(entry["payload"]))
            assert why["reason"] == "GDPR request 17"
            # The actor is the asking token, as a trust change names it: id, then label.
            tokens = {t["id"]: t for t in admin.get("/v1/admin/tokens").json()["tokens"]}
            token_id, _, label = why["actor"].partition(" ")
            assert tokens[token_id]["role"] == "admin" and label == tokens[token_id]["label"]


def test_an_admin_with_the_longest_label_still_forgets_and_promotes(
    server: ServerThread,
) -> None:
    # The signed actor is the token id and its label; a label at its own limit must not
    # push the actor past the actor's limit and turn every admin action into a 400.
    with server.client(server.admin) as admin:
        minted = admin.post(
            "/v1/admin/tokens", json={"role": "admin", "place": "/", "label": "L" * 200}
        )
        assert minted.status_code == 201, minted.text
    with server.client(server.token("agent", "team:fgt5/agent:x")) as agent:
        kept = store(agent, "promoted by the long-labelled admin")
        gone = store(agent, "forgotten by the long-labelled admin")
        with server.client(minted.json()["token"]) as long_admin:
            r = long_admin.post(f"/v1/admin/items/{kept}/promote", json={"reason": "checked"})
            assert r.status_code == 200, r.text
            body = {"confirm": gone, "reason": "asked to"}
            done = long_admin.post(f"/v1/admin/items/{gone}/forget", json=body)
            assert done.status_code == 200, done.text
            entry = long_admin.get(f"/v1/ledger/entries/{done.json()['seqs'][0]}").json()
        why = msgspec.json.decode(base64.b64decode(entry["payload"]))
        assert len(why["actor"]) == 200 and why["actor"].endswith("L")
        assert why["actor"].startswith(minted.json()["info"]["id"] + " L")
        assert gone not in listed(agent)


def test_only_an_admin_forgets_and_only_within_its_reach(server: ServerThread) -> None:
    with server.client(server.token("agent", "team:fgt3-corp/agent:x")) as agent:
        theirs = store(agent, "another tenant's note")
        placed = server.client(server.token("admin", "team:fgt3"))
        auditor = server.client(server.token("auditor", "/"))
        with placed, auditor:
            body = {"confirm": theirs, "reason": "not yours"}
            assert_error(placed.post(f"/v1/admin/items/{theirs}/forget", json=body), 404)
            assert_error(auditor.post(f"/v1/admin/items/{theirs}/forget", json=body), 403)
            assert_error(agent.post(f"/v1/admin/items/{theirs}/forget", json=body), 403)
        assert theirs in listed(agent)
        # The payload still names the item: nothing was erased by the refused calls.
        with server.client(server.admin) as admin:
            entries = admin.get(f"/v1/ledger/entries?item={theirs}").json()["entries"]
        assert b"another tenant" in base64.b64decode(entries[0]["payload"] or "")


def test_an_auditor_lists_and_searches_only_the_items_in_its_reach(server: ServerThread) -> None:
    with server.client(server.token("agent", "team:aud/agent:x")) as mine:
        kept = store(mine, "the aud rollout is on tuesday")
    with server.client(server.token("agent", "team:aud-corp/agent:y")) as theirs:
        hidden = store(theirs, "aud-corp rollout is secret")
    with server.client(server.token("auditor", "team:aud")) as auditor:
        page = auditor.get("/v1/ledger/items").json()
        assert [i["id"] for i in page["items"]] == [kept]
        assert page["items"][0]["trust"] == "unverified" and page["next_cursor"] is None
        found = auditor.get("/v1/ledger/items", params={"query": "rollout", "mode": "exact"})
        assert found.status_code == 200, found.text
        assert [i["id"] for i in found.json()["items"]] == [kept]
        assert "secret" not in found.text and hidden not in found.text
        for bad, name in (
            ({"min_trust": "rejected"}, "min_trust"),
            ({"limit": "0"}, "limit"),
            ({"query": "x", "mode": "fuzzy"}, "mode"),
            ({"cursor": "nope"}, "cursor"),
        ):
            r = auditor.get("/v1/ledger/items", params=bad)
            message = assert_error(r, 400, "invalid_request")["error"]["message"]
            assert name in message, (bad, message)
    with server.client(server.token("agent", "team:aud/agent:z")) as agent:
        assert_error(agent.get("/v1/ledger/items"), 403, "forbidden")


def test_an_auditor_exports_the_bundle_of_a_run_in_its_reach_only(server: ServerThread) -> None:
    from memseal.replay.evidence.bundle import verify_bundle

    writer = server.client(server.token("agent", "team:exp/agent:w"))
    team = server.client(server.token("agent", "team:exp"))
    other = server.client(server.token("agent", "team:exp-corp/agent:w"))
    auditor = server.client(server.token("auditor", "team:exp"))
    narrow = server.client(server.token("auditor", "team:exp/agent:w"))
    with writer, team, other, auditor, narrow:
        r = writer.post("/v1/runs/exp-own/tools/memory_store", json={"learning": {"text": "w1"}})
        assert r.status_code == 200, r.text
        r = other.post("/v1/runs/exp-corp/tools/memory_store", json={"learning": {"text": "c"}})
        assert r.status_code == 200, r.text
        vkey = (server.folder / "keys" / "ledger.vkey").read_text().strip()
        for who in (auditor, narrow):
            got = who.get("/v1/runs/exp-own/export")
            assert got.status_code == 200, got.text
            assert verify_bundle(got.content, vkey).run_id == "exp-own"
        # Another tenant's run: not in the auditor's reach, not even by name.
        assert_error(auditor.get("/v1/runs/exp-corp/export"), 404, "not_found")
        assert_error(auditor.get("/v1/runs/never-was/export"), 404, "not_found")
        # A run whose result cites an item above the narrow auditor's subtree (the writer
        # reads its team's node): its bundle would carry that item's text, so it is refused.
        store(team, "exp team note: the budget is 42")
        r = writer.post("/v1/runs/exp-cite/tools/memory_fetch", json={"query": "budget"})
        assert r.status_code == 200 and "budget is 42" in r.text, r.text
        refused = narrow.get("/v1/runs/exp-cite/export")
        message = assert_error(refused, 403, "forbidden")["error"]["message"]
        assert "outside your reach" in message and "42" not in refused.text
        wide = auditor.get("/v1/runs/exp-cite/export")
        assert wide.status_code == 200, wide.text
        assert verify_bundle(wide.content, vkey).run_id == "exp-cite"


def test_a_runs_memo_is_listed_for_an_auditor_in_reach_only(server: ServerThread) -> None:
    writer = server.client(server.token("agent", "team:memo/agent:w"))
    other = server.client(server.token("agent", "team:memo-corp/agent:w"))
    auditor = server.client(server.token("auditor", "team:memo"))
    with writer, other, auditor:
        for text in ("m0", "m1", "m2"):
            r = writer.post(
                "/v1/runs/memo-run/tools/memory_store", json={"learning": {"text": text}}
            )
            assert r.status_code == 200, r.text
        r = other.post("/v1/runs/memo-corp/tools/memory_list", json={})
        assert r.status_code == 200, r.text
        got = auditor.get("/v1/ledger/memos", params={"run": "memo-run", "limit": 2}).json()
        assert [m["step"] for m in got["memos"]] == [0, 1] and got["next_after"] == 1
        rest = auditor.get("/v1/ledger/memos", params={"run": "memo-run", "after": 1}).json()
        assert [m["step"] for m in rest["memos"]] == [2] and rest["next_after"] is None
        calls = auditor.get("/v1/ledger/entries", params={"run": "memo-run"}).json()["entries"]
        signed = {
            e["header"]["body"]["step"]: e["seq"] for e in calls if "step" in e["header"]["body"]
        }
        assert {m["step"]: m["seq"] for m in got["memos"] + rest["memos"]} == signed
        assert_error(auditor.get("/v1/ledger/memos", params={"run": "memo-corp"}), 404)
        assert_error(auditor.get("/v1/ledger/memos", params={"run": "never"}), 404)
        missing = assert_error(auditor.get("/v1/ledger/memos"), 400, "invalid_request")
        assert "run" in missing["error"]["message"]
        assert_error(writer.get("/v1/ledger/memos", params={"run": "memo-run"}), 403)


def test_the_memo_route_counts_what_this_server_answered_from_the_memo_and_live(
    server: ServerThread,
) -> None:
    agent = server.client(server.token("agent", "team:tally/agent:w"))
    auditor = server.client(server.token("auditor", "team:tally"))
    with agent, auditor:
        path = "/v1/runs/tally-run/tools/memory_list"
        calls = [
            ({}, ""),
            ({"X-Memseal-Step": "0"}, ""),
            ({"X-Memseal-Step": "0"}, "?revalidate=true"),
            ({}, ""),
        ]
        for headers, query in calls:
            r = agent.post(path + query, json={}, headers=headers)
            assert r.status_code == 200, r.text
        got = auditor.get("/v1/ledger/memos", params={"run": "tally-run"}).json()
        assert got["held_here"] is True
        counted = {m["step"]: (m["replayed_here"], m["live_here"]) for m in got["memos"]}
        # Step 0: live, then replayed (the retry), then live again (revalidated); step 1 live.
        assert counted == {0: (1, 2), 1: (0, 1)}, got
        # Released, the run is no longer held here: the ledger still has its memo, the
        # counts are gone with the held run.
        assert agent.delete("/v1/runs/tally-run").json()["closed"] is True
        after = auditor.get("/v1/ledger/memos", params={"run": "tally-run"}).json()
        assert after["held_here"] is False and len(after["memos"]) == 2
        assert all(m["replayed_here"] is None for m in after["memos"])
