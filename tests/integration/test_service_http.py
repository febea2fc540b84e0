"""The HTTP service through a real uvicorn server on 127.0.0.1: tenants, roles, tokens, routes."""

from __future__ import annotations

import base64
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_service_support import ServerThread, assert_error

from memseal.service.tokens import TokenStore

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("svc") / "data") as running:
        yield running


def store(c: httpx.Client, text: str, **headers: str) -> dict:
    r = c.post("/v1/tools/memory_store", json={"learning": {"text": text}}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def test_first_serve_makes_one_admin_token(server: ServerThread) -> None:
    assert server.admin is not None and server.admin.startswith("ms_")
    raw = (server.folder / "tokens.db").read_bytes()
    assert server.admin.encode() not in raw  # stored hashed, never in the clear
    with server.client(server.admin) as admin:
        listed = admin.get("/v1/admin/tokens").json()["tokens"]
    assert [t["role"] for t in listed].count("admin") >= 1
    assert all("token" not in t and "hash" not in t for t in listed)


def test_two_tenants_never_see_count_or_forget_each_other(server: ServerThread) -> None:
    a = server.client(server.token("agent", "team:a/agent:x"))
    b = server.client(server.token("agent", "team:b/agent:y"))
    with a, b:
        mine = store(a, "tenant A likes green tea")["result"]["id"]
        theirs = store(b, "tenant B secret: launch code tea-42")["result"]["id"]
        for attempt in (
            {"query": "tea"},
            {"query": "launch code", "mode": "exact"},
            {"query": "tea", "filter": {"kinds": ["fact"]}, "limit": 50},
        ):
            r = a.post("/v1/tools/memory_fetch", json=attempt)
            assert r.status_code == 200, r.text
            ids = [h["id"] for h in r.json()["result"]["hits"]]
            assert theirs not in ids and "secret" not in r.text
        listed = a.post("/v1/tools/memory_list", json={"limit": 50}).json()["result"]
        assert [i["id"] for i in listed["items"]] == [mine]
        got = a.post("/v1/tools/memory_get", json={"ids": [theirs, mine]}).json()["result"]
        assert [i["id"] for i in got["items"]] == [mine]
        assert theirs in got["missing"] and "secret" not in json.dumps(got)
        counted = a.post("/v1/tools/memory_explore", json={"facet": "kind"}).json()["result"]
        assert counted["total"] == 1
        recall = a.post("/v1/tools/memory_recall", json={"question": "launch code?"}).json()
        assert "tea-42" not in json.dumps(recall)
        # Whatever the request says: a namespace or reach anywhere is refused ...
        for sneaky in (
            {"query": "tea", "namespace": "team:b/agent:y"},
            {"query": "tea", "filter": {"namespace": "team:b"}},
            {"query": "tea", "reach": {"mode": "subtree", "node": ""}},
        ):
            assert_error(a.post("/v1/tools/memory_fetch", json=sneaky), 400, "invalid_request")
        # ... and headers or query strings naming another place change nothing.
        r = a.post(
            "/v1/tools/memory_list?place=team:b/agent:y&namespace=team:b",
            json={},
            headers={"X-Memseal-Place": "team:b/agent:y", "X-Memseal-Reach": "all"},
        )
        assert [i["id"] for i in r.json()["result"]["items"]] == [mine]
        # Forgetting: by id (skipped) and by filter (confined to A's reach).
        r = a.post("/v1/tools/memory_forget", json={"ids": [theirs]}).json()["result"]
        assert r == {"forgotten": [], "skipped": [theirs]}
        r = a.post("/v1/tools/memory_forget", json={"filter": {"kinds": ["fact"]}})
        assert r.json()["result"]["forgotten"] == [mine]
        # B's memory is intact.
        back = b.post("/v1/tools/memory_get", json={"ids": [theirs]}).json()["result"]
        assert [i["id"] for i in back["items"]] == [theirs]


def test_a_run_belongs_to_the_scope_that_started_it(server: ServerThread) -> None:
    a = server.client(server.token("agent", "team:a2/agent:x"))
    b = server.client(server.token("agent", "team:b2/agent:y"))
    with a, b:
        r = b.post("/v1/runs/b-run/tools/memory_store", json={"learning": {"text": "B's run text"}})
        assert r.status_code == 200
        assert_error(a.get("/v1/runs/b-run"), 404, "not_found")
        r = a.post("/v1/runs/b-run/tools/memory_fetch", json={"query": "B's run"})
        assert_error(r, 404, "not_found")
        assert "B's run" not in r.text
        r = a.post(
            "/v1/tools/memory_fetch",
            json={"query": "x"},
            headers={"X-Memseal-Run": "b-run", "X-Memseal-Step": "0"},
        )
        assert_error(r, 404)
        assert_error(a.delete("/v1/runs/b-run"), 404)
        assert_error(a.get("/v1/runs/b-run/export"), 404)


def test_runs_number_steps_replay_and_report_status(server: ServerThread) -> None:
    with server.client(server.token("agent", "team:runs/agent:x")) as c:
        first = store(c, "run memory one", **{"X-Memseal-Run": "r-steps"})
        second = c.post(
            "/v1/tools/memory_fetch", json={"query": "memory"}, headers={"X-Memseal-Run": "r-steps"}
        ).json()
        assert (first["run_id"], first["step"]) == ("r-steps", 0)
        assert (second["run_id"], second["step"]) == ("r-steps", 1)
        # A step passed again replays its memo: same result, nothing new in the ledger.
        with server.client(server.admin) as admin:
            size = admin.get("/v1/ledger").json()["size"]
            again = c.post(
                "/v1/runs/r-steps/tools/memory_fetch",
                json={"query": "memory"},
                headers={"X-Memseal-Step": "1"},
            ).json()
            assert again == second
            assert admin.get("/v1/ledger").json()["size"] == size
        # A different call at a recorded step is a divergence, refused, nothing written.
        r = c.post(
            "/v1/runs/r-steps/tools/memory_fetch",
            json={"query": "other"},
            headers={"X-Memseal-Step": "1"},
        )
        assert_error(r, 409, "replay_divergence")
        status = c.get("/v1/runs/r-steps").json()
        assert status["recorded_steps"] == 2 and status["held_here"] is True
        exported = c.get("/v1/runs/r-steps/export")
        assert exported.status_code == 200, exported.text
        bundle = server.folder.parent / "r-steps.bundle"
        bundle.write_bytes(exported.content)
        with server.client(server.admin) as admin:
            root = admin.get("/v1/ledger").json()["trust_root"]
        done = subprocess.run(
            [str(BIN / "memseal"), "verify", str(bundle), "--trust", root],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert c.delete("/v1/runs/r-steps").json() == {"run_id": "r-steps", "closed": True}
        # Reopened after closing: resumes, replays step 0.
        replayed = c.post(
            "/v1/runs/r-steps/tools/memory_store", json={"learning": {"text": "run memory one"}}
        ).json()
        assert replayed == first
        # Outside a run: a fresh run id each time.
        one = c.post("/v1/tools/memory_list", json={}).json()
        two = c.post("/v1/tools/memory_list", json={}).json()
        assert one["run_id"] != two["run_id"] and one["step"] == 0
        # revalidate is a query flag: runs live again, records a replacement.
        fresh = c.post(
            "/v1/runs/r-steps/tools/memory_fetch?revalidate=true",
            json={"query": "memory"},
            headers={"X-Memseal-Step": "1"},
        )
        assert fresh.status_code == 200 and fresh.json()["step"] == 1


def test_x_memseal_key_answers_a_recorded_key_from_its_memo_in_any_order(
    server: ServerThread,
) -> None:
    fetch = {"query": "keyed memory", "mode": "exact"}
    learned = {"learning": {"text": "keyed memory over http"}}

    def call(c: httpx.Client, tool: str, body: dict, key: str, **more: str) -> httpx.Response:
        headers = {"X-Memseal-Run": "r-keys", "X-Memseal-Key": key, **more}
        return c.post(f"/v1/tools/{tool}", json=body, headers=headers)

    with server.client(server.token("agent", "team:keys/agent:x")) as c:
        with server.client(server.admin) as admin:
            first = call(c, "memory_fetch", fetch, "call_f0").json()
            stored = call(c, "memory_store", learned, "call_s").json()
            assert (first["step"], stored["step"]) == (0, 1)
            assert first["result"]["hits"] == []  # it ran before the store
            size = admin.get("/v1/ledger").json()["size"]
            # Re-issued in the same held run, in another order: the memos, nothing written.
            assert call(c, "memory_store", learned, "call_s").json() == stored
            assert call(c, "memory_fetch", fetch, "call_f0").json() == first
            assert c.delete("/v1/runs/r-keys").json()["closed"] is True
            # Resumed (the run reopened): the same; the run route takes the header too.
            again = c.post(
                "/v1/runs/r-keys/tools/memory_fetch",
                json=fetch,
                headers={"X-Memseal-Key": "call_f0"},
            )
            assert again.json() == first
            assert admin.get("/v1/ledger").json()["size"] == size
            # A new key with step 0's arguments is a new call, live: it finds the store.
            fresh = call(c, "memory_fetch", fetch, "call_f1").json()
            assert fresh["step"] == 2
            assert [h["text"] for h in fresh["result"]["hits"]] == ["keyed memory over http"]
            # The same key with other arguments diverges naming the key; nothing written.
            size = admin.get("/v1/ledger").json()["size"]
            diverged = assert_error(
                call(c, "memory_fetch", {"query": "other"}, "call_f0"), 409, "replay_divergence"
            )
            assert "call_f0" in diverged["error"]["message"]
            # A key recorded at another step than X-Memseal-Step names: a divergence too.
            assert_error(call(c, "memory_fetch", fetch, "call_f0", **{"X-Memseal-Step": "2"}), 409)
            # A bad key is a 400 naming `key`, before anything is read or written.
            for bad in ("k" * 201, "tab\tkey"):
                refused = assert_error(call(c, "memory_list", {}, bad), 400, "invalid_request")
                assert "`key`" in refused["error"]["message"]
            no_run = c.post("/v1/tools/memory_list", json={}, headers={"X-Memseal-Key": "k1"})
            assert "`key` needs a named run" in assert_error(no_run, 400)["error"]["message"]
            unreadable = c.post(
                "/v1/tools/memory_list",
                json={},
                headers=[("X-Memseal-Run", "r-keys"), ("X-Memseal-Key", b"\xff\xfe")],
            )
            assert "`key`" in assert_error(unreadable, 400)["error"]["message"]
            assert admin.get("/v1/ledger").json()["size"] == size
            # UTF-8 in the header is the key as the client wrote it.
            utf8 = c.post(
                "/v1/tools/memory_list",
                json={},
                headers=[("X-Memseal-Run", "r-keys"), ("X-Memseal-Key", "appel-é".encode())],
            )
            assert utf8.status_code == 200, utf8.text
            entry = admin.get(f"/v1/ledger/entries/{size}").json()
        signed = json.loads(base64.b64decode(entry["entry"]))
        assert (entry["kind"], signed["body"]["key"]) == ("memory_tool_call", "appel-é")


def test_tool_errors_are_4xx_in_the_error_shape_and_write_nothing(server: ServerThread) -> None:
    with server.client(server.token("agent", "team:err/agent:x", read_only=True)) as c:
        with server.client(server.admin) as admin:
            before = admin.get("/v1/ledger").json()["size"]
        r = c.post("/v1/tools/memory_store", json={"learning": {"text": "x"}})
        assert_error(r, 403, "unsupported")
        assert r.json()["run_id"].startswith("run-")
        assert_error(c.post("/v1/tools/memory_fetch", json={"limit": "ten"}), 400)
        assert_error(c.post("/v1/tools/no_such_tool", json={}), 400)
        assert_error(c.post("/v1/tools/memory_fetch", content=b"{not json"), 400)
        assert_error(c.post("/v1/tools/memory_fetch", content=b"[1, 2]"), 400)
        assert_error(c.post("/v1/tools/memory_fetch", content=b"\xff\xfe"), 400)
        big = b'{"query": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        assert_error(c.post("/v1/tools/memory_fetch", content=big), 413, "too_large")
        assert_error(c.get("/v1/nowhere"), 404)
        assert_error(c.put("/v1/tools"), 405)
        assert_error(c.post("/v1/tools/x", json={}, headers={"X-Memseal-Step": "-1"}), 400)
        assert_error(c.post("/v1/tools/x", json={}, headers={"X-Memseal-Run": "r\x01"}), 400)
        with server.client(server.admin) as admin:
            after = admin.get("/v1/ledger").json()
        # Refused calls outside a run leave at most their signed error records, never memory.
        assert after["size"] >= before
        with server.client(server.admin) as admin:
            page = admin.get("/v1/ledger/entries", params={"start": before, "limit": 200}).json()
        assert not [e for e in page["entries"] if e["kind"] == "memory_stored"]


def test_roles_reach_only_their_routes(server: ServerThread) -> None:
    agent = server.client(server.token("agent", "team:roles/agent:x"))
    auditor = server.client(server.token("auditor", "team:roles"))
    admin = server.client(server.admin)
    anonymous = server.client(None)
    odd = httpx.Client(base_url=server.url, headers={"Authorization": "x"})
    bogus = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer ms_nope"})
    with agent, auditor, admin, anonymous, odd, bogus:
        for c in (anonymous, odd):
            assert_error(c.get("/v1/tools"), 401, "unauthorized")
            assert_error(c.get("/v1/ledger"), 401, "unauthorized")
            assert_error(c.get("/v1/admin/tokens"), 401, "unauthorized")
        assert_error(bogus.get("/v1/tools"), 401)
        assert agent.get("/v1/tools").status_code == 200
        assert_error(agent.get("/v1/ledger/entries"), 403, "forbidden")
        assert_error(agent.get("/v1/ledger/checkpoint"), 403, "forbidden")
        assert_error(agent.get("/v1/admin/tokens"), 403, "forbidden")
        assert_error(agent.post("/v1/admin/items/x/promote", json={"reason": "r"}), 403)
        assert auditor.get("/v1/ledger").status_code == 200
        assert auditor.get("/v1/ledger/entries").status_code == 200
        assert_error(auditor.get("/v1/tools"), 403, "forbidden")
        assert_error(auditor.post("/v1/tools/memory_list", json={}), 403, "forbidden")
        assert_error(auditor.get("/v1/admin/tokens"), 403, "forbidden")
        assert_error(auditor.post("/v1/admin/tokens", json={"role": "admin", "place": "/"}), 403)
        assert_error(admin.get("/v1/tools"), 403, "forbidden")
        assert admin.get("/v1/admin/tokens").status_code == 200
        # Open routes.
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        metrics = anonymous.get("/metrics")
        assert "memseal_http_requests_total" in metrics.text
        assert metrics.headers["content-type"].startswith("text/plain")


def test_role_refusals_name_the_role_in_plain_english(server: ServerThread) -> None:
    agent = server.client(server.token("agent", "team:grammar/agent:x"))
    auditor = server.client(server.token("auditor", "team:grammar"))
    admin = server.client(server.admin)
    with agent, auditor, admin:
        said = {
            "agent": agent.get("/v1/admin/tokens").json()["error"]["message"],
            "auditor": auditor.get("/v1/tools").json()["error"]["message"],
            "admin": admin.get("/v1/tools").json()["error"]["message"],
        }
    for role, message in said.items():
        assert message.startswith(f"an {role} token cannot use this route"), message


def test_tool_specs_follow_the_token_scope(server: ServerThread) -> None:
    limited = server.token("agent", "team:s/agent:x", allow=["memory_fetch", "memory_get"])
    with server.client(limited) as c:
        names = [t["name"] for t in c.get("/v1/tools").json()["tools"]]
        assert names == ["memory_get"] or set(names) <= {"memory_fetch", "memory_get"}
        assert "memory_store" not in names
        assert_error(c.post("/v1/tools/memory_store", json={"learning": {"text": "x"}}), 403)
    with server.client(server.token("agent", "team:s/agent:y", read_only=True)) as c:
        names = [t["name"] for t in c.get("/v1/tools").json()["tools"]]
        assert "memory_store" not in names and "memory_forget" not in names


def test_revoked_tokens_are_refused_at_once(server: ServerThread) -> None:
    token = server.token("agent", "team:rev/agent:x")
    with server.client(token) as c, server.client(server.admin) as admin:
        assert c.get("/v1/tools").status_code == 200
        listed = admin.get("/v1/admin/tokens").json()["tokens"]
        store_ = TokenStore(server.folder)
        try:
            mine = next(t for t in listed if t["place"] == "team:rev/agent:x")["id"]
            store_.revoke(mine)  # as `memseal tokens revoke` does, from another process
        finally:
            store_.close()
        assert_error(c.get("/v1/tools"), 401, "unauthorized")
        # Through the admin route as well.
        made = admin.post(
            "/v1/admin/tokens", json={"role": "agent", "place": "team:rev/agent:y"}
        ).json()
        with server.client(made["token"]) as other:
            assert other.get("/v1/tools").status_code == 200
            gone = admin.delete(f"/v1/admin/tokens/{made['info']['id']}").json()
            assert gone["revoked_at"] is not None
            assert_error(other.get("/v1/tools"), 401)
        assert_error(admin.delete("/v1/admin/tokens/tok-nope"), 404)
        assert_error(admin.post("/v1/admin/tokens", json={"role": "god", "place": "/"}), 400)
        assert_error(admin.post("/v1/admin/tokens", json={"role": "agent", "place": "B A D"}), 400)


def test_auditors_see_every_header_and_payloads_only_within_reach(server: ServerThread) -> None:
    a = server.client(server.token("agent", "team:aud-a/agent:x"))
    b = server.client(server.token("agent", "team:aud-b/agent:y"))
    auditor = server.client(server.token("auditor", "team:aud-a"))
    with a, b, auditor:
        sa = store(a, "audited text of A")["result"]["id"]
        sb = store(b, "private text of B")["result"]["id"]
        size = auditor.get("/v1/ledger").json()["size"]
        seen: list[dict] = []
        start: int | None = 0
        while start is not None:
            page = auditor.get("/v1/ledger/entries", params={"start": start, "limit": 200}).json()
            seen += page["entries"]
            start = page["next"]
        assert [e["seq"] for e in seen] == list(range(size))
        for e in seen:
            assert base64.b64decode(e["entry"])  # every header's signed bytes
        stored = {e["header"]["body"]["item"]: e for e in seen if e["kind"] == "memory_stored"}
        assert b"audited text of A" in base64.b64decode(stored[sa]["payload"])
        assert stored[sb]["payload"] is None and stored[sb]["payload_withheld"] is True
        assert "private text of B" not in json.dumps(seen)
        one = auditor.get(f"/v1/ledger/entries/{stored[sb]['seq']}").json()
        assert one["payload"] is None
        assert_error(auditor.get("/v1/ledger/entries", params={"limit": 100000}), 400)
        assert_error(auditor.get("/v1/ledger/entries/99999999"), 404)


def test_checkpoint_and_proofs(server: ServerThread) -> None:
    with server.client(server.token("agent", "team:proof/agent:x")) as a:
        store(a, "proof me")
    with server.client(server.admin) as admin:
        note = admin.get("/v1/ledger/checkpoint")
        assert note.status_code == 200
        lines = note.text.split("\n")
        size = int(lines[1])
        assert lines[3] == "" and lines[4].startswith("— ")
        proof = admin.get("/v1/ledger/proofs/inclusion", params={"seq": 0})
        assert proof.status_code == 200 and proof.text.startswith("c2sp.org/tlog-proof@v1")
        cons = admin.get("/v1/ledger/proofs/consistency", params={"old": 1, "new": size})
        assert cons.status_code == 200 and cons.text.startswith("memseal/consistency-proof@v1")
        assert_error(admin.get("/v1/ledger/proofs/consistency", params={"old": 10**9}), 400)
        assert_error(admin.get("/v1/ledger/proofs/inclusion", params={"seq": 10**9}), 404)
        assert_error(admin.get("/v1/ledger/proofs/inclusion", params={"seq": "x"}), 400)


def test_admins_govern_trust_with_signed_reasons(server: ServerThread) -> None:
    with server.client(server.token("agent", "team:trust/agent:x")) as a:
        item = store(a, "the deploy key rotates monthly")["result"]["id"]
        with server.client(server.admin) as admin:
            r = admin.post(f"/v1/admin/items/{item}/promote", json={"reason": "checked by ops"})
            assert r.status_code == 200, r.text
            assert r.json()["trust"] == "verified" and r.json()["seq"] is not None
            entry = admin.get(f"/v1/ledger/entries/{r.json()['seq']}").json()
            assert entry["kind"] == "trust_changed"
            assert b"checked by ops" in base64.b64decode(entry["payload"])
            assert_error(admin.post(f"/v1/admin/items/{item}/reject", json={}), 400)
            assert_error(admin.post(f"/v1/admin/items/{item}/reject", json={"reason": ""}), 400)
            r = admin.post(f"/v1/admin/items/{item}/stale", json={"reason": "old"})
            assert r.json()["trust"] == "stale"
            r = admin.post(f"/v1/admin/items/{item}/reject", json={"reason": "wrong"})
            assert r.json()["trust"] == "rejected"
            assert_error(admin.post("/v1/admin/items/nope/promote", json={"reason": "x"}), 404)
            missing = "0" * 32
            assert_error(
                admin.post(f"/v1/admin/items/{missing}/promote", json={"reason": "x"}), 404
            )
        hits = a.post("/v1/tools/memory_fetch", json={"query": "deploy key"}).json()["result"]
        assert hits["hits"] == []


def test_admin_routes_take_a_json_body_whatever_its_content_type(server: ServerThread) -> None:
    with server.client(server.token("agent", "team:curl/agent:x")) as a:
        item = store(a, "curl sends forms by default")["result"]["id"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}  # what curl -d sends
    with server.client(server.admin) as admin:
        for headers in (form, {}, {"Content-Type": "text/plain"}):
            r = admin.post(
                f"/v1/admin/items/{item}/stale", content=b'{"reason": "old"}', headers=headers
            )
            assert r.status_code == 200, r.text
            r = admin.post(
                "/v1/admin/tokens",
                content=b'{"role": "agent", "place": "team:curl/agent:y"}',
                headers=headers,
            )
            assert r.status_code == 201, r.text
        # Still checked as before: each field named, nothing changed.
        for body in (b"", b"{}", b'{"reason": ""}'):
            r = admin.post(f"/v1/admin/items/{item}/reject", content=body, headers=form)
            assert "`reason`" in assert_error(r, 400, "invalid_request")["error"]["message"]
        r = admin.post(f"/v1/admin/items/{item}/reject", content=b"reason=x", headers=form)
        assert "not JSON" in assert_error(r, 400, "invalid_request")["error"]["message"]
        r = admin.post(f"/v1/admin/items/{item}/reject", content=b"[1]", headers=form)
        assert "JSON object" in assert_error(r, 400, "invalid_request")["error"]["message"]
        r = admin.post("/v1/admin/tokens", content=b'{"role": "root", "place": "/"}')
        assert "`role`" in assert_error(r, 400, "invalid_request")["error"]["message"]
        assert admin.get("/v1/ledger/entries?kind=trust_changed").status_code == 200
    with server.client(None) as anonymous:  # who asks is checked before the body is read
        assert_error(anonymous.post(f"/v1/admin/items/{item}/stale", content=b"x"), 401)
    # And with curl itself, as docs/service.md writes it.
    if shutil.which("curl") is None:
        pytest.skip("no curl")
    done = subprocess.run(
        ["curl", "-s", "-X", "POST", f"{server.url}/v1/admin/items/{item}/promote",
         "-H", f"Authorization: Bearer {server.admin}", "-d", '{"reason": "checked"}'],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout)["trust"] == "verified", done.stdout


def test_the_openapi_document_shows_the_admin_bodies(server: ServerThread) -> None:
    spec = httpx.get(f"{server.url}/openapi.json").json()
    for action in ("promote", "reject", "stale"):
        body = spec["paths"][f"/v1/admin/items/{{item_id}}/{action}"]["post"]["requestBody"]
        schema = body["content"]["application/json"]["schema"]
        assert body["required"] and schema["required"] == ["reason"], body
    body = spec["paths"]["/v1/admin/tokens"]["post"]["requestBody"]
    assert set(body["content"]["application/json"]["schema"]["required"]) == {"role", "place"}


def _documented_token(folder: Path, label: str) -> str:
    """The token docs/service.md's "Tokens and roles" block makes into ``label.token``."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    block = page.split("## Tokens and roles", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    command = next(
        c for c in block.replace("\\\n", " ").splitlines() if c.endswith(f"> {label}.token")
    )
    argv = shlex.split(command.removesuffix(f"> {label}.token"))
    assert argv[:2] == ["memseal", "tokens"] and "--data" in argv
    argv[argv.index("--data") + 1] = str(folder)
    made = subprocess.run(
        [str(BIN / "memseal"), *argv[1:]], capture_output=True, text=True, check=True, timeout=60
    )
    return made.stdout.strip()


def test_the_documented_reader_sees_what_the_documented_writer_stores(
    server: ServerThread,
) -> None:
    writer = server.client(_documented_token(server.folder, "writer"))
    reader = server.client(_documented_token(server.folder, "reader"))
    with writer, reader:
        stored = store(writer, "the writer's note on the release train")["result"]["id"]
        r = reader.post("/v1/tools/memory_fetch", json={"query": "release train", "mode": "exact"})
        assert r.status_code == 200, r.text
        assert [h["id"] for h in r.json()["result"]["hits"]] == [stored]
        got = reader.post("/v1/tools/memory_get", json={"ids": [stored]}).json()["result"]
        assert [i["id"] for i in got["items"]] == [stored]
        # Read-only as documented: it cannot store.
        refused = reader.post("/v1/tools/memory_store", json={"learning": {"text": "x"}})
        assert_error(refused, 403)


def test_the_openapi_document_lists_every_route(server: ServerThread) -> None:
    spec = httpx.get(f"{server.url}/openapi.json").json()
    paths = set(spec["paths"])
    assert {
        "/healthz",
        "/metrics",
        "/v1/tools",
        "/v1/tools/{name}",
        "/v1/runs/{run_id}",
        "/v1/runs/{run_id}/export",
        "/v1/runs/{run_id}/tools/{name}",
        "/v1/ledger",
        "/v1/ledger/entries",
        "/v1/ledger/entries/{seq}",
        "/v1/ledger/checkpoint",
        "/v1/ledger/proofs/inclusion",
        "/v1/ledger/proofs/consistency",
        "/v1/admin/tokens",
        "/v1/admin/tokens/{token_id}",
        "/v1/admin/items/{item_id}/promote",
        "/v1/admin/items/{item_id}/reject",
        "/v1/admin/items/{item_id}/stale",
    } <= paths
    call = spec["paths"]["/v1/tools/{name}"]["post"]
    assert "requestBody" in call and "400" in call["responses"]


def test_text_routes_document_text_success_and_json_errors(server: ServerThread) -> None:
    spec = httpx.get(f"{server.url}/openapi.json").json()
    texts = (
        "/metrics",
        "/v1/ledger/checkpoint",
        "/v1/ledger/proofs/inclusion",
        "/v1/ledger/proofs/consistency",
    )
    for path in texts:
        responses = spec["paths"][path]["get"]["responses"]
        assert list(responses["200"]["content"]) == ["text/plain"], path
        for status in ("400", "401", "403", "404"):
            content = responses[status]["content"]
            assert list(content) == ["application/json"], (path, status)
            assert content["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    # What the server answers is what the document says.
    with server.client(server.admin) as admin:
        ok = admin.get("/v1/ledger/checkpoint")
        assert ok.headers["content-type"].startswith("text/plain")
        bad = admin.get("/v1/ledger/proofs/inclusion", params={"seq": 10**9})
        assert bad.headers["content-type"].startswith("application/json")
        assert_error(bad, 404, "not_found")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_doc_pages_load_only_local_assets(server: ServerThread, page: str) -> None:
    with httpx.Client(base_url=server.url) as c:
        html = c.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        urls = re.findall(
            r"""(?:src|href|spec-url)=["']([^"']+)["']|url: ?["']([^"']+)["']""", html.text
        )
        found = sorted({a or b for a, b in urls})
        assert any(u.endswith(".js") for u in found) and "/openapi.json" in found, found
        # Nothing from another host: a page that loads a CDN is blank offline.
        assert "//" not in html.text.replace("http://www.w3.org", ""), html.text
        for url in found:
            assert url.startswith("/") and not url.startswith("//"), url
            got = c.get(url)
            assert got.status_code == 200 and got.content, url


def test_the_data_folder_is_made_on_first_serve(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "data"
    with ServerThread(folder) as s:
        assert (folder / "ledger.db").exists() and (folder / "tokens.db").exists()
        assert s.admin is not None
        with s.client(s.admin) as admin:
            assert admin.get("/v1/ledger").json()["trust_root"].startswith("memseal-")
    with ServerThread(folder) as again:
        assert again.admin is None  # the admin token is made once


def test_the_check_route_answers_the_refusal_before_approval_and_records_nothing(
    tmp_path: Path,
) -> None:
    with ServerThread(tmp_path / "data") as server:
        _check_route(server)


def _check_route(server: ServerThread) -> None:
    reader = server.token("agent", "team:gate/agent:r", read_only=True)
    writer = server.token("agent", "team:gate/agent:w")
    limited = server.token("agent", "team:gate/agent:l", allow=["memory_fetch"])
    auditor = server.token("auditor", "team:gate")
    with server.client(reader) as r, server.client(writer) as w, server.client(limited) as lim:
        with server.client(auditor) as audit:
            info = audit.get("/v1/ledger")
            assert info.status_code == 200, info.text
            before = info.json()["size"]
        refused = r.post("/v1/tools/memory_store/check", json={"learning": {"text": "x"}})
        assert refused.status_code == 200, refused.text
        assert refused.json()["code"] == "read_only" and refused.json()["tool"] == "memory_store"
        assert r.post("/v1/tools/memory_fetch/check").status_code == 204
        assert w.post("/v1/tools/memory_store/check").status_code == 204
        assert lim.post("/v1/tools/memory_list/check").json()["code"] == "not_allowed"
        assert_error(w.post("/v1/tools/memory_teleport/check"), 400)
        with server.client(auditor) as again:
            assert again.get("/v1/ledger").json()["size"] == before  # nothing recorded
