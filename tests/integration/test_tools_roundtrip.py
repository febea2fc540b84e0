"""Every tool round-trips against a real engine on each store, and so does the two-phase API.

Stored through memory_store, read back through every read tool, forgotten
through memory_forget; the trust floor, cursors, refers_to, the metadata a
tool builds, and a recorder-style transaction holding a tool's own write
together with an entry of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from clock import Clock

from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder, Learning, Reach
from memseal.ledger.entry import make_draft
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.store import WriteTxn
from memseal.tools import MemoryTools, ToolScope, cited_ids

PLACE = "team:acme/agent:writer"
SIBLING = "team:acme/agent:reader"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def engine(tmp_path: Path, clock: Clock, store_url: str | None) -> AsyncIterator[Engine]:
    """On the folder's SQLite file, and on PostgreSQL when the test server is there."""
    async with open_engine(
        tmp_path / "data",
        create=True,
        clock=clock,
        embedder=HashingEmbedder(dim=64),
        store=store_url,
    ) as opened:
        yield opened


@pytest.fixture
def tools(engine: Engine) -> MemoryTools:
    return MemoryTools(engine, ToolScope.placed_at(PLACE))


async def _store(tools: MemoryTools, text: str, **extra: Any) -> str:
    result = await tools.call("memory_store", {"learning": {"text": text, **extra}})
    assert result["replayed"] is False
    return str(result["id"])


async def test_store_builds_the_metadata_and_lands_at_the_place(
    engine: Engine, tools: MemoryTools, clock: Clock
) -> None:
    before = clock.now
    stored = await tools.call(
        "memory_store",
        {
            "learning": {
                "text": "The user prefers dark mode",
                "learning_kind": "decision",
                "confidence": 0.9,
                "evidence": "said so",
            },
            "tags": ["ui", "ui", "pref"],
        },
    )
    assert set(stored) == {"id", "replayed"} and stored["replayed"] is False
    (item,) = (await engine.get([stored["id"]])).items
    assert item.namespace == PLACE
    assert item.meta.source is not None and item.meta.source.kind == "agent"
    assert item.tags == ("ui", "pref") and item.kind == "decision"
    assert (item.confidence, item.evidence, item.trust) == (0.9, "said so", "unverified")
    assert before.isoformat()[:19] <= item.observed_at[:19] <= clock.now.isoformat()[:19]
    # The same memory again is a replay, not a duplicate; nothing is appended.
    size = await engine.ledger.size()
    again = await tools.call(
        "memory_store",
        '{"learning": {"text": "The user prefers dark mode", "learning_kind": "decision", '
        '"confidence": 0.9, "evidence": "said so"}, "tags": ["ui", "ui", "pref"]}',
    )
    assert again == {"id": stored["id"], "replayed": True}
    assert await engine.ledger.size() == size
    # Documents and conversations too.
    doc = await tools.call(
        "memory_store", {"document": {"title": "Runbook", "text": "Deploys run on Tuesdays."}}
    )
    talk = await tools.call(
        "memory_store",
        {
            "conversation": {
                "turns": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}]
            }
        },
    )
    got = await tools.call("memory_get", {"ids": [doc["id"], talk["id"]]})
    assert [i["kind"] for i in got["items"]] == ["document", "conversation"]
    assert got["items"][0]["title"] == "Runbook"
    assert "user: hi" in got["items"][1]["text"]


