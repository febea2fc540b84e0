"""The console's routes on a large ledger: built once in bulk, then each page's request timed.

Run: ``.venv/bin/python benchmarks/console_scale.py [--runs 1000] [--calls 99]
[--interleave 10] [--requests 20] [--folder DIR] [--json FILE]``, or
``--build-only DIR`` to make the data folder and stop (the tests do, at a small size).

The ledger: ``--runs`` runs, each a signed ``run_started`` entry and ``--calls``
signed ``memory_tool_call`` entries with their memo rows and run rows, written
through the ledger's own writer in transactions of one group of runs each (the
fast path: batch appends, no tool runs). ``--interleave`` runs are recorded side
by side in each group, so one run's entries are spread across the group's, as
concurrent runs' are. The calls are of the right kind and shape (a tool, its
arguments and result, the memo key), but their fingerprints are random: they list
and page like recorded calls, they would not replay. 1,000 runs of 99 calls make
100,000 entries.

Then the console's reads, each through the real app over HTTP (httpx's ASGI
transport) as an auditor of everything, ``--requests`` times, p50 and p95:

* the Ledger page: the newest page of entries, and a page filtered by kind that
  matches nothing (the scan window's worst case);
* the Runs page: the newest runs, and the next page through its cursor;
* a run's timeline: the run's row, its memo (one page), and its entries from its
  ``run_started`` to its newest call (``end``), every page through ``next``; beside
  it, the same without ``end`` (how the console paged before: on to the log's end).

Each row also says how many rows one response carried at most: no request loads
everything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

import memseal
from memseal.cli.service import first_admin
from memseal.ledger.entry import make_draft
from memseal.ledger.store import WriteTxn
from memseal.replay.runs.calls import RUN_STARTED, TOOL_CALL, RunStarted, ToolCall
from memseal.replay.runs.identity import memo_key
from memseal.replay.runs.memo import MemoRow, acquire, put_memo, release
from memseal.service.app import create_app
from memseal.service.tokens import TokenStore, scope_from

PLACE = "team:scale/agent:w"


def _started(run_id: str) -> Any:
    body = RunStarted(
        run_id=run_id, mode="record", place=PLACE, reach=None, writes=True, floor="unverified"
    )
    return make_draft(RUN_STARTED, msgspec.to_builtins(body))


def _call(run_id: str, step: int, observed: int) -> Any:
    query = f"step {step} of {run_id}"
    result = {"hits": [], "mode": "exact"}
    body = ToolCall(
        run_id=run_id,
        step=step,
        tool="memory_fetch",
        memo_key=memo_key(run_id, step),
        fingerprint=secrets.token_hex(32),
        input_hash=secrets.token_hex(32),
        result_hash=secrets.token_hex(32),
        error=False,
        observed_size=observed,
        wrote=(),
        cites=(),
        supersedes=None,
        result=result,
    )
    payload = {"arguments": {"query": query}, "texts": {}}
    return make_draft(TOOL_CALL, msgspec.to_builtins(body), payload)


async def build(folder: Path, runs: int, calls: int, interleave: int) -> float:
    """Make the data folder's ledger (see the module docstring); seconds it took."""
    began = time.perf_counter()
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        for first in range(0, runs, interleave):
            ids = [f"scale-{n:05d}" for n in range(first, min(runs, first + interleave))]

            def command(txn: WriteTxn, ids: list[str] = ids) -> None:
                holder = secrets.token_hex(16)
                for run_id in ids:
                    acquire(txn, run_id, holder, 60.0)
                    txn.append(_started(run_id))
                for step in range(calls):
                    for run_id in ids:
                        seq = txn.append(_call(run_id, step, txn.size)).seq
                        key = memo_key(run_id, step)
                        put_memo(txn, MemoRow(run_id=run_id, step=step, memo_key=key, seq=seq))
                for run_id in ids:
                    release(txn, run_id, holder)

            await memory.ledger.run(command)
        await memory.ledger.checkpoint()
    return time.perf_counter() - began


def _auditor(folder: Path) -> str:
    store = TokenStore(folder)
    try:
        made, _ = store.add("auditor", scope_from(role="auditor", place="", reach="all"))
    finally:
        store.close()
    return made


async def _timed(
    n: int, request: Callable[[], Awaitable[tuple[int, bool]]]
) -> tuple[list[float], int, bool]:
    """``n`` timed runs of ``request`` (which says the rows it got and whether paging ended
    where it should): ms each, the most rows one response held, all ended well."""
    times: list[float] = []
    most, good = 0, True
    for _ in range(n):
        began = time.perf_counter()
        rows, ok = await request()
        times.append((time.perf_counter() - began) * 1000)
        most, good = max(most, rows), good and ok
    return times, most, good


