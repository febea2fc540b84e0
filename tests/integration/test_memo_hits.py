"""Memo hits made by another process show in the console's run routes.

A memo hit writes no ledger entry; each run adds its hits to the unsigned
``memo_hits`` table on its lease renewals and its close. Server A serves a
data folder; a second process (a subprocess) or a second Memory object of
this one resumes a run there and replays it; A's run routes then give the
hits: per step (``/v1/ledger/memos``) and per run (``/v1/ledger/runs``). On
the folder's SQLite file and on PostgreSQL when the test server is there.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
import pytest
from stores import ADAPTERS, drop_schemas, fresh_url
from test_service_support import ServerThread

import memseal
from memseal.tools import ToolScope

PLACE = "team:hits/agent:b"

# Process B: record a run of three calls (record mode, no hit), then resume it ROUNDS
# times, each replaying the three steps from their memos, and print the ledger size
# before and after the resumes (a hit writes no entry).
PROCESS_B = r"""
import asyncio
import sys

import memseal
from memseal.tools import ToolScope

folder, store, run_id, rounds = sys.argv[1], sys.argv[2] or None, sys.argv[3], int(sys.argv[4])
CALLS = [
    ("memory_store", {"learning": {"text": "the deploy key rotates monthly"}}),
    ("memory_list", {"limit": 5}),
    ("memory_fetch", {"query": "deploy key"}),
]


async def main() -> None:
    scope = ToolScope.placed_at("team:hits/agent:b")
    opened = memseal.open(folder, store=store, create=False, embedder=None,
                          checkpoint_interval=None)
    async with opened as memory:
        async with memory.run(run_id, scope, mode="record") as run:
            for name, args in CALLS:
                await run.call(name, args)
        before = await memory.ledger.size()
        for _ in range(rounds):
            async with memory.run(run_id, scope, mode="strict") as run:
                for name, args in CALLS:
                    await run.call(name, args)
        print(before, await memory.ledger.size(), flush=True)


asyncio.run(main())
"""


class Served(NamedTuple):
    """Server A, and the PostgreSQL URL of its store (None: the folder's SQLite file)."""

    server: ServerThread
    store: str | None


@pytest.fixture(scope="module", params=ADAPTERS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    adapter: str = request.param
    url, schema = (None, None) if adapter == "sqlite" else fresh_url("memohits", adapter)
    try:
        with ServerThread(tmp_path_factory.mktemp("memo-hits") / "data", store=url) as running:
            yield Served(running, url)
    finally:
        if schema is not None:
            asyncio.run(drop_schemas([schema], adapter))


def _hits(auditor: httpx.Client, run_id: str) -> tuple[dict[int, int], dict[str, Any]]:
    memos = auditor.get("/v1/ledger/memos", params={"run": run_id})
    assert memos.status_code == 200, memos.text
    listed = auditor.get("/v1/ledger/runs", params={"run": run_id})
    assert listed.status_code == 200, listed.text
    (run,) = listed.json()["runs"]
    return {m["step"]: m["hits"] for m in memos.json()["memos"]}, run


def test_hits_of_a_run_resumed_in_another_process_show_on_this_servers_routes(
    served: Served,
) -> None:
    server = served.server
    auditor = server.client(server.token("auditor", "team:hits"))
    with auditor:
        done = subprocess.run(
            [sys.executable, "-c", PROCESS_B, str(server.folder), served.store or "", "p-run", "2"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        before, after = (int(n) for n in done.stdout.split())
        assert after == before, "a memo hit writes no ledger entry"
        steps, run = _hits(auditor, "p-run")
        # Two resumes, each replaying steps 0, 1 and 2 from their memos: two hits a step.
        assert steps == {0: 2, 1: 2, 2: 2}
        assert run["memo_hits"] == 6 and run["last_hit_at"] is not None


def test_hits_are_added_on_lease_renewal_while_the_other_memory_still_holds_the_run(
    served: Served,
) -> None:
    server = served.server
    auditor = server.client(server.token("auditor", "team:hits"))
    scope = ToolScope.placed_at(PLACE)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_store", {"learning": {"text": "standup moved to 10:00"}}),
        ("memory_list", {"limit": 3}),
    ]

    async def main() -> None:
        opened = memseal.open(
            server.folder,
            store=served.store,
            create=False,
            embedder=None,
            checkpoint_interval=None,
        )
        async with (
            opened as memory,
            httpx.AsyncClient(
                base_url=server.url, headers=dict(auditor.headers), timeout=30
            ) as client,
        ):
            async with memory.run("open-run", scope, mode="record") as run:
                for name, args in calls:
                    await run.call(name, args)
            # Renewed every lease_ttl / 3: the hits reach the table while B holds the run.
            async with memory.run("open-run", scope, lease_ttl=0.6) as run:
                for name, args in calls:
                    await run.call(name, args)
                await run.call_at(0, *calls[0])  # a step called again: one more hit
                memos: dict[int, int] = {}
                for _ in range(50):
                    await asyncio.sleep(0.1)
                    got = (await client.get("/v1/ledger/memos", params={"run": "open-run"})).json()
                    memos = {m["step"]: m["hits"] for m in got["memos"]}
                    if sum(memos.values()) == 3:
                        break
                assert memos == {0: 2, 1: 1}
                listed = await client.get("/v1/ledger/runs", params={"run": "open-run"})
                (shown,) = listed.json()["runs"]
                assert shown["leased"] is True and shown["memo_hits"] == 3
            # Closed: nothing counted twice.
            steps, run_row = _hits(auditor, "open-run")
            assert steps == {0: 2, 1: 1} and run_row["memo_hits"] == 3

    with auditor:
        asyncio.run(main())
