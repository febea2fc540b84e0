"""The HNSW index against the exact scan: same answers, same confinement.

Hypothesis draws memories placed in a namespace tree with look-alike names, with
random trust (some then rejected or forgotten), and semantic and hybrid queries
with random reaches and floors. Each query is answered twice over the same data
folder: through the index (``ann=0``: the index answers from the first memory)
and by the exact scan (``ann=None``). At these sizes the graph's search is
exhaustive, so the two must agree exactly, ids and scores; any difference is the
index's filtering or catch-up, not its approximation. A second test runs a
memory large enough for the graph to be approximate and checks what must hold
whatever the recall: every hit is in reach, at or above the floor, live, and
scored exactly as the scan scores it.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stores import ADAPTERS, drop_schemas, fresh_url

import memseal
from memseal.engine import Engine, HashingEmbedder, Learning, NewItem, Reach, Trust

PLACES = [
    "team:acme",
    "team:acme/agent:a",
    "team:acme/agent:a-b",
    "team:acme-corp",
    "team:acme-corp/agent:a",
]
WORDS = ["deploy", "invoice", "lisbon", "budget", "release", "coffee", "auth", "cache"]
LEVELS: list[Trust] = ["stale", "unverified", "verified"]

memories = st.lists(
    st.tuples(
        st.sampled_from(PLACES),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
        st.sampled_from(LEVELS),
        st.sampled_from(["keep", "keep", "keep", "reject", "forget"]),
    ),
    min_size=1,
    max_size=40,
)
reaches = st.tuples(st.sampled_from(["of", "subtree", "exact"]), st.sampled_from(PLACES))
queries = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
        st.sampled_from(["semantic", "hybrid"]),
        reaches,
        st.sampled_from(LEVELS),
        st.integers(min_value=1, max_value=12),
    ),
    min_size=1,
    max_size=6,
)


def _reach(raw: tuple[str, str]) -> Reach:
    mode, node = raw
    return {"of": Reach.of, "subtree": Reach.subtree, "exact": Reach.exact}[mode](node)


async def _fill_and_ask(
    folder: Path, store: str | None, drawn: list[tuple[str, str, Trust, str]], asked: list[Any]
) -> list[list[Any]]:
    """Store ``drawn`` (the index catching up as it goes) and answer through the index."""
    async with memseal.open(folder, store=store, embedder=HashingEmbedder(dim=32), ann=0) as memory:
        engine = memory.engine
        await _ask(engine, asked[:1])  # built early: later stores and forgets are caught up
        for i, (place, text, trust, fate) in enumerate(drawn):
            stored = await engine.store(Learning(text=f"{text} {i}"), namespace=place, trust=trust)
            if fate == "reject":
                await engine.reject(stored.id, actor="test", reason="drawn")
            elif fate == "forget":
                await engine.forget(ids=[stored.id])
        return await _ask(engine, asked)


async def _ask(engine: Engine, asked: list[Any]) -> list[list[Any]]:
    out = []
    for text, mode, reach, floor, limit in asked:
        fetched = await engine.fetch(
            text, mode=mode, reach=_reach(reach), min_trust=floor, limit=limit
        )
        out.append([(h.item.id, h.score) for h in fetched.hits])
    return out


async def _by_scan(folder: Path, store: str | None, asked: list[Any]) -> list[list[Any]]:
    async with memseal.open(
        folder, store=store, embedder=HashingEmbedder(dim=32), ann=None
    ) as memory:
        return await _ask(memory.engine, asked)


# SQLite's index (usearch) and pgvector's HNSW; PostgreSQL without pgvector has no index.
@pytest.mark.parametrize("adapter", [a for a in ADAPTERS if a != "postgresql"])
@settings(max_examples=15, deadline=None)
@given(drawn=memories, asked=queries)
def test_the_index_answers_as_the_exact_scan_under_random_scopes_and_floors(
    adapter: str, drawn: list[tuple[str, str, Trust, str]], asked: list[Any]
) -> None:
    store, schema = fresh_url(adapter=adapter) if adapter != "sqlite" else (None, None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "data"
            through_index = asyncio.run(_fill_and_ask(folder, store, drawn, asked))
            by_scan = asyncio.run(_by_scan(folder, store, asked))
    finally:
        if schema is not None:
            asyncio.run(drop_schemas([schema], adapter))
    assert through_index == by_scan


async def test_an_approximate_answer_never_leaves_the_scope(tmp_path: Path) -> None:
    # 3,000 memories across look-alike places, a third below the floor: the graph is
    # approximate here, the filtering must not be.
    folder = tmp_path / "data"
    async with memseal.open(folder, embedder=HashingEmbedder(dim=32), ann=0) as memory:
        engine = memory.engine
        where: dict[str, tuple[str, Trust]] = {}
        drawn = [
            NewItem(
                content=Learning(text=f"{WORDS[i % 8]} {WORDS[(i * 7) % 8]} {WORDS[i % 5]} {i}"),
                namespace=PLACES[i % len(PLACES)],
                trust=LEVELS[i % 3],
            )
            for i in range(3000)
        ]
        for start in range(0, len(drawn), 500):
            batch = drawn[start : start + 500]
            for new, stored in zip(batch, await engine.store_many(batch), strict=True):
                where[stored.id] = (new.namespace, new.trust)
        reach = Reach.subtree("team:acme")
        fetched = await engine.fetch(
            "deploy lisbon cache", mode="semantic", reach=reach, min_trust="verified", limit=20
        )
        assert len(fetched.hits) == 20
        for hit in fetched.hits:
            place, trust = where[hit.item.id]
            assert reach.admits(place) and not place.startswith("team:acme-corp")
            assert trust == "verified"
    async with memseal.open(folder, embedder=HashingEmbedder(dim=32), ann=None) as memory:
        exact = await memory.engine.fetch(
            "deploy lisbon cache", mode="semantic", reach=reach, min_trust="verified", limit=50
        )
    scores = {h.item.id: h.score for h in exact.hits}
    for hit in fetched.hits:
        assert scores.get(hit.item.id, hit.score) == hit.score
    assert fetched.hits[0].score == exact.hits[0].score
