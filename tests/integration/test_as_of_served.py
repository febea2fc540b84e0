"""The memory as of a point over HTTP (``?as_of=``...) and the CLI (``memseal show``).

A real uvicorn server on 127.0.0.1 with real tokens; the CLI through its entry point on
the same kind of data folder. Bad points are 400s naming the parameter (exit 2 in the
CLI), never a 500, and write nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_service_support import ServerThread, assert_error

import memseal
from memseal.cli.main import main


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("asof") / "data") as running:
        yield running


def _size(c: httpx.Client) -> int:
    r = c.get("/v1/ledger")
    assert r.status_code == 200, r.text
    return int(r.json()["size"])


def test_read_routes_serve_the_memory_as_of_a_point(server: ServerThread) -> None:
    agent = server.client(server.token("agent", "team:h/agent:a"))
    auditor = server.client(server.token("auditor", "team:h"))
    with agent, auditor:
        r = agent.post(
            "/v1/tools/memory_store",
            json={"learning": {"text": "deploys on friday"}},
            headers={"X-Memseal-Run": "h-run"},
        )
        assert r.status_code == 200, r.text
        item = r.json()["result"]["id"]
        point = _size(auditor)
        r = agent.post(
            "/v1/tools/memory_fetch", json={"query": "friday"}, headers={"X-Memseal-Run": "h-run"}
        )
        read_step = r.json()["step"]
        assert agent.post("/v1/tools/memory_forget", json={"ids": [item]}).status_code == 200
        after = _size(auditor)

        r = agent.post(f"/v1/tools/memory_get?as_of={point}", json={"ids": [item]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["as_of"] == point and "run_id" not in body
        (shown,) = body["result"]["items"]
        assert set(shown["text"]) == {"forgotten_at"}  # forgotten since: the marker, no text
        assert "friday" not in r.text
        r = agent.post(f"/v1/tools/memory_list?as_of_run=h-run&as_of_step={read_step}", json={})
        assert r.status_code == 200, r.text
        assert r.json()["as_of"] == point and r.json()["result"]["items"] == []
        r = agent.post("/v1/tools/memory_list?as_of_time=2000-01-01T00:00:00Z", json={})
        assert r.json()["as_of"] == 0
        assert _size(auditor) == after  # reads of the past are not recorded

        specs = agent.get(f"/v1/tools?as_of={point}").json()["tools"]
        assert {s["name"] for s in specs} == {
            "memory_recall",
            "memory_fetch",
            "memory_list",
            "memory_get",
            "memory_explore",
        }
        live = agent.get("/v1/tools").json()["tools"]
        assert "as_of" not in json.dumps([specs, live])  # never a tool argument


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("as_of=-1", "as_of"),
        ("as_of=abc", "as_of"),
        ("as_of=99999999", "as_of"),
        ("as_of=1e3", "as_of"),
        ("as_of=" + "9" * 41, "as_of"),
        ("as_of_time=noon", "as_of_time"),
        ("as_of_time=2026-01-01T00:00:00", "as_of_time"),
        ("as_of_time=0001-01-01T00:00:00%2B01:00", "as_of_time"),  # before the first instant
        ("as_of_time=9999-12-31T23:59:59-01:00", "as_of_time"),  # after the last
        ("as_of_run=nope&as_of_step=0", "as_of_run"),
        ("as_of_run=nope", "as_of_step"),
        ("as_of_step=x", "as_of_step"),
        ("as_of=1&as_of_time=2026-01-01T00:00:00Z", "as_of"),
    ],
)
def test_a_bad_point_is_a_400_naming_it(server: ServerThread, query: str, named: str) -> None:
    with server.client(server.token("agent", "team:h/agent:b")) as agent:
        for r in (
            agent.post(f"/v1/tools/memory_list?{query}", json={}),
            agent.get(f"/v1/tools?{query}"),
        ):
            error = assert_error(r, 400, "invalid_request")
            assert f"`{named}" in error["error"]["message"] or named in str(error), error


def test_another_tenant_s_run_is_told_as_one_never_recorded(server: ServerThread) -> None:
    owner = server.client(server.token("agent", "team:z/agent:b"))
    stranger = server.client(server.token("agent", "team:h/agent:a"))
    with owner, stranger:
        r = owner.post("/v1/runs/z-private/tools/memory_list", json={})
        assert r.status_code == 200, r.text
        r = owner.post("/v1/tools/memory_list?as_of_run=z-private&as_of_step=0", json={})
        assert r.status_code == 200, r.text  # its own agent names the point
        said = [
            assert_error(
                stranger.post(f"/v1/tools/memory_list?as_of_run={run}&as_of_step={step}", json={}),
                400,
                "invalid_request",
            )["error"]["message"].replace(run, "RUN")
            for run, step in (("z-private", 0), ("z-private", 99), ("z-never", 0))
        ]
        assert len(set(said)) == 1 and "in your reach" in said[0], said


def test_a_point_refuses_writes_and_recording(server: ServerThread) -> None:
    agent = server.client(server.token("agent", "team:h/agent:c"))
    auditor = server.client(server.token("auditor", "team:h"))
    with agent, auditor:
        before = _size(auditor)
        r = agent.post("/v1/tools/memory_store?as_of=0", json={"learning": {"text": "rewrite"}})
        assert "read-only view" in assert_error(r, 403)["error"]["message"]
        r = agent.post("/v1/tools/memory_list?as_of=0", json={}, headers={"X-Memseal-Run": "x"})
        assert "`as_of`" in assert_error(r, 400, "invalid_request")["error"]["message"]
        r = agent.post("/v1/tools/memory_list?as_of=0&revalidate=true", json={})
        assert_error(r, 400, "invalid_request")
        assert _size(auditor) == before


def test_memseal_show_prints_the_memory_as_of_a_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    data = tmp_path / "data"

    async def history() -> tuple[str, int, int]:
        async with memseal.open(data, embedder=None) as memory:
            tools = memory.tools(memseal.ToolScope.placed_at("team:s"))
            item = (await tools.call("memory_store", {"learning": {"text": "likes jazz"}}))["id"]
            point = (await memory.ledger.store.head()).size
            await tools.call("memory_forget", {"ids": [item]})
            await memory.tools(run_id="s-run").call("memory_list", {})
            return item, point, (await memory.ledger.store.head()).size

    item, point, end = asyncio.run(history())
    assert main(["show", "--data", str(data), "--as-of", str(point), "--id", item]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["as_of"] == point
    assert set(shown["result"]["items"][0]["text"]) == {"forgotten_at"}
    assert main(["show", "--data", str(data), "--as-of", str(point), "--query", "jazz"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["hits"] == []
    args = ["show", "--data", str(data), "--run", "s-run", "--step", "0", "--namespace", "team:s"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["as_of"] == end - 1

    for bad, named in (
        (["--as-of", str(end + 1)], "--as-of"),
        (["--at", "noon"], "--at"),
        (["--run", "s-run", "--step", "7"], "--step"),
        (["--as-of", "1", "--namespace", "Bad Space"], "namespace"),
        (["--as-of", "1", "--query", "x", "--id", item], "--query or --id"),
    ):
        assert main(["show", "--data", str(data), *bad]) == 2
        assert named in capsys.readouterr().err
    assert main(["show", "--data", str(tmp_path / "none"), "--as-of", "0"]) == 2
    assert not (tmp_path / "none").exists()
