"""Attacks through the routes the web console reads: the run list, the entry filters, /v1/me.

The console shows what these answer, so they hold the reach themselves: an auditor
of ``team:acme`` never learns the runs of the look-alike tenant ``team:acme-corp``,
a filter never shows a payload the unfiltered page withholds, and a filtered page
reads a bounded window of the log. Each test drives a real uvicorn server on the
folder's SQLite file and on PostgreSQL when the test server is there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from integration.test_service_support import ServerThread, assert_error
from stores import ADAPTERS, drop_schemas, fresh_url

from memseal.service.routes.ledger import SCAN_WINDOW

ACME = "team:acme/agent:writer"
CORP = "team:acme-corp/agent:spy"
CORP_TEXT = "acme-corp secret: the merger closes friday"


class Tenants:
    def __init__(self, server: ServerThread) -> None:
        self.server = server
        assert server.admin is not None
        self.admin = server.admin
        self.acme = server.token("agent", ACME)
        self.corp = server.token("agent", CORP)
        self.auditor = server.token("auditor", "team:acme")
        with server.client(self.acme) as acme:
            for i in range(3):
                r = acme.post(
                    "/v1/tools/memory_store",
                    headers={"X-Memseal-Run": "acme-run"},
                    json={"learning": {"text": f"acme note {i}"}},
                )
                assert r.status_code == 200, r.text
        with server.client(self.corp) as corp:
            r = corp.post(
                "/v1/tools/memory_store",
                headers={"X-Memseal-Run": "corp-run"},
                json={"learning": {"text": CORP_TEXT}},
            )
            assert r.status_code == 200, r.text
            self.corp_item = r.json()["result"]["id"]

    def get(self, token: str, path: str, **params: Any) -> httpx.Response:
        with self.server.client(token) as client:
            return client.get(path, params=params)


@pytest.fixture(scope="module", params=ADAPTERS)
def tenants(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenants]:
    adapter: str = request.param
    url, schema = (None, None) if adapter == "sqlite" else fresh_url("console", adapter)
    try:
        folder = tmp_path_factory.mktemp("console") / "data"
        with ServerThread(folder, store=url) as server:
            yield Tenants(server)
    finally:
        if schema is not None:
            asyncio.run(drop_schemas([schema], adapter))


def test_auditor_of_acme_never_lists_the_look_alike_tenants_runs(tenants: Tenants) -> None:
    listed = tenants.get(tenants.auditor, "/v1/ledger/runs").json()
    assert [r["run_id"] for r in listed["runs"]] == ["acme-run"]
    assert listed["runs"][0]["place"] == ACME and listed["runs"][0]["recorded_steps"] == 3
    # Asked by name, the other tenant's run is simply not there.
    assert tenants.get(tenants.auditor, "/v1/ledger/runs", run="corp-run").json()["runs"] == []
    # The root admin sees both, newest first.
    every = tenants.get(tenants.admin, "/v1/ledger/runs").json()["runs"]
    assert [r["run_id"] for r in every] == ["corp-run", "acme-run"]


def test_run_list_pages_never_repeat_or_skip_a_run(tenants: Tenants) -> None:
    first = tenants.get(tenants.admin, "/v1/ledger/runs", limit=1).json()
    assert [r["run_id"] for r in first["runs"]] == ["corp-run"]
    second = tenants.get(tenants.admin, "/v1/ledger/runs", limit=1, before=first["next_before"])
    assert [r["run_id"] for r in second.json()["runs"]] == ["acme-run"]


def test_agent_token_cannot_list_runs_or_read_the_ledger(tenants: Tenants) -> None:
    assert_error(tenants.get(tenants.acme, "/v1/ledger/runs"), 403, "forbidden")
    assert_error(tenants.get(tenants.acme, "/v1/ledger/entries", run="acme-run"), 403, "forbidden")


def test_run_filter_shows_no_payload_the_unfiltered_page_withholds(tenants: Tenants) -> None:
    filtered = tenants.get(tenants.auditor, "/v1/ledger/entries", run="corp-run").json()
    kinds = [e["kind"] for e in filtered["entries"]]
    assert kinds == ["run_started", "memory_tool_call"]
    assert all(e["payload"] is None for e in filtered["entries"])
    assert filtered["entries"][1]["payload_withheld"] is True
    by_item = tenants.get(tenants.auditor, "/v1/ledger/entries", item=tenants.corp_item).json()
    assert [e["kind"] for e in by_item["entries"]] == ["memory_stored"]
    assert by_item["entries"][0]["payload_withheld"] is True
    assert CORP_TEXT not in str(filtered) + str(by_item)


def test_filtered_page_reads_a_bounded_window(tenants: Tenants) -> None:
    page = tenants.get(tenants.auditor, "/v1/ledger/entries", kind="memory_stored", limit=2).json()
    assert [e["kind"] for e in page["entries"]] == ["memory_stored", "memory_stored"]
    # The page stops after the second match and says where to go on.
    rest = tenants.get(
        tenants.auditor, "/v1/ledger/entries", kind="memory_stored", start=page["next"]
    ).json()
    seqs = [e["seq"] for e in page["entries"] + rest["entries"]]
    assert len(seqs) == len(set(seqs)) == 4 and rest["next"] is None
    assert SCAN_WINDOW == 5000


def test_me_shows_the_callers_own_role_and_scope_only(tenants: Tenants) -> None:
    me = tenants.get(tenants.acme, "/v1/me").json()
    assert me["role"] == "agent" and me["place"] == ACME and me["reach"] == f"of:{ACME}"
    assert "token" not in me and tenants.acme not in str(me)
    assert_error(tenants.get("ms_" + "x" * 43, "/v1/me"), 401, "unauthorized")


def test_console_page_needs_no_token_and_holds_no_data(tenants: Tenants) -> None:
    with httpx.Client(base_url=tenants.server.url, timeout=30) as anonymous:
        page = anonymous.get("/")
        assert page.status_code == 200 and "memseal console" in page.text
        assert '<base href="/console/">' in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert anonymous.get("/console/").status_code == 200
        assert (
            anonymous.get("/console/crypto.js")
            .headers["content-type"]
            .startswith("text/javascript")
        )
        assert anonymous.get("/console/../tokens.db").status_code == 404
        assert anonymous.get("/console/%2e%2e/tokens.db").status_code == 404
        # The data behind it is the API's to refuse without a token.
        assert_error(anonymous.get("/v1/ledger/runs"), 401)
