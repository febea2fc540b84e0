"""Scoping as a property: whatever a model calls under scope A, it stays inside A.

Hypothesis draws a namespace tree of tenants (with look-alike names, so segment
boundaries matter), items placed in it by the host (some promoted, stale or
rejected), a scope A (a place and a reach of any kind), and any sequence of model
calls under A: stores, fetches in every mode, lists through every page, gets of any
ids (in reach or not), explores, recalls, and forgets by ids or by filter. After
every call:

* nothing outside A's reach is ever returned (hits, items, citations), nor
  counted by explore;
* rejected memory is never returned;
* every write lands at A's place;
* nothing outside A's reach is ever forgotten (checked against the engine
  itself, reading without any reach, at the end).

The oracle is written apart from the engine: a namespace is in reach by comparing
tuples of segments.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memseal.cli.engine import open_engine
from memseal.engine import HashingEmbedder, Learning, Reach
from memseal.tools import MemoryTools, ToolScope

SEGMENTS = ["team:acme", "team:acme-corp", "team:acmeco", "agent:a", "agent:a-b", "agent:ab"]
WORDS = ["shared", "secret", "dark", "mode", "deploy", "tuesday"]
TRUST = ["unverified", "unverified", "verified", "stale", "rejected"]

paths = st.lists(st.sampled_from(SEGMENTS), max_size=3).map("/".join)
items = st.lists(
    st.tuples(
        paths, st.sampled_from(TRUST), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)
    ),
    min_size=1,
    max_size=10,
)
reaches = st.sampled_from(["of", "subtree", "exact", "none"])
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
model_filter = st.fixed_dictionaries(
    {},
    optional={
        "tags_any": st.lists(st.sampled_from(["t", "u"]), min_size=1, max_size=2),
        "kinds": st.just(["fact"]),
    },
)
nonempty_filter = st.fixed_dictionaries(
    {"tags_any": st.lists(st.sampled_from(["t", "u"]), min_size=1, max_size=2)},
    optional={"kinds": st.just(["fact"])},
) | st.just({"kinds": ["fact"]})
calls = st.one_of(
    st.builds(
        lambda t, tag: ("memory_store", {"learning": {"text": t}, "tags": [tag]}),
        text,
        st.sampled_from(["t", "u"]),
    ),
    st.builds(
        lambda q, m: ("memory_fetch", {"query": q, "mode": m, "limit": 50}),
        text,
        st.sampled_from(["exact", "semantic", "hybrid"]),
    ),
    st.builds(
        lambda f: ("memory_list", {"filter": f, "limit": 3} if f else {"limit": 3}), model_filter
    ),
    st.builds(
        lambda picks: ("memory_get", {"ids": picks}),
        st.lists(st.integers(0, 30), min_size=1, max_size=6),
    ),
    st.builds(
        lambda facet: ("memory_explore", {"facet": facet}),
        st.sampled_from(["tag", "kind", "source"]),
    ),
    st.builds(lambda q: ("memory_recall", {"question": q, "limit": 50}), text),
    st.builds(
        lambda picks: ("memory_forget", {"ids": picks}),
        st.lists(st.integers(0, 30), min_size=1, max_size=4),
    ),
    st.builds(lambda f: ("memory_forget", {"filter": f}), nonempty_filter),
    st.builds(lambda t: ("memory_fetch", {"query": t, "min_trust": "stale"}), text),
)


def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("/")) if path else ()


def in_reach(mode: str, node: str, path: str) -> bool:
    item, at = _parts(path), _parts(node)
    if mode == "none":
        return True
    if mode == "exact":
        return item == at
    if mode == "subtree":
        return item[: len(at)] == at
    return at[: len(item)] == item  # of: the node and its ancestors


def _reach(mode: str, node: str) -> Reach | None:
    if mode == "none":
        return None
    return {"of": Reach.of, "subtree": Reach.subtree, "exact": Reach.exact}[mode](node)


async def _check(
    folder: Path,
    placed: list[tuple[str, str, list[str]]],
    place: str,
    mode: str,
    node: str,
    sequence: list[tuple[str, dict[str, Any]]],
) -> None:
    async with open_engine(folder, create=True, embedder=HashingEmbedder(dim=32)) as engine:
        where: dict[str, str] = {}
        trust: dict[str, str] = {}
        for i, (path, level, words) in enumerate(placed):
            stored = await engine.store(
                Learning(text=f"{' '.join(words)} item {i}"), namespace=path, tags=["t"]
            )
            where[stored.id], trust[stored.id] = path, "unverified"
            if level == "verified":
                await engine.promote(stored.id, actor="host", reason="checked")
            elif level == "stale":
                await engine.mark_stale(stored.id, actor="host", reason="old")
            elif level == "rejected":
                await engine.reject(stored.id, actor="host", reason="wrong")
            trust[stored.id] = level
        known = list(where) + [f"unknown-{i}" for i in range(3)]
        alive = set(where)

        scope = ToolScope.placed_at(place, reach=_reach(mode, node), floor="stale")
        tools = MemoryTools(engine, scope)

        def visible(item_id: str, floor: str = "unverified") -> bool:
            levels = ["stale", "unverified", "verified"]
            return (
                item_id in alive
                and in_reach(mode, node, where[item_id])
                and trust[item_id] in levels[levels.index(floor) :]
            )

        for name, arguments in sequence:
            arguments = dict(arguments)
            if "ids" in arguments:
                arguments["ids"] = [known[i % len(known)] for i in arguments["ids"]]
            result = await tools.call(name, arguments)
            floor = arguments.get("min_trust", "unverified")
            if name == "memory_store":
                (item,) = (await engine.get([result["id"]], min_trust="stale")).items
                assert item.namespace == place
                if not result["replayed"]:
                    where[item.id], trust[item.id] = place, "unverified"
                    alive.add(item.id)
                    known.append(item.id)
            elif name == "memory_fetch":
                assert all(visible(h["id"], floor) for h in result["hits"])
            elif name == "memory_recall":
                assert all(visible(c["id"]) for c in result["citations"])
            elif name == "memory_list":
                seen = [i["id"] for i in result["items"]]
                while "next_cursor" in result:
                    result = await tools.call(name, {**arguments, "cursor": result["next_cursor"]})
                    seen.extend(i["id"] for i in result["items"])
                assert all(visible(i) for i in seen)
                if "filter" not in arguments:
                    assert set(seen) == {i for i in alive if visible(i)}
            elif name == "memory_get":
                shown = {i["id"] for i in result["items"]}
                assert shown == {i for i in arguments["ids"] if visible(i)}
                hidden = set(result["missing"]) | set(result["filtered"])
                assert hidden == set(arguments["ids"]) - shown
                for i in result["filtered"]:  # below the floor, but in reach and alive
                    assert i in alive and in_reach(mode, node, where[i])
            elif name == "memory_explore":
                assert result["total"] == sum(1 for i in alive if visible(i))
                assert sum(b["count"] for b in result["buckets"]) <= (
                    result["total"] * (2 if result["facet"] == "tag" else 1)
                )
            elif name == "memory_forget":
                for i in result["forgotten"]:
                    assert i in alive and in_reach(mode, node, where[i])
                    alive.discard(i)
                if "ids" in arguments:
                    asked = set(arguments["ids"])
                    assert set(result["forgotten"]) | set(result["skipped"]) == asked
                    for i in result["skipped"]:
                        assert i not in alive or not in_reach(mode, node, where[i])

        # The engine itself, reading everything: only in-reach items are gone.
        left = await engine.get(list(where)[:200], min_trust="stale")
        present = {item.id for item in left.items} | set(left.filtered)
        for item_id, path in where.items():
            if not in_reach(mode, node, path):
                assert item_id in present, "an item outside the reach was forgotten"
            assert (item_id in present) == (item_id in alive)


@given(
    placed=items,
    place=paths,
    mode=reaches,
    node=paths,
    sequence=st.lists(calls, min_size=1, max_size=8),
)
@settings(deadline=None, max_examples=120)
def test_a_model_never_leaves_its_scope(
    placed: list[tuple[str, str, list[str]]],
    place: str,
    mode: str,
    node: str,
    sequence: list[tuple[str, dict[str, Any]]],
) -> None:
    if mode == "of":
        node = place  # what placed_at gives: the place and its ancestors
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_check(Path(folder) / "data", placed, place, mode, node, sequence))
