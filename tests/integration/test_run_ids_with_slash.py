"""A run id holding "/" (a job's ``job/nightly/7``, a thread's ``t/42``) reaches every run
route over real HTTP, sent percent-encoded (as the console's ``encodeURIComponent`` sends
it) or as is: the server decodes ``%2F`` before routing, so a plain ``{run_id}`` segment
answered 404 for such a run on each of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from test_service_support import ServerThread, assert_error

from memseal.replay.evidence.bundle import verify_bundle
from memseal.replay.evidence.read_proof import decode_read_proof

RUN = "job/nightly/7"
ODD = "a/tools/b/export"  # names that look like the routes' own suffixes


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("slash") / "data") as running:
        yield running


@pytest.mark.parametrize("run", [RUN, ODD])
@pytest.mark.parametrize("encode", [True, False], ids=["encoded", "raw"])
def test_a_run_id_with_a_slash_reaches_every_run_route(
    server: ServerThread, run: str, encode: bool, tmp_path: Path
) -> None:
    run_id = f"{run}-{'e' if encode else 'r'}"
    part = quote(run_id, safe="") if encode else run_id
    agent = server.client(server.token("agent", "team:slash/agent:x"))
    auditor = server.client(server.token("auditor", "team:slash"))
    with agent, auditor:
        stored = agent.post(
            f"/v1/runs/{part}/tools/memory_store", json={"learning": {"text": "slash note"}}
        )
        assert stored.status_code == 200, stored.text
        assert stored.json()["run_id"] == run_id and stored.json()["step"] == 0
        read = agent.post(f"/v1/runs/{part}/tools/memory_fetch", json={"query": "slash note"})
        assert read.status_code == 200 and read.json()["step"] == 1, read.text
        status = agent.get(f"/v1/runs/{part}")
        assert status.status_code == 200, status.text
        assert status.json()["run_id"] == run_id and status.json()["recorded_steps"] == 2
        vkey = (server.folder / "keys" / "ledger.vkey").read_text().strip()
        for who in (agent, auditor):
            bundle = who.get(f"/v1/runs/{part}/export")
            assert bundle.status_code == 200, bundle.text
            assert verify_bundle(bundle.content, vkey).run_id == run_id
        proof = agent.get(f"/v1/runs/{part}/steps/1/read-proof")
        assert proof.status_code == 200, proof.text
        assert decode_read_proof(proof.content).run_id == run_id
        # The console's timeline reads: the run, its memos and entries, by query parameter.
        listed = auditor.get("/v1/ledger/runs", params={"run": run_id}).json()["runs"]
        assert [r["run_id"] for r in listed] == [run_id] and listed[0]["recorded_steps"] == 2
        memos = auditor.get("/v1/ledger/memos", params={"run": run_id})
        assert memos.status_code == 200 and len(memos.json()["memos"]) == 2, memos.text
        entries = auditor.get("/v1/ledger/entries", params={"run": run_id}).json()["entries"]
        assert {e["kind"] for e in entries} == {"run_started", "memory_tool_call"}
        closed = agent.delete(f"/v1/runs/{part}")
        assert closed.status_code == 200 and closed.json() == {"run_id": run_id, "closed": True}
        # A run that does not exist is still a 404, not another run's answer.
        assert_error(agent.get(f"/v1/runs/{part}x/export"), 404, "not_found")
