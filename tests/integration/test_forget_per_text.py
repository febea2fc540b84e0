"""A forget erases the forgotten item's texts from recorded results, and only those."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import memseal
from memseal import ToolScope
from memseal.ledger.keys import key_history
from memseal.memory import Memory
from memseal.replay.evidence.bundle import encode_bundle, export_bundle, verify_bundle

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
A = "alpha secret: the vault code is 7741 for the deploy"
B = "bravo note: the deploy window is friday for the deploy"


@pytest.fixture
async def memory(tmp_path: Path, store_url: str | None) -> AsyncIterator[Memory]:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=None, checkpoint_interval=None
    ) as opened:
        yield opened


async def _calls(memory: Memory) -> list[object]:
    async with memory.run("run-1", SCOPE) as run:
        a = await run.call("memory_store", {"learning": {"text": A}})
        b = await run.call("memory_store", {"learning": {"text": B}})
        fetched = await run.call("memory_fetch", {"query": "deploy", "mode": "exact"})
        return [a, b, fetched]


async def test_forgetting_one_hit_keeps_the_others_byte_for_byte(memory: Memory) -> None:
    a, b, fetched = await _calls(memory)
    assert isinstance(fetched, dict) and isinstance(a, dict) and isinstance(b, dict)
    texts = {h["id"]: h["text"] for h in fetched["hits"]}
    assert texts == {a["id"]: A, b["id"]: B}
    await memory.tools(SCOPE).call("memory_forget", {"ids": [a["id"]]})
    await memory.engine.scrub()
    replayed = await _calls(memory)
    hits = {h["id"]: h for h in replayed[2]["hits"]}  # type: ignore[index]
    assert hits[b["id"]]["text"] == B
    assert set(hits[a["id"]]["text"]) == {"forgotten_at"}
    assert hits[b["id"]] == next(h for h in fetched["hits"] if h["id"] == b["id"])
    await memory.verify(deep=True)
    await memory.ledger.verify(trust=memory.vkey)
    bundle = await export_bundle(memory.ledger, key_history(memory.folder), "run-1")
    verified = verify_bundle(encode_bundle(bundle), memory.vkey)
    shown = next(c.result for c in verified.calls if c.call.tool == "memory_fetch")
    assert B in str(shown) and A not in str(shown)
    assert A.encode() not in encode_bundle(bundle)
    store = memory.ledger.store
    if getattr(store, "dialect", "") == "sqlite":
        await memory.close()
        for f in (memory.folder).iterdir():
            if f.is_file():
                assert b"vault code is 7741" not in f.read_bytes(), f.name
