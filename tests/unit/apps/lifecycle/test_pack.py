"""Holistic recall: merge, dedupe, supersede, rank, and a budget that always holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.apps.lifecycle import (
    PRE_TURN,
    ContextPack,
    MemoryLayout,
    PackItem,
    PackPreset,
    SectionSpec,
    count_tokens,
    fit,
    holistic_recall,
)
from memseal.apps.lifecycle._question import expand
from memseal.apps.lifecycle.pack import ASIDE_TITLE
from memseal.engine import Engine, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.tools import MemoryTools

LAYOUT = MemoryLayout(tenant="acme")


def _item(n: int, text: str, kind: str = "fact", seq: int | None = None) -> PackItem:
    return PackItem(
        id=f"{n:032x}",
        kind=kind,
        text=text,
        trust="unverified",
        observed_at="2026-12-01T00:00:00.000000Z",
        ledger_ref=n if seq is None else seq,
        as_of=n if seq is None else seq,
    )


SPECS = (
    SectionSpec(reach="thread", title="Thread", weight=2),
    SectionSpec(reach="own", title="Own"),
    SectionSpec(reach="brain", title="Brain", weight=0.5),
)
texts = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=300)


@given(
    found=st.lists(st.lists(texts, max_size=8), min_size=3, max_size=3),
    budget=st.integers(min_value=0, max_value=400),
)
def test_no_pack_is_ever_over_its_budget(found: list[list[str]], budget: int) -> None:
    numbered = iter(range(1, 10_000))
    items = [[_item(next(numbered), text) for text in section] for section in found]
    pack = fit("Memory", SPECS, items, budget)
    assert pack.tokens == count_tokens(pack.markdown()) <= budget
    # The JSON form says the same.
    again = msgspec.json.decode(pack.to_json(), type=ContextPack)
    assert again == pack
    cited = pack.ids
    assert len(cited) == len(set(cited))
    assert pack.dropped + len(cited) + len(pack.superseded) <= sum(map(len, items))


def test_duplicates_are_merged_and_the_best_placed_section_keeps_them() -> None:
    same = _item(1, "The deploy runs on Tuesdays")
    twin = _item(2, "the deploy  runs on tuesdays")
    pack = fit("Memory", SPECS, [[same], [same, twin], []], 1_000)
    assert [s.title for s in pack.sections] == ["Thread"]
    assert pack.ids == (same.id,)
    text = pack.markdown()
    assert f"[{same.id}]" in text and "unverified" in text


def _turn(n: int, said: str) -> PackItem:
    return _item(n, f"user: {said}\nassistant: Okay.", kind="conversation")


def _summary(text: str, through: int, n: int = 0xF) -> PackItem:
    return PackItem(
        id=f"{n:x}" * 32,
        kind="context_summary",
        text=text,
        trust="unverified",
        observed_at="",
        ledger_ref=through + 100,
        as_of=through,
    )


def test_a_newer_item_about_the_same_subject_replaces_the_older() -> None:
    old = _turn(1, "My favourite editor is vim.")
    asked = _turn(2, "Which editor is my favourite?")
    new = _turn(3, "Since March my favourite editor is helix.")
    other = _item(4, "The deploy pipeline runs on Tuesdays", kind="fact")
    pack = fit("Memory", SPECS, [[old, asked, new], [other], []], 1_000)
    assert pack.superseded == (old.id,)
    assert old.id not in pack.ids and "vim" not in pack.markdown()
    # The question replaces nothing; the unrelated fact stays.
    assert {new.id, asked.id, other.id} <= set(pack.ids)
    # Whatever order the reach returned them in, the current one comes first.
    pack = fit("Memory", SPECS, [[old, new], [], []], 1_000)
    assert pack.ids == (new.id,)


def test_no_list_of_phrasings_decides_what_replaces_what() -> None:
    # "moving a website" is no move of house: nothing about the same subject.
    home = _turn(1, "I live in Berlin.")
    site = _turn(2, "I am moving our website to another host.")
    pack = fit("Memory", SPECS, [[home, site], [], []], 1_000)
    assert pack.superseded == () and set(pack.ids) == {home.id, site.id}


def test_another_persons_fact_or_a_hypothetical_replaces_nothing_of_the_users() -> None:
    mine = _turn(1, "My favourite editor is vim.")
    brothers = _turn(2, "My brother Tomas says his favourite editor is helix.")
    supposed = _turn(3, "If I switched, my favourite editor would be emacs.")
    pack = fit("Memory", SPECS, [[mine, brothers, supposed], [], []], 1_000)
    assert pack.superseded == ()


def test_a_reads_own_mark_is_shown_and_the_marked_item_kept() -> None:
    # A semantic read marked "live in Berlin" replaced by "relocated to Lisbon"; the pack
    # shows the mark but judges only what it can read itself (a false mark would hide
    # the answer: see docs/lifecycle.md), so both stay, current first as the read put them.
    new = _turn(2, "We relocated to Lisbon.")
    old = msgspec.structs.replace(_turn(1, "I live in Berlin."), superseded_by=new.id)
    pack = fit("Memory", SPECS, [[new, old], [], []], 1_000, query="Where do I live now?")
    assert pack.superseded == () and pack.ids == (new.id, old.id)
    assert f"(conversation; unverified; replaced by {new.id}) user: I live in Berlin." in (
        pack.markdown()
    )
    # Its newer item not in the pack: the older one is shown, marked.
    pack = fit("Memory", SPECS, [[old], [], []], 1_000)
    assert f"replaced by {new.id}" in pack.markdown()
    # The JSON carries the marks only when set.
    encoded = [msgspec.json.decode(msgspec.json.encode(i)) for i in (new, old)]
    assert "superseded_by" not in encoded[0] and encoded[1]["superseded_by"] == new.id
    assert not {"hypothetical", "subject"} & (encoded[0].keys() | encoded[1].keys())


def test_a_summary_line_a_newer_turn_changed_is_shown_changed() -> None:
    summary = _summary(
        "- [#1 2026-02-01] My favourite editor is vim.\n- [#2 2026-02-01] My dog is called Rex.",
        2,
    )
    new = _turn(5, "My favourite editor is helix now.")
    pack = fit("Memory", SPECS, [[summary, new], [], []], 1_000)
    shown = pack.markdown()
    assert "vim" not in shown and "Rex" in shown and "helix" in shown
    assert f"[#1 2026-02-01] (changed later: see {new.id})" in shown
    # The summary never outranks the turn that changed it: on a budget for one, the turn.
    small = fit("Memory", SPECS, [[summary, new], [], []], count_tokens(pack.markdown()) - 30)
    assert small.ids == (new.id,)
    # A summary line is weighed at its turn's time: a line newer than a turn replaces it.
    older = _turn(1, "My favourite editor is vim.")
    later = _summary("- [#7 2026-03-01] My favourite editor is helix.", 7)
    pack = fit("Memory", SPECS, [[later, older], [], []], 1_000)
    assert pack.superseded == (older.id,) and pack.ids == (later.id,)


def test_a_summary_line_is_its_turn_when_the_turn_is_in_the_pack() -> None:
    old = _turn(3, "My favourite editor is vim.")
    new = _turn(9, "Since March my favourite editor is helix.")
    summary = _summary("- [#3 2026-02-01] My favourite editor is vim.", 3)
    pack = fit("Memory", SPECS, [[summary, old, new], [], []], 1_000)
    assert pack.superseded == (old.id,)
    assert "vim" not in pack.markdown()
    assert f"- [#3 2026-02-01] (changed later: see {new.id})" in pack.markdown()


def test_an_older_summarys_lines_are_weighed_at_its_through() -> None:
    summary = _summary("- My favourite editor is vim.\n- My dog is called Rex.", 2)
    new = _turn(5, "My favourite editor is helix now.")
    shown = fit("Memory", SPECS, [[summary, new], [], []], 1_000).markdown()
    assert "vim" not in shown and "Rex" in shown


def test_hypotheticals_and_others_facts_are_marked_and_come_after() -> None:
    supposed = msgspec.structs.replace(
        _turn(1, "If I ever worked abroad, I would live in Tokyo."), hypothetical=True
    )
    tomas = msgspec.structs.replace(_turn(2, "My brother Tomas lives in Oslo."), subject="Tomas")
    friend = msgspec.structs.replace(_turn(3, "She lives in Rome."), subject="someone")
    mine = _turn(4, "I live in Porto.")
    found = [[supposed, tomas, friend, mine], [], []]
    pack = fit("Memory", SPECS, found, 1_000, query="Where do I live?")
    assert pack.ids == (mine.id, supposed.id, tomas.id, friend.id)
    shown = pack.markdown()
    assert "(conversation; unverified; hypothetical)" in shown
    assert "(conversation; unverified; about Tomas)" in shown
    assert "(conversation; unverified; about someone else)" in shown
    # Asked about someone else, their facts keep their place.
    pack = fit("Memory", SPECS, found, 1_000, query="Where does my brother Tomas live?")
    assert pack.ids[:2] == (tomas.id, friend.id)


def test_asides_follow_every_sections_answers_in_a_section_of_their_own() -> None:
    # A supposition found first by the search still follows the other sections' items:
    # it answers nothing about the user, whichever section it came from.
    supposed = msgspec.structs.replace(
        _turn(1, "If we bought a sailboat we would moor it in Kiel."), hypothetical=True
    )
    ours = _turn(2, "We keep our canoe at the rowing club.")
    learned = _item(9, "The user paddles on Saturdays.")
    pack = fit(
        "Memory", SPECS, [[supposed, ours], [learned], []], 1_000, query="What boat do I have?"
    )
    assert pack.ids == (ours.id, learned.id, supposed.id)
    assert [s.title for s in pack.sections] == ["Thread", "Own", "Thread" + ASIDE_TITLE]


def test_a_question_or_an_aside_takes_no_place_from_its_sections_next_item() -> None:
    # The search's first hits are a logged question and someone else's fact: the first
    # statement of the user's still outranks another section's first item.
    asked = _turn(1, "Which bus goes to the climbing gym?")
    theirs = msgspec.structs.replace(_turn(2, "Odile's gym moved to the docks."), subject="Odile")
    mine = _turn(3, "I climb at the gym by the old tannery.")
    learned = _item(9, "The user likes espresso.")
    specs = (
        SectionSpec(reach="thread", title="Thread", weight=2),
        SectionSpec(reach="own", title="Own", weight=1.9),
    )
    pack = fit(
        "Memory", specs, [[asked, theirs, mine], [learned]], 1_000, query="Where do I climb?"
    )
    assert pack.ids[0] == mine.id and pack.ids.index(learned.id) > pack.ids.index(mine.id)


def test_a_question_about_a_subject_also_searches_the_words_that_state_it() -> None:
    assert "moved" in expand("Where do I live now?")
    assert "joined" in expand("Who is my employer?")
    assert expand("What is the deploy day?") == "What is the deploy day?"


class _Recorded:
    """Real tools over a real engine, called as a run calls them (the key is noted)."""

    def __init__(self, tools: MemoryTools) -> None:
        self.tools = tools
        self.keys: list[str | None] = []

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Any:
        self.keys.append(key)
        return await self.tools.call(name, dict(arguments or {}))


async def test_holistic_recall_reads_each_reach_through_its_own_scope(engine: Engine) -> None:
    await engine.store(
        {"learning": {"text": "Ana prefers short answers"}}, namespace=LAYOUT.agent("w")
    )
    await engine.store({"learning": {"text": "Team deploys on Tuesdays"}}, namespace=LAYOUT.team)
    await engine.store(
        {"document": {"text": "Deploy checklist: run the tests before deploys"}},
        namespace=LAYOUT.brain_source("handbook"),
    )
    await engine.store(
        {"learning": {"text": "Other agent's secret about deploys"}}, namespace=LAYOUT.agent("x")
    )
    await engine.store(
        {"conversation": {"turns": [{"role": "user", "text": "when do we deploy?"}]}},
        namespace=LAYOUT.thread("w", "t1"),
    )
    node = LAYOUT.agent("w")
    readers = {
        "own": _Recorded(MemoryTools(engine, LAYOUT.reader(node, Reach.exact(node)))),
        "team": _Recorded(
            MemoryTools(engine, LAYOUT.reader(LAYOUT.team, Reach.exact(LAYOUT.team)))
        ),
        "brain": _Recorded(MemoryTools(engine, LAYOUT.brain_reader())),
        "thread": _Recorded(MemoryTools(engine, LAYOUT.thread_writer("w", "t1"))),
    }
    pack = await holistic_recall(readers, PRE_TURN, query="deploy answers", key="pre/0")
    text = pack.markdown()
    assert "Tuesdays" in text and "checklist" in text and "when do we deploy" in text
    assert "short answers" in text
    assert all(i.subject is None and not i.hypothetical for s in pack.sections for i in s.items)
    assert "secret" not in text  # a sibling agent is in no reach the host gave
    assert {s.reach for s in pack.sections} == {"own", "team", "brain", "thread"}
    assert readers["thread"].keys[0] == "pre/0/0"
    assert pack.tokens <= PRE_TURN.budget_tokens
    small = await holistic_recall(readers, PRE_TURN, query="deploy", budget_tokens=40)
    assert small.tokens == count_tokens(small.markdown()) <= 40
    with pytest.raises(InvalidRequest, match="reads `thread`, not given"):
        await holistic_recall({"own": readers["own"]}, PRE_TURN.with_budget(10), query="x")


SECTION = SectionSpec(reach="own", title="x")


def test_bad_presets_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="`reach`"):
        SectionSpec(reach="elsewhere", title="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="`limit`"):
        SectionSpec(reach="own", title="x", limit=0)
    with pytest.raises(InvalidRequest, match="`kinds`"):
        SectionSpec(reach="own", title="x", kinds=("memo",))
    with pytest.raises(InvalidRequest, match="`budget_tokens`"):
        PackPreset(
            name="p", title="t", sections=(SectionSpec(reach="own", title="x"),), budget_tokens=-1
        )
