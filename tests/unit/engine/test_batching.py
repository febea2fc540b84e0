"""Stores in flight share model calls; a lone store waits for nobody; a bad text fails alone."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import memseal
from memseal.engine import HashingEmbedder, Learning
from memseal.engine._batching import MAX_BATCH, Batcher


class Slow:
    """The hashing embedder, 20 ms a call, counting calls and refusing the text "boom"."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=16)
        self.calls: list[int] = []
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.calls.append(len(texts))
        time.sleep(0.02)
        if "boom" in texts:
            raise ValueError("the model cannot take this text")
        return self.inner.embed(texts)


async def test_a_lone_call_runs_at_once_in_its_own_model_call() -> None:
    slow = Slow()
    batcher = Batcher(slow.embed, lanes=1)
    assert await batcher.embed(["alpha"]) == slow.inner.embed(["alpha"])
    assert slow.calls == [1]


async def test_calls_in_flight_share_model_calls_and_each_gets_its_own_vectors() -> None:
    slow = Slow()
    batcher = Batcher(slow.embed, lanes=1)
    asked = [[f"text {i}", f"other {i}"] for i in range(20)]
    got = await asyncio.gather(*(batcher.embed(texts) for texts in asked))
    assert got == [slow.inner.embed(texts) for texts in asked]
    # Issued together, they wait together: one model call for all twenty.
    assert slow.calls == [40]


async def test_no_model_call_takes_more_than_the_batch_limit() -> None:
    slow = Slow()
    batcher = Batcher(slow.embed, lanes=1)
    asked = [[f"t{i}-{j}" for j in range(100)] for i in range(12)]
    got = await asyncio.gather(*(batcher.embed(texts) for texts in asked))
    assert [len(g) for g in got] == [100] * 12
    assert max(slow.calls) <= MAX_BATCH and sum(slow.calls) == 1200


async def test_a_text_the_model_refuses_fails_its_own_caller_only() -> None:
    slow = Slow()
    batcher = Batcher(slow.embed, lanes=1)
    first = asyncio.ensure_future(batcher.embed(["warm"]))
    await asyncio.sleep(0)  # the first call holds the model; the next three wait together
    others = [batcher.embed(["fine"]), batcher.embed(["boom"]), batcher.embed(["also fine"])]
    results = await asyncio.gather(*others, return_exceptions=True)
    await first
    assert results[0] == slow.inner.embed(["fine"])
    assert isinstance(results[1], ValueError)
    assert results[2] == slow.inner.embed(["also fine"])


async def test_concurrent_stores_are_embedded_in_fewer_calls_than_stores(tmp_path: Path) -> None:
    slow = Slow()
    # The currency rule is off: "note 14" and "note 3" read as one subject to it, and
    # this test is about how stores are batched, not which of them is current.
    async with memseal.open(tmp_path / "d", embedder=slow, ann=None, currency=False) as memory:
        slow.calls.clear()
        stored = await asyncio.gather(
            *(
                memory.engine.store(Learning(text=f"note {i}"), namespace="team:acme")
                for i in range(16)
            )
        )
        assert len({s.id for s in stored}) == 16
        assert sum(slow.calls) == 16 and len(slow.calls) < 16
        fetched = await memory.engine.fetch("note 3", mode="semantic", limit=1)
        assert fetched.hits[0].item.text == "note 3"


@pytest.mark.parametrize("lanes", [1, 2])
async def test_results_do_not_depend_on_how_calls_were_grouped(lanes: int) -> None:
    slow = Slow()
    batcher = Batcher(slow.embed, lanes=lanes)
    asked = [[f"grouped {i}"] for i in range(9)]
    together = await asyncio.gather(*(batcher.embed(t) for t in asked))
    alone = [await batcher.embed(t) for t in asked]
    assert together == alone
