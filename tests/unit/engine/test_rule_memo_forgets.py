"""A read that began before a forget keeps nothing it read in the rule's memo.

A hostile user's race: fetches running beside a forget put the forgotten text's
candidates back into the memo after the forget had emptied it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.engine import HashingEmbedder, _fetch
from memseal.engine._rule_memo import count, epoch, forget_all, held, hold, reading_since

SCOPE = memseal.ToolScope.placed_at("user:race")


def test_what_a_read_begun_before_a_forget_reads_is_not_kept() -> None:
    began = epoch()
    forget_all()
    with reading_since(began):
        hold("race-test", [("k", "the forgotten text")])
    assert held("race-test", ["k"]) == [None]
    began = epoch()
    with reading_since(began):
        hold("race-test", [("k", "a live text")])
    assert held("race-test", ["k"]) == ["a live text"]


@pytest.mark.parametrize("mode", ["exact", "semantic", "hybrid"])
async def test_a_forget_landing_during_a_fetch_leaves_the_memo_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    async with memseal.open(
        tmp_path / "m", embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        tools = m.tools(SCOPE)
        for text in ("Our database is Postgres.", "Our database is now MySQL, not Postgres."):
            await tools.call("memory_store", {"learning": {"text": text}})
        ranked: Callable[..., Awaitable[Any]] = _fetch._rank_halves

        async def forgotten_meanwhile(*args: Any, **kwargs: Any) -> Any:
            halves = await ranked(*args, **kwargs)
            forget_all()  # a forget committed after the read began, as release() does
            return halves

        monkeypatch.setattr(_fetch, "_rank_halves", forgotten_meanwhile)
        found = await tools.call("memory_fetch", {"query": "which database", "mode": mode})
        assert len(found["hits"]) == 2
        assert count() == 0
        monkeypatch.undo()
        await tools.call("memory_fetch", {"query": "which database", "mode": mode})
        assert count() > 0  # a read begun after the forget keeps what it read
