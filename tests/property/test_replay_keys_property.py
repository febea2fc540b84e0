"""Keyed resume as a property: any order, any subset, new ids mixed in, each call once.

Hypothesis draws a script of keyed calls (stores and fetches over a small
vocabulary, so later fetches see earlier stores) and records it in a fresh
folder. Then, with a new memory on the folder, it resumes the run with a drawn
permutation of a drawn subset of the recorded ids, with new ids (whose calls
repeat recorded arguments, step 0's included) mixed in anywhere:

* every recorded id returns exactly the result it recorded;
* every new id is live: one entry each, and its result is what the same call
  returns live at that point (a fetch sees every store so far);
* nothing else is written, and the ledger and the memo table verify.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memseal
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call
from memseal.tools import ToolScope

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("memory_fetch", {"query": "deploy"}),
    ("memory_fetch", {"query": "invoices", "mode": "exact"}),
    ("memory_store", {"learning": {"text": "the deploy is on tuesday"}}),
    ("memory_store", {"learning": {"text": "invoices go out monthly"}}),
    ("memory_list", {}),
]

call_index = st.integers(0, len(CALLS) - 1)


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[int], list[tuple[str, int]]]:
    recorded = draw(st.lists(call_index, min_size=1, max_size=6))
    ids = list(range(len(recorded)))
    subset = draw(st.permutations(ids).map(lambda p: p[: draw(st.integers(0, len(p)))]))
    resumed: list[tuple[str, int]] = [("old", i) for i in subset]
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.integers(0, len(resumed)))
        resumed.insert(where, ("new", draw(st.sampled_from([recorded[0], *range(len(CALLS))]))))
    return recorded, resumed


async def _check(recorded: list[int], resumed: list[tuple[str, int]]) -> None:
    folder = Path(tempfile.mkdtemp()) / "d"
    results: dict[str, Any] = {}
    opened = memseal.open(folder, embedder=None, checkpoint_interval=None)
    async with opened as memory, memory.run("thread", SCOPE) as run:
        for i, which in enumerate(recorded):
            name, args = CALLS[which]
            results[f"old_{i}"] = await run.call(name, args, key=f"old_{i}")
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        fresh = 0
        async with memory.run("thread", SCOPE) as run:
            for n, (kind, value) in enumerate(resumed):
                if kind == "old":
                    name, args = CALLS[recorded[value]]
                    got = await run.call(name, args, key=f"old_{value}")
                    assert got == results[f"old_{value}"]
                else:
                    name, args = CALLS[value]
                    got = await run.call(name, args, key=f"new_{n}")
                    fresh += 1
                    if name == "memory_fetch":
                        # Live: the same fetch made now, in another run, finds the same hits.
                        async with memory.run(None, SCOPE, mode="record") as probe:
                            live = await probe.call(name, args)
                        assert [h["id"] for h in got["hits"]] == [h["id"] for h in live["hits"]]
        steps = []
        async for record in memory.ledger.scan(0, await memory.ledger.size()):
            entry = record.entry()
            if entry.kind == TOOL_CALL:
                call = decode_tool_call(bytes(entry.body))
                if call.run_id == "thread":
                    steps.append(call.step)
        # One entry per logical call, on consecutive steps: nothing written twice.
        assert steps == list(range(len(recorded) + fresh))
        await memory.verify()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(plans())
def test_keyed_resume_in_any_order_returns_each_recorded_call_once(
    plan: tuple[list[int], list[tuple[str, int]]],
) -> None:
    asyncio.run(_check(*plan))