async def test_every_read_tool_round_trips(engine: Engine, tools: MemoryTools) -> None:
    dark = await _store(tools, "The user prefers dark mode in every editor")
    deploy = await _store(
        tools, "Deploys run on Tuesdays after the standup", learning_kind="lesson"
    )
    team = (
        await engine.store(
            Learning(text="The team uses dark themes for dashboards"),
            namespace="team:acme",
            tags=["ui"],
        )
    ).id
    sibling = (
        await engine.store(Learning(text="dark secret of the sibling"), namespace=SIBLING)
    ).id

    for mode in ("exact", "semantic", "hybrid"):
        fetched = await tools.call("memory_fetch", {"query": "dark mode", "mode": mode})
        assert (fetched["mode"], fetched["min_trust"]) == (mode, "unverified")
        ids = [h["id"] for h in fetched["hits"]]
        assert dark in ids and sibling not in ids
        for hit in fetched["hits"]:
            assert set(hit) >= {"id", "kind", "text", "score", "trust", "ledger_ref", "meta"}
            assert hit["score"] == round(hit["score"], 4)
            entry = (await engine.ledger.read(hit["ledger_ref"])).entry()
            assert entry.kind == "memory_stored"
    assert (await tools.call("memory_fetch", {"query": "dark"}))["mode"] == "hybrid"

    listed = await tools.call("memory_list", {"limit": 50})
    assert [i["id"] for i in listed["items"]] == [team, deploy, dark]
    assert "next_cursor" not in listed

    got = await tools.call("memory_get", {"ids": [deploy, sibling, "unknown-id", dark]})
    assert [i["id"] for i in got["items"]] == [deploy, dark]
    assert got["missing"] == [sibling, "unknown-id"] and got["filtered"] == []

    explored = await tools.call("memory_explore", {"facet": "kind"})
    assert explored == {
        "facet": "kind",
        "buckets": [{"value": "fact", "count": 2}, {"value": "lesson", "count": 1}],
        "total": 3,
        "missing": 0,
        "more_buckets": False,
        "truncated": False,
    }
    by_tag = await tools.call("memory_explore", {"facet": "tag", "limit": 1})
    assert (by_tag["total"], by_tag["missing"], by_tag["buckets"]) == (
        3,
        2,
        [{"value": "ui", "count": 1}],
    )

    recalled = await tools.call("memory_recall", {"question": "Which mode does the user prefer?"})
    cited = [c["id"] for c in recalled["citations"]]
    assert dark in cited and sibling not in cited
    assert "[1]" in recalled["answer"]
    lessons = await tools.call(
        "memory_recall", {"question": "when are deploys?", "filter": {"kinds": ["lesson"]}}
    )
    assert [c["id"] for c in lessons["citations"]] == [deploy]


async def test_cursors_page_through_fetch_and_list(tools: MemoryTools) -> None:
    ids = [await _store(tools, f"note number {i} about paging") for i in range(7)]
    seen: list[str] = []
    arguments: dict[str, Any] = {"limit": 3}
    while True:
        page = await tools.call("memory_list", arguments)
        seen.extend(i["id"] for i in page["items"])
        if "next_cursor" not in page:
            break
        arguments = {"limit": 3, "cursor": page["next_cursor"]}
    assert seen == ids[::-1]
    hits: list[str] = []
    arguments = {"query": "paging note", "limit": 2, "mode": "exact"}
    while True:
        fetched = await tools.call("memory_fetch", arguments)
        hits.extend(h["id"] for h in fetched["hits"])
        if "next_cursor" not in fetched:
            break
        arguments = {**arguments, "cursor": fetched["next_cursor"]}
    assert sorted(hits) == sorted(ids) and len(hits) == 7
    first = await tools.call("memory_fetch", {"query": "paging note", "limit": 2})
    with pytest.raises(InvalidRequest, match="memory_fetch: `cursor` belongs to another request"):
        await tools.call("memory_fetch", {"query": "other", "cursor": first["next_cursor"]})


