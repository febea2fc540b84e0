"""``asyncio.gather`` of 20 calls: each call is its issue position's step, live and on resume.

``run.call`` reserves its step when called, not when awaited, so 20 calls
gathered at once (stores and reads interleaved, completing in whatever order
the writer takes them) are steps 0..19 in the order they were issued. After
reopening the folder:

* a resumed run issuing the same 20 calls through ``gather`` gets, position by
  position, byte-identical results, and writes nothing (the ledger's size and
  its count of ``memory_stored`` entries are unchanged);
* each step's signed ``memory_tool_call`` entry names the call issued at that
  position (tool and arguments), with one entry and one memo per step;
* a strict run that issues the same calls but awaits them in reverse order
  still gets each position's result: the step is fixed at issue, not at await.

On each store (the folder's SQLite file, and PostgreSQL when the test server is there).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

import memseal
from memseal.tools import ToolScope

RUN_ID = "gathered"
SCOPE = ToolScope.placed_at("team:acme/agent:writer")
ENCODER = msgspec.json.Encoder(order="deterministic")


def _calls() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for i in range(10):
        calls.append(("memory_store", {"learning": {"text": f"gathered fact {i} about deploys"}}))
        reads: list[tuple[str, dict[str, Any]]] = [
            ("memory_fetch", {"query": "deploys", "mode": "exact", "limit": 20}),
            ("memory_list", {"limit": 20}),
            ("memory_recall", {"question": f"what is fact {i}"}),
            ("memory_explore", {"facet": "kind"}),
            ("memory_fetch", {"query": f"fact {i}", "mode": "exact"}),
        ]
        calls.append(reads[i % len(reads)])
    return calls


async def _gather(memory: memseal.Memory, mode: str) -> list[bytes]:
    async with memory.run(RUN_ID, SCOPE, mode=mode) as run:
        results = await asyncio.gather(*(run.call(name, args) for name, args in _calls()))
    return [ENCODER.encode(result) for result in results]


async def _ledger(memory: memseal.Memory) -> tuple[int, Counter[str], dict[int, list[Any]]]:
    """The ledger's size, its entries by kind, and each step's recorded (tool, arguments)."""
    kinds: Counter[str] = Counter()
    steps: dict[int, list[Any]] = {}
    async for record in memory.ledger.scan():
        entry = record.entry()
        kinds[entry.kind] += 1
        if entry.kind == "memory_tool_call":
            body = msgspec.json.decode(bytes(entry.body))
            assert record.payload is not None
            arguments = msgspec.json.decode(record.payload)["arguments"]
            assert body["step"] not in steps, f"step {body['step']} recorded twice"
            steps[body["step"]] = [body["tool"], arguments]
    return (await memory.ledger.head()).size, kinds, steps


async def test_gathered_calls_are_their_issue_positions_on_resume(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    calls = _calls()
    async with memseal.open(
        folder, store=store_url, embedder=None, checkpoint_interval=None
    ) as memory:
        live = await _gather(memory, "resume")
        size, kinds, steps = await _ledger(memory)
    assert kinds["memory_stored"] == 10 and kinds["memory_tool_call"] == len(calls)
    # Step k is the k-th call issued, whatever order the calls completed in.
    assert steps == {k: [name, args] for k, (name, args) in enumerate(calls)}
    stored_ids = [msgspec.json.decode(live[k])["id"] for k in range(0, len(calls), 2)]
    assert len(set(stored_ids)) == 10

    async with memseal.open(
        folder, store=store_url, embedder=None, checkpoint_interval=None
    ) as memory:
        resumed = await _gather(memory, "resume")
        assert resumed == live
        assert await _ledger(memory) == (size, kinds, steps), "the resumed run wrote something"
        memos = await memory.ledger.store.rows(
            "SELECT step FROM memos WHERE run_id = ? ORDER BY step", (RUN_ID,)
        )
        assert [row[0] for row in memos] == list(range(len(calls)))

        # Issued in order, awaited backwards: each awaitable still holds its issue step.
        async with memory.run(RUN_ID, SCOPE, mode="strict") as run:
            pending = [run.call(name, args) for name, args in calls]
            backwards = [await call for call in reversed(pending)]
        assert [ENCODER.encode(r) for r in reversed(backwards)] == live
        assert (await memory.ledger.head()).size == size
