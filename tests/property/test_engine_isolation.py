"""Isolation: no query ever returns an item outside the reach.

Hypothesis draws a namespace tree (with look-alike names such as ``team:acme``,
``team:acme-corp`` and ``team:acmeco``, so segment boundaries matter), items placed in
it, and a reach. Every read (list through all pages, get, fetch in every mode, explore,
recall) and a forget by filter are checked against an oracle written independently of
the engine: a path is in reach by comparing tuples of segments.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memseal.cli.engine import open_engine
from memseal.engine import HashingEmbedder, Learning, Reach

SEGMENTS = [
    "team:acme",
    "team:acme-corp",
    "team:acmeco",
    "agent:a",
    "agent:a-b",
    "agent:ab",
    "run:1",
]

paths = st.lists(st.sampled_from(SEGMENTS), max_size=3).map("/".join)
reaches = st.none() | st.tuples(st.sampled_from(["of", "subtree", "exact"]), paths)


def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("/")) if path else ()


def oracle(reach: tuple[str, str] | None, path: str) -> bool:
    if reach is None:
        return True
    mode, node = reach
    item, at = _parts(path), _parts(node)
    if mode == "exact":
        return item == at
    if mode == "subtree":
        return item[: len(at)] == at
    return at[: len(item)] == item  # of: the node and its ancestors


def _reach(reach: tuple[str, str] | None) -> Reach | None:
    if reach is None:
        return None
    mode, node = reach
    return {"of": Reach.of, "subtree": Reach.subtree, "exact": Reach.exact}[mode](node)


async def _check(folder: Path, places: list[str], raw: tuple[str, str] | None) -> None:
    reach = _reach(raw)
    async with open_engine(folder, create=True, embedder=HashingEmbedder(dim=32)) as engine:
        where: dict[str, str] = {}
        for i, place in enumerate(places):
            stored = await engine.store(
                Learning(text=f"shared secret number {i}"), namespace=place, tags=["t"]
            )
            where[stored.id] = place
        allowed = {i for i, p in where.items() if oracle(raw, p)}

        seen: set[str] = set()
        cursor = None
        while True:
            page = await engine.list(reach=reach, limit=3, cursor=cursor)
            seen |= {item.id for item in page.items}
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == allowed

        got = await engine.get(list(where), reach=reach)
        assert {item.id for item in got.items} == allowed
        assert set(got.missing) == set(where) - allowed

        for mode in ("exact", "semantic", "hybrid"):
            hits = (await engine.fetch("shared secret", mode=mode, reach=reach, limit=50)).hits
            assert {h.item.id for h in hits} == allowed, mode
            assert all(oracle(raw, h.item.namespace) for h in hits)

        explored = await engine.explore("tag", reach=reach)
        assert explored.total == len(allowed)
        recalled = await engine.recall("shared secret", reach=reach, limit=50)
        assert {c.id for c in recalled.citations} <= allowed

        forgotten = await engine.forget(filter={"tags_any": ["t"]}, reach=reach)
        assert set(forgotten.forgotten) == allowed
        left = await engine.get(list(where))
        assert {item.id for item in left.items} == set(where) - allowed


@given(places=st.lists(paths, min_size=1, max_size=8, unique=True), reach=reaches)
@settings(deadline=None)
def test_no_query_returns_an_item_outside_the_reach(
    places: list[str], reach: tuple[str, str] | None
) -> None:
    with tempfile.TemporaryDirectory() as where:
        asyncio.run(_check(Path(where) / "data", places, reach))