async def test_min_trust_floor_default_and_rejected(engine: Engine) -> None:
    open_tools = MemoryTools(engine, ToolScope.placed_at(PLACE, floor="stale"))
    plain = await _store(open_tools, "dark mode is preferred, unverified")
    checked = await _store(open_tools, "dark mode is preferred, verified by a human")
    old = await _store(open_tools, "dark mode was preferred once, now stale")
    bad = await _store(open_tools, "dark mode is hated, rejected")
    await engine.promote(checked, actor="reviewer", reason="confirmed")
    await engine.mark_stale(old, actor="reviewer", reason="old")
    await engine.reject(bad, actor="reviewer", reason="wrong")

    ids = {h["id"] for h in (await open_tools.call("memory_fetch", {"query": "dark mode"}))["hits"]}
    assert ids == {plain, checked}
    stale_too = await open_tools.call("memory_fetch", {"query": "dark mode", "min_trust": "stale"})
    assert {h["id"] for h in stale_too["hits"]} == {plain, checked, old}
    assert stale_too["min_trust"] == "stale"
    got = await open_tools.call("memory_get", {"ids": [plain, checked, old, bad]})
    assert [i["id"] for i in got["items"]] == [plain, checked]
    assert got["filtered"] == [old, bad] and got["missing"] == []
    got_stale = await open_tools.call("memory_get", {"ids": [bad, old], "min_trust": "stale"})
    assert [i["id"] for i in got_stale["items"]] == [old]  # rejected is never surfaced

    # A Truss-like host: floor unverified, default verified.
    truss = MemoryTools(
        engine, ToolScope.placed_at(PLACE, floor="unverified", default_trust="verified")
    )
    fetched = await truss.call("memory_fetch", {"query": "dark mode", "limit": 1})
    # Applied before ranking: the one verified memory is the first page, not filtered out of it.
    assert [h["id"] for h in fetched["hits"]] == [checked] and fetched["min_trust"] == "verified"
    assert [h["trust"] for h in fetched["hits"]] == ["verified"]
    wider = await truss.call("memory_list", {"min_trust": "unverified"})
    assert {i["id"] for i in wider["items"]} == {plain, checked}
    with pytest.raises(
        InvalidRequest, match="memory_list: `min_trust` `stale` is below the lowest"
    ):
        await truss.call("memory_list", {"min_trust": "stale"})
    explored = await truss.call("memory_explore", {"facet": "kind"})
    assert explored["total"] == 1
    recalled = await truss.call("memory_recall", {"question": "dark mode?"})
    assert [c["id"] for c in recalled["citations"]] == [checked]


async def test_refers_to_reads_dates_in_the_host_zone(engine: Engine, clock: Clock) -> None:
    tools = MemoryTools(engine, ToolScope.placed_at(PLACE)).in_zone(ZoneInfo("America/New_York"))
    clock.now = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)  # still the 29th in New York
    sunday = await _store(tools, "the standup moved to the afternoon")
    clock.now = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
    tuesday = await _store(tools, "the standup moved to the morning")
    fetched = await tools.call(
        "memory_fetch",
        {"query": "standup moved", "refers_to": {"from": "2026-11-29", "to": "2026-11-29"}},
    )
    assert [h["id"] for h in fetched["hits"]] == [sunday, tuesday]  # ranked first, none dropped


async def test_forget_by_ids_and_by_filter_stays_in_reach(
    engine: Engine, tools: MemoryTools
) -> None:
    mine = await _store(tools, "forget me please")
    keep = await _store(tools, "keep me around")
    sibling = (await engine.store(Learning(text="forget me please"), namespace=SIBLING)).id
    result = await tools.call("memory_forget", {"ids": [mine, sibling, "nope"]})
    assert result == {"forgotten": [mine], "skipped": [sibling, "nope"]}
    left = await engine.get([mine, sibling, keep])
    assert [i.id for i in left.items] == [sibling, keep]
    assert (await engine._store.rows("SELECT count(*) FROM engine_scrub"))[0][0] == 0

    tagged = [
        (await tools.call("memory_store", {"learning": {"text": f"tagged {i}"}, "tags": ["tmp"]}))[
            "id"
        ]
        for i in range(3)
    ]
    other = (await engine.store(Learning(text="tagged far"), namespace=SIBLING, tags=["tmp"])).id
    by_filter = await tools.call("memory_forget", {"filter": {"tags_any": ["tmp"]}})
    assert sorted(by_filter["forgotten"]) == sorted(tagged) and by_filter["skipped"] == []
    assert [i.id for i in (await engine.get([other, *tagged])).items] == [other]


