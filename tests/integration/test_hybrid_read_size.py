"""A hybrid read records the prefix it ranked, even when writes land between its snapshots.

A hybrid fetch reads several snapshots: the BM25 half, the semantic half, the page's items.
Each reports its own tree size, and a read whose snapshots disagree ran again (and after 16
tries failed with Conflict), so a storm of stores made hybrid reads retry for nothing: both
halves rank ``seq < N`` and a new item lies past N. The engine now vouches for the prefix N
its BM25 half ranked (its corpus statistics are that prefix's) when nothing landing since
changed an item below N (no trust change, no forget); then the recorded size is N. Every
recorded read here is proven and re-derived at its size, byte for byte, on real SQLite.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.engine import HashingEmbedder
from memseal.engine._vectors import VectorCache
from memseal.replay.evidence.read_proof import verify_read

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TEXTS = ("the deploy key lives in vault", "deploy on tuesdays", "the key to the office")
QUERY = {"query": "deploy key"}


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=HashingEmbedder(), checkpoint_interval=None)


async def _calls(memory: Any, run_id: str) -> list[dict[str, Any]]:
    calls = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        if record.entry().kind == "memory_tool_call":
            body = msgspec.json.decode(record.entry().body)
            if body["run_id"] == run_id:
                calls.append(body)
    return calls


async def _proven(memory: Any, run_id: str, step: int) -> Any:
    # All texts disclosed (one namespace here anyway): BM25 re-derives byte for byte.
    data = await memory.prove_read(run_id, step, disclose="all")
    return await verify_read(data, memory.vkey)


async def test_stores_landing_between_the_halves_do_not_make_the_read_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = VectorCache.rank
    landed: list[int] = []
    async with _open(tmp_path / "d") as memory:
        for text in TEXTS:
            await memory.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
        before = await memory.ledger.size()

        async def rank(self: VectorCache, *args: Any, **kwargs: Any) -> Any:
            # Every time: after the BM25 half's snapshot, a store (sharing the query's words,
            # so it would move BM25 statistics) commits before the semantic half runs.
            text = f"deploy key note {len(landed)}"
            await memory.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
            landed.append(await memory.ledger.size())
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(VectorCache, "rank", rank)
        async with memory.run("h", SCOPE) as run:
            fetched = await run.call("memory_fetch", QUERY)
        monkeypatch.setattr(VectorCache, "rank", original)
        assert fetched["mode"] == "hybrid"
        assert len(landed) == 1  # one try: no retry for a store past the bound
        (call,) = await _calls(memory, "h")
        assert call["observed_size"] >= before  # the run_started entry may precede it
        assert call["observed_size"] < landed[0]
        assert {hit["text"] for hit in fetched["hits"]} == set(TEXTS)
        proven = await _proven(memory, "h", 0)
        assert proven.how == "byte for byte" and proven.derived == fetched


async def test_a_forget_between_the_halves_makes_the_read_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = VectorCache.rank
    forgot: list[str] = []
    async with _open(tmp_path / "d") as memory:
        ids = [
            (await memory.call("memory_store", {"learning": {"text": t}}, scope=SCOPE))[1]["id"]
            for t in TEXTS
        ]

        async def rank(self: VectorCache, *args: Any, **kwargs: Any) -> Any:
            if not forgot:
                # Once: an item below the BM25 half's prefix is forgotten before the semantic
                # half runs. Vouching for that prefix would record an answer without the
                # item at a size where it still exists: the read must run again instead.
                await memory.call("memory_forget", {"ids": [ids[0]]}, scope=SCOPE)
                forgot.append(ids[0])
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(VectorCache, "rank", rank)
        async with memory.run("f", SCOPE) as run:
            fetched = await run.call("memory_fetch", QUERY)
        monkeypatch.setattr(VectorCache, "rank", original)
        assert ids[0] not in {hit["id"] for hit in fetched["hits"]}
        proven = await _proven(memory, "f", 0)
        assert proven.how == "byte for byte" and proven.derived == fetched


async def test_hybrid_reads_in_a_write_storm_succeed_and_re_derive(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        for text in TEXTS:
            await memory.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
        stop = asyncio.Event()
        stored = 0

        async def storm() -> None:
            nonlocal stored
            while not stop.is_set():
                text = f"storm note {stored} about the deploy key"
                await memory.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
                stored += 1

        writers = [asyncio.create_task(storm()) for _ in range(3)]
        try:
            async with memory.run("s", SCOPE) as run:
                results = [await run.call("memory_fetch", QUERY) for _ in range(12)]
        finally:
            stop.set()
            await asyncio.gather(*writers)
        assert stored > 12  # the writes really interleaved with the reads
        sizes = [call["observed_size"] for call in await _calls(memory, "s")]
        assert sizes == sorted(sizes) and len(set(sizes)) > 1
        for step, fetched in enumerate(results):
            proven = await _proven(memory, "s", step)
            # Past a page of hits the result carries a cursor, whose keyed ref no proof can
            # re-derive: verify_read says so and compares every other field byte for byte.
            assert proven.how == "byte for byte" or "next_cursor" in proven.why, proven.why
            assert _uncursored(proven.derived) == _uncursored(fetched), step


def _uncursored(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "next_cursor"}
