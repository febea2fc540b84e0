"""A pack's currency beyond one read: beliefs and their turns, asides, a long summary."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from memseal.apps.lifecycle import (
    MemoryLayout,
    PackItem,
    PackPreset,
    SectionSpec,
    fit,
    holistic_recall,
)
from memseal.apps.lifecycle._current import statement
from memseal.apps.lifecycle._job_records import SOURCE_TAG, tag
from memseal.apps.lifecycle.pack import ASIDE_TITLE, MAX_ITEM_CHARS
from memseal.engine import Engine, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.tools import MemoryTools

LAYOUT = MemoryLayout(tenant="acme")
SPECS = (
    SectionSpec(reach="thread", title="Thread", weight=2),
    SectionSpec(reach="own", title="Own"),
)


def _item(n: int, text: str, kind: str = "fact") -> PackItem:
    # Ids as long as the engine's, so a belief's tag names its turn by a digest.
    return PackItem(
        id=f"{n:064x}",
        kind=kind,
        text=text,
        trust="unverified",
        observed_at="2026-12-01T00:00:00.000000Z",
        ledger_ref=n,
        as_of=n,
    )


def _turn(n: int, said: str) -> PackItem:
    return _item(n, f"user: {said}\nassistant: Okay.", kind="conversation")


def _from(belief: PackItem, *turns: PackItem) -> dict[str, tuple[str, ...]]:
    return {belief.id: tuple(tag(SOURCE_TAG, t.id) for t in turns)}


def test_a_belief_shares_the_fate_of_the_turn_it_was_drawn_from() -> None:
    old = _turn(1, "I teach maths at Hill School.")
    new = _turn(5, "I teach maths at Park School since March.")
    # The belief job ran after both turns, so the belief's own seq is the newest.
    belief = _item(9, "The user teaches maths at Hill School.")
    found = [[new, old], [belief]]
    # Weighed at its own seq, the restatement of the older turn replaced the newer one.
    assert new.id in fit("Memory", SPECS, found, 1_000).superseded
    # As its turn, it goes where the turn goes: replaced by the newer turn.
    pack = fit("Memory", SPECS, found, 1_000, sources=_from(belief, old))
    assert pack.ids == (new.id,)
    assert pack.superseded == tuple(sorted((old.id, belief.id)))


def test_a_belief_never_replaces_the_turn_it_restates() -> None:
    turn = _turn(3, "I left nursing. I'm a paramedic with the county now.")
    belief = _item(9, "The user left nursing.")
    found = [[turn], [belief]]
    assert fit("Memory", SPECS, found, 1_000).superseded == (turn.id,)
    pack = fit("Memory", SPECS, found, 1_000, sources=_from(belief, turn))
    assert pack.superseded == () and pack.ids == (turn.id, belief.id)


def test_beliefs_about_the_user_share_no_subject_by_naming_the_user() -> None:
    # "The user" opened both and was two of each one's four words: one replaced the other.
    work = _item(1, "The user no longer works at Acme.")
    soda = _item(2, "The user no longer drinks soda.")
    pack = fit("Memory", SPECS, [[], [work, soda]], 1_000)
    assert pack.superseded == () and set(pack.ids) == {work.id, soda.id}
    assert statement("fact", "The user's manager is Priya.") == "my manager is Priya."
    # A turn's "user" is a word like any other.
    assert statement("conversation", "user: The user guide is long.") == "The user guide is long."


def test_a_question_naming_the_person_is_answered_by_their_facts() -> None:
    noor = msgspec.structs.replace(_turn(1, "Noor's school play is on May 4."), subject="Noor")
    mine = _turn(2, "The dentist booked me for March 3.")
    found = [[noor, mine], []]
    pack = fit("Memory", SPECS, found, 1_000, query="When do I see Noor on stage?")
    assert pack.ids == (noor.id, mine.id) and [s.title for s in pack.sections] == ["Thread"]
    pack = fit("Memory", SPECS, found, 1_000, query="When is my dentist?")
    assert pack.ids == (mine.id, noor.id)
    assert [s.title for s in pack.sections] == ["Thread", "Thread" + ASIDE_TITLE]


def _summary(lines: list[str]) -> PackItem:
    text = "\n".join(f"- [#{n + 1} 2026-02-01] {line}" for n, line in enumerate(lines))
    return PackItem(
        id="f" * 64,
        kind="context_summary",
        text=text,
        trust="unverified",
        observed_at="",
        ledger_ref=500,
        as_of=len(lines),
    )


def test_a_long_summary_keeps_its_newest_lines_and_drops_asides_first() -> None:
    said = [
        "My name is Ana and I grew up on a sheep farm near Bergen.",
        "I work as a carpenter, mostly kitchens and staircases.",
        "I play the cello in the town orchestra on Thursdays.",
        "We drive an old green Volvo estate with a roof box.",
        "I swim in the fjord every morning from May to October.",
        "My favourite dish is fish soup with plenty of dill.",
        "The workshop rent went up by ten percent this spring.",
        "I am allergic to penicillin, it gives me hives badly.",
        "We are saving for a cabin on the coast near Stavanger.",
        "I read crime novels in bed, usually Nesbo or Dahl.",
        "The dentist said my wisdom teeth can stay for now.",
        "My brother Tomas has a new job in Vienna.",
        "I keep three chickens in the back garden.",
    ]
    summary = _summary(said)
    assert len(summary.text) > MAX_ITEM_CHARS
    shown = fit("Memory", SPECS, [[summary], []], 2_000, query="Do I keep chickens?").sections
    text = shown[0].items[0].text
    assert len(text) <= MAX_ITEM_CHARS and not text.endswith("…")
    # The newest lines, not the oldest: the text's end held the latest values.
    assert "three chickens" in text and "wisdom teeth" in text
    assert "sheep farm" not in text
    # Someone else's line went first, before any older line of the user's.
    assert "Tomas" not in text
    asked = fit("Memory", SPECS, [[summary], []], 2_000, query="Where does Tomas work?")
    assert "Tomas" in asked.sections[0].items[0].text


def test_at_equal_weight_a_searched_item_comes_before_a_listed_one() -> None:
    # A recent turn is not ranked by the message at all; the preset's order no longer
    # breaks the tie in its favour.
    specs = (
        SectionSpec(reach="thread", title="Recent", how="recent", weight=2),
        SectionSpec(reach="own", title="Found", weight=2),
    )
    recent = _turn(7, "Thanks, that reads well.")
    found = _item(3, "The user works at a bakery.")
    pack = fit("Memory", specs, [[recent], [found]], 1_000, query="Where do I work?")
    assert [s.title for s in pack.sections] == ["Found", "Recent"]


class _Tools:
    def __init__(self, tools: MemoryTools) -> None:
        self.tools = tools

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Any:
        return await self.tools.call(name, dict(arguments or {}))


async def test_holistic_recall_reads_a_beliefs_turns_from_its_tags(engine: Engine) -> None:
    thread = LAYOUT.thread("w", "t1")

    def said(text: str) -> dict[str, Any]:
        return {"conversation": {"turns": [{"role": "user", "text": text}]}}

    old = await engine.store(said("I teach maths at Hill School."), namespace=thread)
    new = await engine.store(said("I teach maths at Park School since March."), namespace=thread)
    belief = await engine.store(
        {"learning": {"text": "The user teaches maths at Hill School."}},
        namespace=LAYOUT.agent("w"),
        tags=["belief", tag(SOURCE_TAG, old.id)],
    )
    node = LAYOUT.agent("w")
    readers = {
        "own": _Tools(MemoryTools(engine, LAYOUT.reader(node, Reach.exact(node)))),
        "thread": _Tools(MemoryTools(engine, LAYOUT.thread_writer("w", "t1"))),
    }
    preset = PackPreset(name="p", title="Memory", sections=SPECS)
    pack = await holistic_recall(readers, preset, query="Where do I teach maths?")
    assert pack.ids == (new.id,)
    assert pack.superseded == tuple(sorted((old.id, belief.id)))


def test_a_turn_replaced_for_one_fact_keeps_the_beliefs_of_its_others() -> None:
    # One turn, two facts; a later turn replaces it for the first only.
    old = _turn(1, "I moved to Lisbon near the old park. My manager is Priya.")
    new = _turn(5, "I moved to Porto near the old park.")
    home = _item(8, "The user lives in Lisbon near the old park.")
    boss = _item(9, "The user's manager is Priya.")
    sources = {**_from(home, old), **_from(boss, old)}
    pack = fit("Memory", SPECS, [[new, old], [home, boss]], 1_000, sources=sources)
    assert boss.id in pack.ids and new.id in pack.ids
    assert set(pack.superseded) == {old.id, home.id}


def test_a_turn_tag_written_on_a_learning_never_makes_it_newer() -> None:
    chat = _turn(7, "Thanks, that reads well.")
    stale = _item(2, "The user lives in Berlin near the old park.")
    current = _item(6, "The user lives in Lisbon near the old park.")
    found = [[chat], [stale, current]]
    plain = fit("Memory", SPECS, found, 1_000, query="Where do I live?")
    # A tag naming a newer turn is no source: the stale fact is judged at its own seq.
    forged = fit(
        "Memory", SPECS, found, 1_000, query="Where do I live?", sources=_from(stale, chat)
    )
    assert plain.superseded == forged.superseded == (stale.id,)
    assert forged.ids == plain.ids


def test_sources_of_the_wrong_shape_are_refused_by_name() -> None:
    item = _item(1, "The user lives in Oslo.")
    for bad, named in (({item.id: None}, f"`sources[{item.id!r}]`"), (["x"], "`sources`")):
        with pytest.raises(InvalidRequest, match=re.escape(named)):
            fit("Memory", SPECS[1:], [[item]], 500, sources=bad)  # type: ignore[arg-type]
