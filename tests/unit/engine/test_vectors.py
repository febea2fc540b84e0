"""The vector cache: keyed by (embedder, content), kept by rebuild, never mixed, out of the hash."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest

from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder, Learning, _resident, _vectors
from memseal.ledger.store import WriteTxn

PLACE = "team:acme/agent:writer"


class Counting:
    """A hashing embedder that counts the texts it embeds."""

    def __init__(self, dim: int = 64) -> None:
        self._inner = HashingEmbedder(dim)
        self.texts: list[str] = []

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self._inner.embed(texts)


async def _cached(engine: Engine) -> list[tuple[str, str]]:
    rows = await engine._store.rows("SELECT embedder, content FROM engine_vectors ORDER BY 1, 2")
    return [(r[0], r[1]) for r in rows]


async def test_vectors_are_cached_by_content_and_kept_by_rebuild(data: Path) -> None:
    embedder = Counting()
    async with open_engine(data, create=True, embedder=embedder) as engine:
        await engine.store(Learning(text="same words"), namespace=PLACE)
        await engine.store(Learning(text="same words"), namespace="team:other")
        await engine.store(Learning(text="other words"), namespace=PLACE)
        assert embedder.texts == ["same words", "other words"]
        cached = await _cached(engine)
        assert len(cached) == 2 and {e for e, _ in cached} == {embedder.id}
        report = await engine.rebuild()
        assert report.matches
        assert await _cached(engine) == cached
        await engine.fetch("words", mode="semantic")
        assert embedder.texts == ["same words", "other words", "words"]
        # Forgetting one of two items with the same text keeps the shared vector.
        first = (await engine.list(filter={"kinds": ["fact"]}, limit=50)).items
        shared = [i.id for i in first if i.text == "same words"]
        await engine.forget(ids=shared[:1])
        assert len(await _cached(engine)) == 2
        await engine.forget(ids=shared[1:])
        assert len(await _cached(engine)) == 1


async def test_a_changed_embedder_re_embeds_and_never_mixes(data: Path) -> None:
    old = Counting(dim=64)
    async with open_engine(data, create=True, embedder=old) as engine:
        await engine.store(Learning(text="alpha beta"), namespace=PLACE)
    # An engine without an embedder leaves the cache alone.
    async with open_engine(data) as engine:
        await engine.store(Learning(text="gamma delta"), namespace=PLACE)
        assert {e for e, _ in await _cached(engine)} == {old.id}
    new = Counting(dim=32)
    async with open_engine(data, embedder=new) as engine:
        assert sorted(new.texts) == ["alpha beta", "gamma delta"]
        assert {e for e, _ in await _cached(engine)} == {new.id}
        hits = (await engine.fetch("gamma", mode="semantic")).hits
        assert hits[0].item.text == "gamma delta"
        meta = dict(await engine._store.rows("SELECT key, value FROM engine_meta"))
        assert (meta["embedder"], meta["embedder_dim"]) == (new.id, "32")


async def test_items_without_a_vector_are_embedded_when_a_query_needs_them(data: Path) -> None:
    embedder = Counting()
    async with open_engine(data, create=True, embedder=embedder) as engine:
        await engine.store(Learning(text="first"), namespace=PLACE)

        def drop(txn: WriteTxn) -> None:
            txn.execute("DELETE FROM engine_vectors")

        await engine._store.run(drop)
        hits = (await engine.fetch("first", mode="semantic")).hits
        assert [h.item.text for h in hits] == ["first"]
        assert embedder.texts == ["first", "first", "first"]  # store, query, then the gap


async def test_vectors_are_not_part_of_the_state_hash(engine: Engine) -> None:
    await engine.store(Learning(text="vector free hash"), namespace=PLACE)
    before = await engine.state_hash()

    def drop(txn: WriteTxn) -> None:
        txn.execute("DELETE FROM engine_vectors")

    await engine._store.run(drop)
    assert await engine.state_hash() == before
    assert await engine.recompute_state_hash() == before
    assert (await engine.rebuild()).state_hash == before


@pytest.mark.parametrize("numpy", [True, False])
def test_resident_vectors_rank_put_and_drop(numpy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not numpy:
        monkeypatch.setattr(_resident, "_np", None)
    embedder = HashingEmbedder(16)
    resident = _resident.Resident(16)
    texts = [f"text number {i}" for i in range(200)]
    blobs = [_vectors.pack(v) for v in embedder.embed(texts)]
    seqs = list(range(200))
    resident.put(zip(seqs, texts, blobs, strict=True))
    resident.put([(500, "text number 3", blobs[3])])  # another item, same content: shared
    assert resident.unknown([3, 500, 999]) == [999]
    target = blobs[3]
    ranked = resident.rank([*seqs, 500], target, cap=5)
    assert ranked[:2] == [(500, 1.0), (3, 1.0)] and len(ranked) == 5  # ties: newer first
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(ranked))
    assert resident.rank([999, 3], target, cap=5) == [(3, 1.0)]
    # A small candidate set and the whole matrix give the same scores.
    assert resident.rank(seqs[:3], target, 9) == [
        p for p in resident.rank(seqs, target, 200) if p[0] < 3
    ]
    resident.drop([3], [])  # item 3 goes; item 500 still holds the content
    assert resident.rank([3, 500], target, 5) == [(500, 1.0)]
    resident.drop([500], ["text number 3"])
    assert resident.rank([500], target, 5) == []
    resident.put([(7, "again", blobs[3])])  # reuses the freed row
    assert resident.rank([7], target, 5) == [(7, 1.0)]


async def test_embedders_names_the_embedders_whose_vectors_are_cached(
    data: Path, store_url: str | None
) -> None:
    async with open_engine(data, create=True, store=store_url) as engine:
        await engine.store(Learning(text="not embedded"), namespace=PLACE)
        assert await engine.embedders() == []
    embedder = HashingEmbedder(64)
    async with open_engine(data, embedder=embedder, store=store_url) as engine:
        await engine.store(Learning(text="embedded words"), namespace=PLACE)
        assert await engine.embedders() == [embedder.id]
    # Opened without an embedder (as bundle export opens it), the cache is still named.
    async with open_engine(data, store=store_url) as engine:
        assert engine.embedder_id is None
        assert await engine.embedders() == [embedder.id]