async def test_prepare_runs_reads_and_plans_writes(engine: Engine, tools: MemoryTools) -> None:
    stored = await tools.prepare("memory_store", {"learning": {"text": "two phase memory"}})
    assert (stored.name, stored.side_effects, stored.result) == ("memory_store", True, None)
    assert stored.arguments == {"learning": {"text": "two phase memory"}}
    assert stored.command is not None and stored.after is None
    size = await engine.ledger.size()
    assert size == 0  # validated and embedded, nothing written yet
    result = await engine.ledger.run(stored.command)
    assert result["replayed"] is False and stored.wrote == [0]
    assert stored.cites(result) == [result["id"]]

    read = await tools.prepare("memory_fetch", '{"query": "two phase"}')
    assert read.command is None and read.after is None and not read.side_effects
    assert read.result is not None and read.cites(read.result) == [result["id"]]
    assert read.arguments == {"query": "two phase"}

    again = await tools.prepare("memory_store", {"learning": {"text": "two phase memory"}})
    assert again.command is not None
    assert await engine.ledger.run(again.command) == {"id": result["id"], "replayed": True}
    assert again.wrote == []

    forget = await tools.prepare("memory_forget", {"ids": [result["id"]]})
    assert forget.command is not None and forget.after is not None
    done = await engine.ledger.run(forget.command)
    assert done == {"forgotten": [result["id"]], "skipped": []} and len(forget.wrote) == 1
    assert forget.cites(done) == [result["id"]]
    assert (await engine._store.rows("SELECT count(*) FROM engine_scrub"))[0][0] == 1
    await forget.after()
    assert (await engine._store.rows("SELECT count(*) FROM engine_scrub"))[0][0] == 0


async def test_a_recorder_holds_the_write_and_its_own_entry_in_one_transaction(
    engine: Engine, tools: MemoryTools
) -> None:
    prepared = await tools.prepare("memory_store", {"learning": {"text": "recorded write"}})
    assert prepared.command is not None
    command = prepared.command

    def recorded(txn: WriteTxn) -> tuple[dict[str, Any], int]:
        result = command(txn)
        body = {"tool": prepared.name, "wrote": list(prepared.wrote)}
        payload = {"arguments": prepared.arguments, "result": result}
        mentions = prepared.cites(result)
        appended = txn.append(make_draft("memory_tool_call", body, payload, mentions=mentions))
        return result, appended.seq

    result, seq = await engine.ledger.run(recorded)
    assert prepared.wrote == [seq - 1]
    assert await engine.ledger.mentioning(result["id"]) == [seq - 1, seq]

    failing = await tools.prepare("memory_store", {"learning": {"text": "never lands"}})
    assert failing.command is not None
    failing_command = failing.command

    def broken(txn: WriteTxn) -> None:
        failing_command(txn)
        raise RuntimeError("the recorder failed after the tool wrote")

    size = await engine.ledger.size()
    with pytest.raises(RuntimeError):
        await engine.ledger.run(broken)
    assert await engine.ledger.size() == size  # the tool's write went with it
    assert (await tools.call("memory_fetch", {"query": "never lands", "mode": "exact"}))[
        "hits"
    ] == []


def test_cited_ids_reads_any_result_shape() -> None:
    assert cited_ids("memory_recall", {"citations": [{"id": "a"}, {"id": "a"}, {"id": "b"}]}) == [
        "a",
        "b",
    ]
    assert cited_ids("memory_get", {"items": [{"id": "a"}], "missing": ["x"]}) == ["a"]
    assert cited_ids("memory_explore", {"facet": "tag"}) == []
    assert cited_ids("memory_store", {"id": "s", "replayed": True}) == ["s"]
    assert cited_ids("memory_forget", {"forgotten": ["f"], "skipped": ["g"]}) == ["f"]
    assert cited_ids("memory_fetch", {}) == []


async def test_reach_none_reads_everything(engine: Engine) -> None:
    root = MemoryTools(engine)
    a = (await engine.store(Learning(text="alpha"), namespace=PLACE)).id
    b = (await engine.store(Learning(text="beta"), namespace=SIBLING)).id
    assert {i["id"] for i in (await root.call("memory_list", {}))["items"]} == {a, b}
    team = root.placed_at("team:acme").reach(Reach.subtree("team:acme"))
    assert {i["id"] for i in (await team.call("memory_list", {}))["items"]} == {a, b}
    exact = root.placed_at(PLACE).reach(Reach.exact(PLACE))
    assert {i["id"] for i in (await exact.call("memory_list", {}))["items"]} == {a}
