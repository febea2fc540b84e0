"""memory.as_of: the memory as it stood at a point of its log, read-only, later forgets applied.

Real data folders on tmp_path (and PostgreSQL where the test server is there), real keys,
the recorded tools writing through the signed log. A view is compared with what the live
memory answered at that point, and with what a later forget must have taken away.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal import InvalidRequest, Reach, ToolScope, Unsupported
from memseal.apps._as_of_build import ViewLog
from memseal.engine import HashingEmbedder

READS = {"memory_recall", "memory_fetch", "memory_list", "memory_get", "memory_explore"}


async def size_of(memory: memseal.Memory) -> int:
    return (await memory.ledger.store.head()).size


async def test_a_view_shows_what_was_there_and_a_later_forget_still_applies(
    tmp_path: Path, store_url: str | None
) -> None:
    async with memseal.open(tmp_path / "data", store=store_url, embedder=None) as memory:
        tools = memory.tools()
        kept = (await tools.call("memory_store", {"learning": {"text": "prefers dark mode"}}))["id"]
        gone = (await tools.call("memory_store", {"learning": {"text": "pin code is quokka4711"}}))[
            "id"
        ]
        stored = await size_of(memory)
        live_then = await tools.call("memory_list", {})
        await memory.engine.promote(kept, actor="reviewer", reason="asked the user")
        promoted = await size_of(memory)
        await tools.call("memory_forget", {"ids": [gone]})
        forgot_at = (await size_of(memory)) - 2  # the forget entry, then its recorded call

        view = (await memory.as_of(size=stored)).tools()
        listed = await view.call("memory_list", {})
        # Exactly what was there, minus the text forgotten since: privacy wins over history.
        assert [i["id"] for i in listed["items"]] == [kept]
        assert listed["items"] == [i for i in live_then["items"] if i["id"] == kept]
        got = await view.call("memory_get", {"ids": [gone, kept]})
        assert [i["id"] for i in got["items"]] == [gone, kept]
        assert got["items"][0]["text"] == {"forgotten_at": forgot_at}
        assert got["items"][0]["ledger_ref"] == next(
            i["ledger_ref"] for i in live_then["items"] if i["id"] == gone
        )
        assert got["items"][1]["trust"] == "unverified"
        assert got["missing"] == [] and got["filtered"] == []
        fetched = await view.call("memory_fetch", {"query": "pin code quokka4711"})
        assert fetched["hits"] == []
        explored = await view.call("memory_explore", {"facet": "kind"})
        assert explored["buckets"] == [{"value": "fact", "count": 1}]
        recalled = await view.call("memory_recall", {"question": "pin code or dark mode?"})
        assert [c["id"] for c in recalled["citations"]] == [kept]
        # A word no id, hash or time can hold: "4711" alone turned up in a hex hash.
        assert "quokka" not in json.dumps([listed, got, fetched, explored, recalled])

        after_trust = (await memory.as_of(promoted)).tools()
        got = await after_trust.call("memory_get", {"ids": [kept]})
        assert got["items"][0]["trust"] == "verified"

        now = (await memory.as_of(await size_of(memory))).tools()
        got = await now.call("memory_get", {"ids": [gone, kept]})
        assert got["missing"] == [gone]  # forgotten by then: gone, as the live memory says
        assert await now.call("memory_list", {}) == await tools.call("memory_list", {})


async def test_a_view_built_before_a_forget_is_dropped_with_its_copy(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "data", embedder=None) as memory:
        tools = memory.tools()
        gone = (await tools.call("memory_store", {"learning": {"text": "salary is 91k"}}))["id"]
        point = await size_of(memory)
        view = (await memory.as_of(point)).tools()
        got = await view.call("memory_get", {"ids": [gone]})
        assert got["items"][0]["text"] == "salary is 91k"  # not yet forgotten
        (built,) = memory._views._views.values()
        copy = built.log.folder
        assert copy.is_dir()

        await tools.call("memory_forget", {"ids": [gone]})
        got = await view.call("memory_get", {"ids": [gone]})
        assert set(got["items"][0]["text"]) == {"forgotten_at"}
        assert not copy.exists()  # the copy that held the text is removed
        assert memory._views.cold_builds == 2


async def test_warm_views_are_cached_and_the_least_recently_used_goes(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "data", embedder=None) as memory:
        tools = memory.tools()
        sizes = []
        for n in range(6):
            await tools.call("memory_store", {"learning": {"text": f"fact number {n} in a row"}})
            sizes.append(await size_of(memory))
        views = memory._views
        small = (await memory.as_of(sizes[1])).tools()
        first = await small.call("memory_list", {"limit": 50})
        again = await small.call("memory_list", {"limit": 50})
        assert first == again and views.cold_builds == 1 and len(first["items"]) == 2
        for size in sizes[2:]:
            await (await memory.as_of(size)).tools().call("memory_list", {"limit": 50})
        assert views.sizes() == sizes[2:]  # four kept; the oldest closed, its folder gone
        assert len(views.folders()) == 4 and all(f.is_dir() for f in views.folders())
        await views.clear()
        assert views.sizes() == [] and views.folders() == []


async def test_points_by_time_and_by_run_step(tmp_path: Path, store_url: str | None) -> None:
    times = iter(datetime(2026, 5, 1, 12, 0, tzinfo=UTC) + timedelta(minutes=m) for m in range(99))
    async with memseal.open(
        tmp_path / "data", store=store_url, embedder=None, clock=lambda: next(times)
    ) as memory:
        run = memory.tools(run_id="r1")
        await run.call("memory_store", {"learning": {"text": "first note"}})
        before_read = await size_of(memory)
        await run.call("memory_fetch", {"query": "note"})
        await run.call("memory_store", {"learning": {"text": "second note"}})
        read_step = (await memory.as_of(run="r1", step=1)).size
        assert read_step == before_read  # the tree size the read saw
        write_step = (await memory.as_of(run="r1", step=2)).size
        assert write_step == before_read + 1  # before the write's own entries
        listed = await (await memory.as_of(run="r1", step=2)).tools().call("memory_list", {})
        assert [i["text"] for i in listed["items"]] == ["first note"]

        entries = [e async for e in memory.ledger.store.scan(0, await size_of(memory))]
        third = entries[3].entry().at
        assert (await memory.as_of(at=third)).size == 4
        assert (await memory.as_of(at="2026-05-01T11:00:00Z")).size == 0
        paris = timezone(timedelta(hours=2))
        first = datetime.fromisoformat(entries[0].entry().at).astimezone(paris)
        assert (await memory.as_of(at=first.isoformat())).size == 1
        assert (await memory.as_of(at="2099-01-01T00:00:00Z")).size == await size_of(memory)


@pytest.mark.parametrize(
    ("point", "field"),
    [
        ({"size": -1}, "`size`"),
        ({"size": 10_000}, "`size`"),
        ({"size": True}, "`size`"),
        ({"size": "3"}, "`size`"),
        ({"at": "yesterday"}, "`at`"),
        ({"at": "2026-05-01T12:00:00"}, "`at`"),  # no zone
        ({"at": 12}, "`at`"),
        ({"run": "nope", "step": 0}, "`run`"),
        ({"run": "r1", "step": 99}, "`step`"),
        ({"run": "r1", "step": -1}, "`step`"),
        ({"run": "r1"}, "`step`"),
        ({"size": 1, "at": "2026-05-01T12:00:00Z"}, "`size`, `at`"),
        ({}, "name a point"),
    ],
)
async def test_a_bad_point_is_refused_naming_the_field(
    tmp_path: Path, point: dict[str, Any], field: str
) -> None:
    async with memseal.open(tmp_path / "data", embedder=None) as memory:
        await memory.tools(run_id="r1").call("memory_store", {"learning": {"text": "a note"}})
        before = await size_of(memory)
        with pytest.raises(InvalidRequest, match=field):
            await memory.as_of(**point)
        assert await size_of(memory) == before  # nothing written


async def test_a_view_refuses_writes_and_offers_only_reads(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "data", embedder=None) as memory:
        tools = memory.tools()
        await tools.call("memory_store", {"learning": {"text": "a note"}})
        size = await size_of(memory)
        view = (await memory.as_of(size)).tools(ToolScope.placed_at("team:a"))
        assert set(view.names()) == READS
        for name, args in (
            ("memory_store", {"learning": {"text": "rewrite history"}}),
            ("memory_forget", {"ids": ["0" * 32]}),
        ):
            with pytest.raises(Unsupported, match=f"{name}: .*read-only view"):
                await view.call(name, args)
        assert await size_of(memory) == size
        # The point is the host's: no tool schema, live or past, has it.
        for specs in (tools.specs(), view.specs()):
            assert "as_of" not in json.dumps([s.parameters for s in specs])


async def test_the_marker_respects_the_reach_and_the_trust_floor(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "data", embedder=None) as memory:
        a = memory.tools(ToolScope.placed_at("team:a"))
        b = memory.tools(ToolScope.placed_at("team:b"))
        mine = (await a.call("memory_store", {"learning": {"text": "a's secret"}}))["id"]
        theirs = (await b.call("memory_store", {"learning": {"text": "b's secret"}}))["id"]
        await memory.engine.mark_stale(mine, actor="host", reason="old")
        point = await size_of(memory)
        await memory.engine.forget(ids=[mine, theirs])
        view = (await memory.as_of(point)).tools(ToolScope.placed_at("team:a", floor="stale"))
        got = await view.call("memory_get", {"ids": [mine, theirs]})
        assert got == {"items": [], "missing": [theirs], "filtered": [mine]}  # stale < floor
        got = await view.call("memory_get", {"ids": [mine, theirs], "min_trust": "stale"})
        assert [i["id"] for i in got["items"]] == [mine] and got["missing"] == [theirs]
        assert got["items"][0]["trust"] == "stale"
        wide = (await memory.as_of(point)).tools(ToolScope(reach=Reach.subtree("team:b")))
        got = await wide.call("memory_get", {"ids": [mine, theirs]})
        assert [i["id"] for i in got["items"]] == [theirs] and got["missing"] == [mine]


class CountingEmbedder:
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.texts = 0

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.inner.embed(texts)


async def test_a_view_takes_the_live_vectors_and_ranks_as_the_live_memory(
    tmp_path: Path, store_url: str | None
) -> None:
    embedder = CountingEmbedder()
    async with memseal.open(tmp_path / "data", store=store_url, embedder=embedder) as memory:
        tools = memory.tools()
        for text in ("tea in the morning", "coffee after lunch", "green tea", "jazz on friday"):
            await tools.call("memory_store", {"learning": {"text": text}})
        size = await size_of(memory)
        asked = {"query": "tea", "mode": "semantic"}
        live = await tools.call("memory_fetch", asked)
        before = embedder.texts
        past = await (await memory.as_of(size)).tools().call("memory_fetch", asked)
        assert past == live and len(past["hits"]) == 4
        assert embedder.texts == before + 1  # the query alone: no stored text embedded again


async def test_a_forget_committed_during_the_build_is_caught_and_the_view_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with memseal.open(tmp_path / "data", embedder=None) as memory:
        tools = memory.tools()
        gone = (await tools.call("memory_store", {"learning": {"text": "ssn 078-05"}}))["id"]
        point = await size_of(memory)
        fill = ViewLog.fill
        raced: list[int] = []

        async def fill_then_forget(log: ViewLog, *args: Any, **kwargs: Any) -> None:
            await fill(log, *args, **kwargs)  # the text is in the view, then the forget lands
            if not raced:
                raced.append((await memory.engine.forget(ids=[gone])).seqs[0])

        monkeypatch.setattr(ViewLog, "fill", fill_then_forget)
        got = await (await memory.as_of(point)).tools().call("memory_get", {"ids": [gone]})
        assert got["items"][0]["text"] == {"forgotten_at": raced[0]}
        assert memory._views.cold_builds == 2  # the first build held the text: dropped


async def test_a_view_pages_every_mode_as_the_live_memory_does(tmp_path: Path) -> None:
    # The view's store holds no log; its log size (what pins a cursor and hybrid's prefix)
    # must still read the view's size, or hybrid finds nothing and page two is empty.
    async with memseal.open(tmp_path / "data", embedder=HashingEmbedder()) as memory:
        tools = memory.tools()
        for i in range(30):
            await tools.call("memory_store", {"learning": {"text": f"tea note {i} green"}})
        size = await size_of(memory)
        past = (await memory.as_of(size)).tools()
        for mode in ("hybrid", "exact", "semantic"):
            asked = {"query": "green tea", "mode": mode, "limit": 5}
            pages = []
            for view in (tools, past):
                first = await view.call("memory_fetch", asked)
                second = await view.call("memory_fetch", {**asked, "cursor": first["next_cursor"]})
                pages.append([[h["id"] for h in p["hits"]] for p in (first, second)])
            assert pages[0] == pages[1] and all(len(p) == 5 for p in pages[1]), mode
