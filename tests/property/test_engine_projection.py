"""The projection kept incrementally equals a rebuild from the log, for any history.

Random sequences of stores (learnings, documents, conversations, with tags and metadata,
some repeated so they replay), trust changes, forgets by ids and by filter and re-stores
of forgotten content run against one engine. Afterwards the incremental state hash, the
hash recomputed from every row and the hash of a full rebuild are one; rebuilding again
gives the same hash each time; and every item reads back the same after the rebuild.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from memseal.cli.engine import open_engine
from memseal.engine import Conversation, Document, Engine, Learning, Meta, Turn
from memseal.ledger.errors import NotFound

WORDS = ["alpha", "beta", "gamma", "delta", "tuesday", "2026-12-01", "yesterday", "deploy"]
PLACES = ["", "team:acme", "team:acme/agent:w", "team:acme-corp"]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
contents = st.one_of(
    st.builds(
        Learning,
        text=texts,
        kind=st.sampled_from(["fact", "lesson", "decision"]),
        confidence=st.sampled_from([0.1, 0.5, 0.8, 1.0]),
        evidence=st.none() | texts,
    ),
    st.builds(Document, text=texts, title=st.none() | texts),
    st.builds(
        Conversation,
        turns=st.lists(
            st.builds(Turn, role=st.sampled_from(["user", "assistant"]), text=texts),
            min_size=1,
            max_size=3,
        ).map(tuple),
    ),
)
metas = st.builds(
    Meta,
    repo=st.none() | st.sampled_from(["r1", "r2"]),
    thread_id=st.none() | st.sampled_from(["t1", "t2"]),
    language=st.none() | st.just("python"),
)
stores = st.tuples(
    st.just("store"),
    contents,
    st.sampled_from(PLACES),
    st.lists(st.sampled_from(["red", "blue", "green"]), max_size=2, unique=True),
    metas,
)
trusts = st.tuples(
    st.just("trust"), st.integers(0, 50), st.sampled_from(["promote", "reject", "mark_stale"])
)
forgets = st.tuples(st.just("forget"), st.lists(st.integers(0, 50), min_size=1, max_size=3))
filter_forgets = st.tuples(
    st.just("forget_filter"),
    st.sampled_from([{"kinds": ["document"]}, {"tags_any": ["red"]}, {"repo": "r2"}]),
)
restores = st.tuples(st.just("restore"), st.integers(0, 50))
operations = st.lists(
    st.one_of(stores, stores, trusts, forgets, filter_forgets, restores), max_size=25
)


async def _apply(engine: Engine, ops: list[tuple[Any, ...]]) -> None:
    stored: list[tuple[Any, str]] = []  # (content, place) of every store, in order
    ids: list[str] = []
    for op in ops:
        if op[0] == "store":
            _, content, place, tags, meta = op
            ids.append((await engine.store(content, namespace=place, tags=tags, meta=meta)).id)
            stored.append((content, place))
        elif op[0] == "trust" and ids:
            target = ids[op[1] % len(ids)]
            with contextlib.suppress(NotFound):  # forgotten already
                await getattr(engine, op[2])(target, actor="prop", reason=f"step {op[1]}")
        elif op[0] == "forget" and ids:
            await engine.forget(ids=[ids[i % len(ids)] for i in op[1]], scrub=False)
        elif op[0] == "forget_filter":
            await engine.forget(filter=op[1], scrub=False)
        elif op[0] == "restore" and stored:
            content, place = stored[op[1] % len(stored)]
            ids.append((await engine.store(content, namespace=place)).id)
    await engine.scrub()


async def _everything(engine: Engine) -> bytes:
    items: list[Any] = []
    cursor = None
    while True:
        page = await engine.list(limit=50, cursor=cursor, min_trust="stale")
        items.extend(page.items)
        if page.next_cursor is None:
            return msgspec.json.encode(items)
        cursor = page.next_cursor


async def _check(folder: Path, ops: list[tuple[Any, ...]], rebuilds: int) -> None:
    async with open_engine(folder, create=True) as engine:
        await _apply(engine, ops)
        incremental = await engine.state_hash()
        assert await engine.recompute_state_hash() == incremental
        before = await _everything(engine)
        hashes = set()
        for _ in range(rebuilds):
            report = await engine.rebuild()
            assert report.previous_hash == incremental
            hashes.add(report.state_hash)
        assert hashes == {incremental}
        assert await _everything(engine) == before
        await engine.ledger.verify()


@given(ops=operations)
@settings(deadline=None)
def test_incremental_projection_equals_a_rebuild(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as where:
        asyncio.run(_check(Path(where) / "data", ops, rebuilds=2))


@given(
    ops=st.lists(
        st.one_of(stores, stores, stores, trusts, forgets, restores), min_size=60, max_size=80
    )
)
@settings(deadline=None, max_examples=3)
def test_ten_rebuilds_give_one_hash(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as where:
        asyncio.run(_check(Path(where) / "data", ops, rebuilds=10))
