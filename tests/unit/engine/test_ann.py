"""The HNSW index on SQLite: built past its minimum, kept current, never the judge of scope.

Each test opens a real data folder with the hashing embedder and ``ann=0`` (the
index answers from the first memory), so that what the index does is visible
at sizes a unit test can afford; the property test in tests/property compares
its answers with the exact scan.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.engine import HashingEmbedder, Learning, Reach
from memseal.errors import InvalidRequest

PLACE = "team:acme/agent:writer"


def _open(folder: Path, ann: int | None = 0, embedder: str | None = "hashing") -> Any:
    # The currency rule is off: these tests ask which item the index finds, and the rule
    # would lift a newer near-duplicate note above it.
    chosen = HashingEmbedder(dim=32) if embedder == "hashing" else None
    return memseal.open(folder, embedder=chosen, ann=ann, currency=False)


async def test_the_index_holds_every_live_item_once_a_ranking_built_it(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        for i in range(30):
            await engine.store(Learning(text=f"release note {i}"), namespace=PLACE)
        assert engine.ann_size == 0  # not built until a ranking needs it
        fetched = await engine.fetch("release", mode="semantic", limit=5)
        assert len(fetched.hits) == 5
        assert engine.ann_size == 30
        await engine.store(Learning(text="release note late"), namespace=PLACE)
        await engine.fetch("release", mode="semantic", limit=5)
        assert engine.ann_size == 31  # caught up before the next search


async def test_a_forgotten_item_leaves_the_index_and_is_never_proposed(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        kept = await engine.store(Learning(text="deploy pipeline approval"), namespace=PLACE)
        gone = await engine.store(Learning(text="deploy pipeline approval!"), namespace=PLACE)
        await engine.fetch("deploy pipeline", mode="semantic")
        assert engine.ann_size == 2
        await engine.forget(ids=[gone.id])
        assert engine.ann_size == 1
        fetched = await engine.fetch("deploy pipeline approval!", mode="semantic")
        assert [h.item.id for h in fetched.hits] == [kept.id]


async def test_a_rejected_item_never_takes_a_place_though_the_index_holds_it(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        best = await engine.store(Learning(text="the budget is due friday"), namespace=PLACE)
        other = await engine.store(Learning(text="coffee machine on floor two"), namespace=PLACE)
        await engine.fetch("budget", mode="semantic")
        await engine.reject(best.id, actor="auditor", reason="wrong")
        fetched = await engine.fetch("the budget is due friday", mode="semantic")
        assert engine.ann_size == 2  # trust is the query's condition, not the index's
        assert [h.item.id for h in fetched.hits] == [other.id]


async def test_out_of_reach_neighbours_never_push_an_in_reach_item_off_the_page(
    tmp_path: Path,
) -> None:
    # 200 near-identical items in a look-alike place outrank the one in reach: the index
    # proposes them first, the scope check drops them, and the search widens until the
    # item in reach is found (or the exact scan answers).
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        for i in range(200):
            await engine.store(Learning(text=f"lisbon office move {i}"), namespace="team:acme-corp")
        mine = await engine.store(Learning(text="the office is in porto"), namespace="team:acme")
        fetched = await engine.fetch(
            "lisbon office move", mode="semantic", reach=Reach.subtree("team:acme"), limit=3
        )
        assert [h.item.id for h in fetched.hits] == [mine.id]


async def test_an_item_stored_without_an_embedder_is_embedded_before_the_index_answers(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "d"
    async with _open(folder) as memory:
        await memory.engine.store(Learning(text="cache invalidation rules"), namespace=PLACE)
        await memory.engine.fetch("cache", mode="semantic")
    async with _open(folder, embedder=None) as memory:  # a process that embeds nothing
        late = await memory.engine.store(Learning(text="auth token rotation"), namespace=PLACE)
    async with _open(folder) as memory:
        fetched = await memory.engine.fetch("auth token rotation", mode="semantic")
        assert fetched.hits[0].item.id == late.id
        assert memory.engine.ann_size == 2


async def test_a_rebuild_starts_the_index_afresh_so_a_restored_item_is_found(
    tmp_path: Path,
) -> None:
    # The index holds seqs up to a high-water mark: an item the damaged projection lacked
    # when the index was built sits below that mark once a rebuild restores it, so only an
    # index started afresh can propose it.
    async with _open(tmp_path / "d") as memory:
        engine = memory.engine
        texts = [f"incident review {i} for the payments team" for i in range(6)]
        items = [await engine.store(Learning(text=t), namespace=PLACE) for t in texts]
        with contextlib.closing(
            sqlite3.connect(memory.folder / "ledger.db", isolation_level=None)
        ) as conn:
            conn.execute("DELETE FROM engine_items WHERE id = ?", (items[2].id,))
        await engine.fetch("incident review", mode="semantic")
        assert engine.ann_size == 5  # built over the damaged projection
        await engine.rebuild()
        assert engine.ann_size == 6
        fetched = await engine.fetch(texts[2], mode="semantic", limit=3)
        assert fetched.hits[0].item.id == items[2].id


async def test_below_the_minimum_the_scan_answers_and_no_index_is_built(tmp_path: Path) -> None:
    async with _open(tmp_path / "d", ann=1000) as memory:
        engine = memory.engine
        await engine.store(Learning(text="release note"), namespace=PLACE)
        fetched = await engine.fetch("release", mode="semantic")
        assert len(fetched.hits) == 1
        assert engine.ann_size == 0
    async with _open(tmp_path / "d", ann=None) as memory:
        assert memory.engine.ann_size is None


@pytest.mark.parametrize("bad", [-1, True, 1.5, "20000"])
async def test_a_bad_ann_option_is_refused_before_anything_is_made(
    tmp_path: Path, bad: object
) -> None:
    with pytest.raises(InvalidRequest, match="`ann`"):
        await memseal.open(tmp_path / "d", embedder=None, ann=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    "first, then", [("usearch.index", "onnxruntime"), ("onnxruntime", "usearch.index")]
)
def test_the_index_library_and_the_embedder_runtime_load_in_either_order(
    first: str, then: str
) -> None:
    # Some usearch releases segfault when loaded before onnxruntime; a bump of the pin
    # that brings one back fails here rather than in a host's process.
    done = subprocess.run(
        [sys.executable, "-c", f"import {first}, {then}; print('ok')"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-500:]


def test_the_search_widens_as_the_graph_grows() -> None:
    # At a fixed breadth an HNSW search misses more of the true top 10 as the graph
    # grows (0.80 recall at 10^6 with breadth 128): the breadth follows the live count.
    import numpy as np

    from memseal.engine._ann import AnnIndex, search_breadth

    assert search_breadth(1) == search_breadth(25_000) == 128
    assert search_breadth(25_001) == 256
    assert search_breadth(100_000) == 512
    assert search_breadth(200_000) == search_breadth(10**8) == 1_024
    index = AnnIndex(8, minimum=0)
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((30_000, 8)).astype("<f4")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.add(list(range(100)), vectors[:100], 99)
    assert index.propose(vectors[0], 10)[0] == 0
    assert index._index.expansion_search == 128
    index.add(list(range(100, 30_000)), vectors[100:], 29_999)
    assert index.propose(vectors[5], 10)[0] == 5
    assert index._index.expansion_search == 256
