"""Reads: list, get, fetch (exact / semantic / hybrid), filters, refers_to, explore, recall."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from memseal.engine import (
    FACETS,
    Citation,
    DateRange,
    Document,
    Engine,
    Filter,
    Hit,
    Learning,
    Meta,
    Reach,
    Recollection,
    Source,
)
from memseal.engine.explore import explore
from memseal.engine.recall import NO_ANSWER, ExtractiveAnswerer
from memseal.ledger.errors import InvalidRequest, Unsupported

PLACE = "team:acme/agent:writer"


async def _store(engine: Engine, *texts: str, namespace: str = PLACE, **extra: object) -> list[str]:
    ids = []
    for text in texts:
        ids.append((await engine.store(Learning(text=text), namespace=namespace, **extra)).id)  # type: ignore[arg-type]
    return ids


# -- list -------------------------------------------------------------------------------------


async def test_list_is_newest_first_and_pages_with_a_cursor(engine: Engine) -> None:
    await _store(engine, *(f"note {i}" for i in range(7)))
    first = await engine.list(limit=3)
    assert [i.text for i in first.items] == ["note 6", "note 5", "note 4"]
    assert first.next_cursor is not None
    second = await engine.list(limit=3, cursor=first.next_cursor)
    assert [i.text for i in second.items] == ["note 3", "note 2", "note 1"]
    third = await engine.list(limit=3, cursor=second.next_cursor)
    assert [i.text for i in third.items] == ["note 0"]
    assert third.next_cursor is None


async def test_a_list_cursor_is_stable_under_concurrent_writes_and_forgets(engine: Engine) -> None:
    ids = await _store(engine, *(f"note {i}" for i in range(6)))
    first = await engine.list(limit=2)
    await _store(engine, "written meanwhile 1", "written meanwhile 2")
    await engine.forget(ids=[ids[3]])  # "note 3", on the next page
    second = await engine.list(limit=2, cursor=first.next_cursor)
    assert [i.text for i in second.items] == ["note 2", "note 1"]
    rest = await engine.list(limit=50, cursor=second.next_cursor)
    assert [i.text for i in rest.items] == ["note 0"]


async def test_a_cursor_must_come_from_the_same_request(engine: Engine) -> None:
    await _store(engine, "a", "b", "c")
    page = await engine.list(limit=1)
    assert page.next_cursor is not None
    with pytest.raises(InvalidRequest, match="`cursor` belongs to another request"):
        await engine.list(limit=1, cursor=page.next_cursor, filter={"kinds": ["lesson"]})
    with pytest.raises(InvalidRequest, match="`cursor` belongs to another request"):
        await engine.fetch("a", cursor=page.next_cursor)
    for junk in ["", "!!", "eyJ4IjoxfQ", "WzEsImxpc3QiLCJ4IiwtMSwwXQ", "a" * 500, 7]:
        with pytest.raises(InvalidRequest, match="`cursor`"):
            await engine.list(cursor=junk)  # type: ignore[arg-type]


# -- get --------------------------------------------------------------------------------------


async def test_get_returns_asked_order_with_missing_and_filtered(engine: Engine) -> None:
    (mine,) = await _store(engine, "mine")
    (team,) = await _store(engine, "team", namespace="team:acme")
    (other,) = await _store(engine, "other", namespace="team:acme-corp")
    stale = (await engine.store(Learning(text="stale"), namespace=PLACE)).id
    await engine.mark_stale(stale, actor="host", reason="old")
    got = await engine.get([team, "unknown", other, mine, stale, mine], reach=Reach.of(PLACE))
    assert [i.text for i in got.items] == ["team", "mine"]
    assert got.missing == ("unknown", other)
    assert got.filtered == (stale,)
    assert [i.text for i in (await engine.get([stale], min_trust="stale")).items] == ["stale"]


# -- fetch ------------------------------------------------------------------------------------


async def test_exact_ranks_by_bm25_with_stemming(exact_engine: Engine) -> None:
    await _store(
        exact_engine,
        "The deploy pipeline runs on Tuesdays",
        "Deploying requires two approvals before the pipeline starts",
        "Lunch is at noon",
    )
    fetched = await exact_engine.fetch("deploying pipeline")
    assert fetched.mode == "exact" and fetched.min_trust == "unverified"
    # Both hold both stems; which of the two leads is the store's ranking detail (with three
    # items, SQLite's BM25 gives words in two of them no weight at all, and the tie goes to
    # the newer), so only the pair is asserted here (tests/contract/test_ranking.py has more).
    assert {h.item.text for h in fetched.hits[:2]} == {
        "Deploying requires two approvals before the pipeline starts",
        "The deploy pipeline runs on Tuesdays",
    }
    assert len(fetched.hits) == 2
    assert all(h.score == round(h.score, 4) for h in fetched.hits)
    assert (await exact_engine.fetch("lunch")).hits[0].item.text == "Lunch is at noon"
    # Stopwords do not count while other words are left; a question of stopwords alone
    # searches for them rather than for nothing.
    assert [h.item.text for h in (await exact_engine.fetch("the lunch")).hits] == [
        "Lunch is at noon"
    ]
    assert len((await exact_engine.fetch("the")).hits) == 2
    assert (await exact_engine.fetch("???")).hits == ()
    assert (await exact_engine.fetch('"pipeline" OR NEAR(x) *')).hits != ()  # syntax is text


async def test_an_engine_without_embedder_serves_exact_only(exact_engine: Engine) -> None:
    assert exact_engine.modes == ("exact",)
    assert exact_engine.embedder_id is None
    for mode in ("semantic", "hybrid"):
        with pytest.raises(Unsupported, match="exact search only"):
            await exact_engine.fetch("x", mode=mode)  # type: ignore[arg-type]


async def test_semantic_and_hybrid_rank_by_meaning_and_fusion(engine: Engine) -> None:
    assert engine.modes == ("exact", "semantic", "hybrid")
    await _store(engine, "darkmode everywhere", "quarterly revenue report", "tea or coffee")
    semantic = await engine.fetch("dark modes", mode="semantic")
    assert semantic.hits[0].item.text == "darkmode everywhere"
    assert -1.0 <= semantic.hits[-1].score <= semantic.hits[0].score <= 1.0
    hybrid = await engine.fetch("revenue")
    assert hybrid.mode == "hybrid"
    assert hybrid.hits[0].item.text == "quarterly revenue report"
    # 61 / (60 + rank) per ranking: first in both is 2.0; rounded to four places.
    assert hybrid.hits[0].score == 2.0
    assert all(h.score == round(h.score, 4) and 0 < h.score <= 2.0 for h in hybrid.hits)


async def test_fetch_pages_see_only_what_the_first_page_saw(engine: Engine) -> None:
    await _store(engine, *(f"apple pie number {i}" for i in range(5)))
    first = await engine.fetch("apple pie", mode="exact", limit=2)
    assert first.next_cursor is not None
    await _store(engine, "apple pie apple pie apple pie newest")
    seen = [h.item.text for h in first.hits]
    cursor: str | None = first.next_cursor
    while cursor is not None:
        page = await engine.fetch("apple pie", mode="exact", limit=2, cursor=cursor)
        seen += [h.item.text for h in page.hits]
        cursor = page.next_cursor
    assert sorted(seen) == [f"apple pie number {i}" for i in range(5)]


async def test_filters_confine_every_mode_before_ranking(engine: Engine) -> None:
    await engine.store(
        Learning(text="alpha fact", kind="fact"),
        namespace=PLACE,
        tags=["red"],
        meta=Meta(source=Source(kind="user"), workspace="w1", folder="src", repo="r1"),
        observed_at="2026-01-01T00:00:00Z",
    )
    await engine.store(
        Learning(text="alpha lesson", kind="lesson"),
        namespace=PLACE,
        tags=["blue"],
        meta=Meta(
            source=Source(kind="agent"),
            file_path="a.py",
            url="https://u",
            thread_id="t1",
            agent_id="bot",
        ),
        observed_at="2026-06-01T00:00:00Z",
    )
    cases: list[tuple[dict[str, object], set[str]]] = [
        ({"kinds": ["lesson"]}, {"alpha lesson"}),
        ({"sources": ["user"]}, {"alpha fact"}),
        ({"tags_any": ["blue", "green"]}, {"alpha lesson"}),
        ({"workspace": "w1"}, {"alpha fact"}),
        ({"folder": "src"}, {"alpha fact"}),
        ({"repo": "r1"}, {"alpha fact"}),
        ({"file_path": "a.py"}, {"alpha lesson"}),
        ({"url": "https://u"}, {"alpha lesson"}),
        ({"thread_id": "t1"}, {"alpha lesson"}),
        ({"agent_id": "bot"}, {"alpha lesson"}),
        ({"observed_after": "2026-03-01T00:00:00Z"}, {"alpha lesson"}),
        ({"observed_before": "2026-03-01T00:00:00+00:00"}, {"alpha fact"}),
        ({"kinds": ["fact"], "tags_any": ["blue"]}, set()),
    ]
    for raw, expected in cases:
        for mode in ("exact", "semantic", "hybrid"):
            hits = (await engine.fetch("alpha", mode=mode, filter=raw)).hits  # type: ignore[arg-type]
            assert {h.item.text for h in hits} == expected, (raw, mode)
        assert {i.text for i in (await engine.list(filter=Filter(**raw))).items} == expected  # type: ignore[arg-type]


async def test_refers_to_puts_items_about_those_days_first_and_drops_none(
    engine: Engine,
) -> None:
    monday = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    await engine.store(
        Learning(text="meeting notes about budget"), namespace=PLACE, observed_at=monday
    )
    await engine.store(
        Learning(text="budget review is on Tuesday"), namespace=PLACE, observed_at=monday
    )
    await engine.store(
        Learning(text="budget was approved on 2026-12-01"),
        namespace=PLACE,
        observed_at="2026-10-01T00:00:00Z",
    )
    plain = await engine.fetch("budget", mode="exact")
    assert len(plain.hits) == 3
    tuesday = DateRange(start="2026-12-01", end="2026-12-01")
    about = await engine.fetch("budget", mode="exact", refers_to=tuesday)
    assert {h.item.text for h in about.hits[:2]} == {
        "budget review is on Tuesday",
        "budget was approved on 2026-12-01",
    }
    assert about.hits[2].item.text == "meeting notes about budget"
    # Monday 23:30 UTC is already Tuesday in Tokyo: there the plain note is about Tuesday too.
    late = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    await engine.store(Learning(text="late budget thought"), namespace=PLACE, observed_at=late)
    tokyo = await engine.fetch(
        "budget",
        mode="exact",
        refers_to={"from": "2026-12-01", "to": "2026-12-01"},
        zone=ZoneInfo("Asia/Tokyo"),
    )
    assert "late budget thought" in {h.item.text for h in tokyo.hits[:3]}
    utc = await engine.fetch("budget", mode="exact", refers_to=tuesday)
    assert "late budget thought" not in {h.item.text for h in utc.hits[:2]}


# -- explore ----------------------------------------------------------------------------------


async def test_explore_counts_every_facet(engine: Engine) -> None:
    meta = Meta(
        source=Source(kind="agent", id="bot-1"),
        workspace="ws",
        folder="src",
        file_path="src/a.py",
        language="python",
        repo="acme/web",
        url="https://example.com",
        thread_id="th-1",
        agent_id="bot",
        tool_call="call-1",
    )
    await engine.store(Learning(text="one"), namespace=PLACE, tags=["x", "y"], meta=meta)
    await engine.store(Learning(text="two", kind="lesson"), namespace=PLACE, tags=["x"])
    await engine.store(Document(text="three"), namespace="team:acme")
    expected = {
        "kind": {"fact": 1, "lesson": 1, "document": 1},
        "source": {"agent": 1},
        "source_id": {"bot-1": 1},
        "workspace": {"ws": 1},
        "folder": {"src": 1},
        "file_path": {"src/a.py": 1},
        "language": {"python": 1},
        "repo": {"acme/web": 1},
        "url": {"https://example.com": 1},
        "thread": {"th-1": 1},
        "agent": {"bot": 1},
        "tool_call": {"call-1": 1},
        "tag": {"x": 2, "y": 1},
    }
    assert set(expected) == set(FACETS) and len(FACETS) == 13
    for facet, counts in expected.items():
        found = await engine.explore(facet)
        assert {b.value: b.count for b in found.buckets} == counts, facet
        assert found.total == 3
        assert found.missing == (0 if facet == "kind" else 3 - (2 if facet == "tag" else 1))
        assert not found.more_buckets and not found.truncated
    kinds = await engine.explore("kind", limit=2, reach=Reach.of(PLACE))
    assert [b.value for b in kinds.buckets] == ["document", "fact"]  # ties: by value
    assert kinds.total == 3 and len(kinds.buckets) == 2 and kinds.more_buckets
    with pytest.raises(InvalidRequest, match="`facet` is not a facet"):
        await engine.explore("namespace")


async def test_explore_says_when_it_counted_only_the_newest(engine: Engine) -> None:
    await _store(engine, "a", "b", "c")
    where = "i.trust_rank >= 1"
    capped = await engine._reader.run(lambda x: explore(x, "kind", where, [], limit=10, cap=2))
    assert capped.truncated and capped.total == 2
    full = await engine._reader.run(lambda x: explore(x, "kind", where, [], limit=10))
    assert not full.truncated and full.total == 3


# -- recall -----------------------------------------------------------------------------------


async def test_recall_extracts_cited_passages_deterministically(engine: Engine) -> None:
    await engine.store(
        Document(text="Deploys go out on Tuesday. Lunch is at noon. Rollbacks need approval."),
        namespace=PLACE,
    )
    await engine.store(Learning(text="The deploy freeze starts December 20."), namespace=PLACE)
    one = await engine.recall("when do deploys go out?", limit=2)
    two = await engine.recall("when do deploys go out?", limit=2)
    assert one == two
    assert one.answer.startswith("Deploys go out on Tuesday. [1]")
    assert "Lunch" not in one.answer
    assert [c.ref for c in one.citations] == list(range(1, len(one.citations) + 1))
    assert all(f"[{c.ref}]" in one.answer for c in one.citations)
    empty = await engine.recall("anything", filter={"kinds": ["goal"]})
    assert (empty.answer, empty.citations) == (NO_ANSWER, ())


async def test_the_extractive_answer_stays_within_its_budget() -> None:
    from memseal.engine import Item

    def hit(n: int, text: str) -> Hit:
        item = Item(
            id=f"id{n}",
            kind="fact",
            text=text,
            trust="unverified",
            namespace="",
            observed_at="2026-01-01T00:00:00.000000Z",
            seq=n,
            stored_at="x",
        )
        return Hit(item=item, score=1.0)

    hits = [hit(i, "word " * 60) for i in range(10)]
    answer = await ExtractiveAnswerer(budget=200).answer("word", hits)
    assert len(answer.answer) <= 200
    assert len(answer.citations) >= 1


class _Model:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, int]] = []

    async def answer(
        self, question: str, hits: Sequence[Hit], *, instructions: str | None
    ) -> Recollection:
        self.seen.append((question, instructions, len(hits)))
        cited = [Citation(ref=1, id=hits[0].item.id, kind="fact", text="x", score=1.0)]
        cited.append(Citation(ref=2, id="not-a-hit", kind="fact", text="y", score=1.0))
        return Recollection(answer="model says [1] [2]", citations=tuple(cited))


async def test_a_plugged_answerer_gets_instructions_and_cites_only_hits(engine: Engine) -> None:
    await _store(engine, "green tea in the morning")
    model = _Model()
    result = await engine.recall("tea?", instructions="answer in French", answerer=model)
    assert model.seen == [("tea?", "answer in French", 1)]
    assert result.answer == "model says [1] [2]"
    assert [c.id for c in result.citations] == [(await engine.list()).items[0].id]