async def measure(folder: Path, runs: int, requests: int, per: int = 50) -> list[dict[str, Any]]:
    """Each console read on the folder's ledger, timed (see the module docstring)."""
    first_admin(folder)
    token = _auditor(folder)
    app = create_app(folder, embedder=None, checkpoint_interval=None, mcp=False)
    rows: list[dict[str, Any]] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://console",
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        ) as c:
            size = (await c.get("/v1/ledger")).json()["size"]
            first = (await c.get("/v1/ledger/runs", params={"limit": per})).json()
            # The run halfway through the log: its timeline has half the log after it.
            middle = f"scale-{runs // 2:05d}"

            async def get(path: str, **params: Any) -> Any:
                r = await c.get(path, params=params)
                assert r.status_code == 200, r.text
                return r.json()

            async def newest_entries() -> tuple[int, bool]:
                page = await get("/v1/ledger/entries", start=max(0, size - 50), limit=50)
                return len(page["entries"]), page["next"] is None

            async def kind_scan() -> tuple[int, bool]:
                page = await get("/v1/ledger/entries", start=0, limit=50, kind="run_forked")
                return len(page["entries"]), page["next"] == (5000 if size > 5000 else None)

            async def runs_first() -> tuple[int, bool]:
                page = await get("/v1/ledger/runs", limit=per)
                return len(page["runs"]), page["next_before"] is not None

            async def runs_next() -> tuple[int, bool]:
                page = await get("/v1/ledger/runs", before=first["next_before"], limit=per)
                return len(page["runs"]), page["runs"][0]["started_seq"] < first["next_before"]

            async def run_row() -> tuple[int, bool]:
                page = await get("/v1/ledger/runs", run=middle)
                return len(page["runs"]), page["runs"][0]["run_id"] == middle

            async def run_memo() -> tuple[int, bool]:
                page = await get("/v1/ledger/memos", run=middle)
                return len(page["memos"]), page["next_after"] is None

            found = (await get("/v1/ledger/runs", run=middle))["runs"][0]

            async def timeline_page() -> tuple[int, bool]:
                page = await get(
                    "/v1/ledger/entries",
                    run=middle,
                    start=found["started_seq"],
                    limit=200,
                    end=found["last_seq"] + 1,
                )
                return len(page["entries"]), True

            async def timeline_all() -> tuple[int, bool]:
                start: int | None = found["started_seq"]
                got, most = 0, 0
                while start is not None:
                    page = await get(
                        "/v1/ledger/entries",
                        run=middle,
                        start=start,
                        limit=200,
                        end=found["last_seq"] + 1,
                    )
                    got += len(page["entries"])
                    most = max(most, len(page["entries"]))
                    start = page["next"]
                return most, got == found["recorded_steps"] + 1

            async def timeline_unbounded() -> tuple[int, bool]:
                # What the console did before `end`: scan on until 200 entries or the log's
                # end (the run has fewer, so it reads every entry after the run's start).
                start: int | None = found["started_seq"]
                got, most = 0, 0
                while start is not None and got < 200:
                    page = await get("/v1/ledger/entries", run=middle, start=start, limit=200)
                    got += len(page["entries"])
                    most = max(most, len(page["entries"]))
                    start = page["next"]
                return most, got == found["recorded_steps"] + 1

            cases: list[tuple[str, Callable[[], Awaitable[tuple[int, bool]]]]] = [
                ("Ledger: newest 50 entries", newest_entries),
                ("Ledger: kind filter matching nothing (5,000 scanned)", kind_scan),
                (f"Runs: newest {per} runs", runs_first),
                (f"Runs: next {per} (cursor next_before)", runs_next),
                ("Run: its row (?run=ID)", run_row),
                ("Run: its memo, one page", run_memo),
                ("Run timeline: first page of entries (start, end)", timeline_page),
                ("Run timeline: every page through next", timeline_all),
                ("Run timeline without end (the console before this pass)", timeline_unbounded),
            ]
            for name, request in cases:
                times, most, ok = await _timed(requests, request)
                times.sort()
                rows.append(
                    {
                        "route": name,
                        "p50_ms": round(statistics.median(times), 2),
                        "p95_ms": round(times[max(0, math.ceil(len(times) * 0.95) - 1)], 2),
                        "max_rows": most,
                        "paging_ok": ok,
                    }
                )
    return rows


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=99, help="calls a run (+1 run_started)")
    parser.add_argument("--interleave", type=int, default=10, help="runs recorded side by side")
    parser.add_argument("--requests", type=int, default=20, help="timed requests a route")
    parser.add_argument("--page", type=int, default=50, help="runs a page (fewer than --runs)")
    parser.add_argument("--folder", type=Path, help="keep the data folder here (built if new)")
    parser.add_argument("--build-only", type=Path, metavar="DIR", help="build DIR and stop")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.build_only is not None:
        spent = await build(args.build_only, args.runs, args.calls, args.interleave)
        print(json.dumps({"entries": args.runs * (args.calls + 1), "build_s": round(spent, 2)}))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or Path(tmp) / "data"
        took: float | None = None
        if not (folder / "ledger.db").exists():
            took = await build(folder, args.runs, args.calls, args.interleave)
        rows = await measure(folder, args.runs, args.requests, args.page)
    entries = args.runs * (args.calls + 1)
    built = "reused" if took is None else f"built in {took:.1f} s"
    print(
        f"console at scale: {args.runs:,} runs, {entries:,} entries ({built}), "
        f"{args.interleave} runs interleaved, {args.requests} requests a route"
    )
    print("| route | p50 ms | p95 ms | most rows a response | paging ok |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['route']} | {r['p50_ms']} | {r['p95_ms']} | {r['max_rows']} | {r['paging_ok']} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": args.runs, "entries": entries, "rows": rows}))
    return 0 if all(r["paging_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
