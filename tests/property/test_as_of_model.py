"""The memory as of any size equals a plain model of the memory at that size, later forgets
applied, for any history of stores, trust changes and forgets (re-stores included).

The model is a dict per size: id -> (text, trust) of the items live then. The view at size
N must answer ``memory_get`` of every id ever stored with: the model's live items at N,
text and trust; an item forgotten after N with its trust at N and its text as the forget
marker naming that later forget (below the floor: filtered); an item forgotten by N or not
yet stored: missing. ``memory_list`` lists exactly the live items at N not forgotten since.
Views are read in a random order, so some are built cold and some extend a smaller one.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import memseal
from memseal import ToolScope
from memseal.engine import Learning

TEXTS = ["alpha note", "beta note", "gamma note", "delta note"]
LEVELS = ["verified", "stale", "rejected", "unverified"]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("store"), st.sampled_from(TEXTS)),
        st.tuples(st.just("trust"), st.sampled_from(TEXTS), st.sampled_from(LEVELS)),
        st.tuples(st.just("forget"), st.sampled_from(TEXTS)),
    ),
    min_size=1,
    max_size=9,
)

# Sees every readable trust, so a rejected item is the only one a get files as filtered.
SCOPE = ToolScope(floor="stale", default_trust="stale", writes=False)


async def _set_trust(memory: memseal.Memory, item: str, level: str) -> None:
    engine = memory.engine
    if level == "verified":
        await engine.promote(item, actor="t", reason="r")
    elif level == "stale":
        await engine.mark_stale(item, actor="t", reason="r")
    elif level == "rejected":
        await engine.reject(item, actor="t", reason="r")
    else:
        # No API lowers to unverified directly: stale is the nearest (the model follows).
        await engine.mark_stale(item, actor="t", reason="r")


async def _history(memory: memseal.Memory, script: list[Any]) -> tuple[list[Any], dict[str, str]]:
    """Run ``script``; return, per size reached, (size, live model) and every id's text."""
    live: dict[str, tuple[str, str]] = {}
    ids: dict[str, str] = {}
    forgets: list[tuple[int, set[str]]] = []
    points: list[tuple[int, dict[str, tuple[str, str]]]] = [(0, {})]
    for op in script:
        text = op[1]
        if op[0] == "store":
            stored = await memory.engine.store(Learning(text=text), namespace="team:a")
            ids[stored.id] = text
            live.setdefault(stored.id, (text, "unverified"))
        else:
            found = [i for i, (t, _) in live.items() if t == text]
            if not found:
                continue
            (item,) = found
            if op[0] == "trust":
                await _set_trust(memory, item, op[2])
                level = "stale" if op[2] == "unverified" else op[2]
                live[item] = (text, level)
            else:
                result = await memory.engine.forget(ids=[item])
                forgets.append((result.seqs[0], {item}))
                del live[item]
        points.append(((await memory.ledger.store.head()).size, dict(live)))
    return [(size, model, forgets) for size, model in points], ids


async def _check(folder: Path, script: list[Any], order: list[int]) -> None:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        points, ids = await _history(memory, script)
        if not ids:
            return  # nothing was ever stored: every view is empty (checked elsewhere)
        picked = [points[i % len(points)] for i in order]
        for size, model, forgets in picked:
            later: dict[str, int] = {}
            for seq, items in forgets:  # the first forget after the size erased its text
                for item in items:
                    if seq >= size:
                        later.setdefault(item, seq)
            tools = (await memory.as_of(size)).tools(SCOPE)
            got = await tools.call("memory_get", {"ids": sorted(ids)})
            shown = {i["id"]: (i["text"], i["trust"]) for i in got["items"]}
            expected: dict[str, tuple[Any, str]] = {}
            filtered = []
            for item, (text, trust) in model.items():
                if trust == "rejected":
                    filtered.append(item)
                elif item in later:
                    expected[item] = ({"forgotten_at": later[item]}, trust)
                else:
                    expected[item] = (text, trust)
            assert shown == expected, (size, script)
            assert sorted(got["filtered"]) == sorted(filtered)
            assert sorted(got["missing"]) == sorted(set(ids) - set(model))
            listed = await tools.call("memory_list", {"limit": 50})
            assert {i["id"] for i in listed["items"]} == {
                i for i, (_, trust) in model.items() if i not in later and trust != "rejected"
            }


@settings(max_examples=25)
@given(script=ops, order=st.lists(st.integers(0, 20), min_size=1, max_size=5))
def test_every_view_equals_the_model_with_later_forgets_applied(
    script: list[Any], order: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_check(Path(tmp) / "data", script, order))
