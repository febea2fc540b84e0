"""The default belief extractor's rules: preferences, decisions, facts, each with a confidence."""

from __future__ import annotations

import pytest

from memseal.apps.lifecycle import Belief, RuleExtractor, SourceTurn, parse_turns
from memseal.ledger.errors import InvalidRequest


async def _beliefs(*said: tuple[str, str]) -> list[Belief]:
    turns = [SourceTurn(item=f"t{i}", role=role, text=text) for i, (role, text) in enumerate(said)]
    return list(await RuleExtractor().extract(turns))


async def test_stated_facts_preferences_and_decisions_are_kept_with_their_confidence() -> None:
    found = await _beliefs(
        ("user", "Hi! My name is Ana. I live in Porto."),
        ("user", "I prefer dark mode. We decided to ship on Friday."),
        ("user", "My favourite colour is green."),
    )
    assert [(b.text, b.kind, b.confidence, b.subject) for b in found] == [
        ("The user's name is Ana.", "fact", 0.9, "name"),
        ("The user lives in Porto.", "fact", 0.9, "lives_in"),
        ("The user prefers dark mode.", "fact", 0.8, None),
        ("Decided: ship on Friday.", "decision", 0.85, None),
        ("The user's favourite colour is green.", "fact", 0.8, "favourite:colour"),
    ]
    assert [b.sources for b in found] == [("t0",), ("t0",), ("t1",), ("t1",), ("t2",)]
    assert [b.preference for b in found] == [False, False, True, False, True]


async def test_a_hedge_lowers_the_confidence_and_a_question_is_no_belief() -> None:
    found = await _beliefs(("user", "I think I work at Acme. Do I live in Rome?"))
    assert [(b.text, b.confidence) for b in found] == [("The user works at Acme.", 0.6)]


async def test_only_the_user_speaks_for_the_user() -> None:
    assert await _beliefs(("assistant", "I live in the cloud. My name is Bot.")) == []


async def test_the_last_statement_on_a_subject_wins_within_one_build() -> None:
    found = await _beliefs(
        ("user", "I live in Porto."), ("user", "I like tea."), ("user", "I moved to Lisbon.")
    )
    assert [b.text for b in found] == ["The user likes tea.", "The user lives in Lisbon."]
    flipped = await _beliefs(("user", "I like coffee."), ("user", "I don't like coffee any more"))
    assert [(b.text, b.subject) for b in flipped] == [
        ("The user does not like coffee.", "likes:coffee")
    ]


async def test_the_rules_are_deterministic() -> None:
    said = ("user", "We'll use PostgreSQL. Let's go with uvicorn. My editor is vim.")
    first, again = await _beliefs(said), await _beliefs(said)
    assert first == again
    assert [b.text for b in first] == [
        "Decided: use PostgreSQL.",
        "Decided: use uvicorn.",
        "The user's editor is vim.",
    ]


def test_stored_conversation_text_parses_back_into_turns() -> None:
    turns = parse_turns("c1", "user: I live in Porto.\nsecond line\nassistant: Noted.")
    assert [(t.item, t.role, t.text) for t in turns] == [
        ("c1", "user", "I live in Porto.\nsecond line"),
        ("c1", "assistant", "Noted."),
    ]


WEDNESDAY = "2026-12-02T09:00:00Z"  # 2026-12-02 is a Wednesday


async def _dated(text: str, at: str | None = WEDNESDAY, **options: object) -> list[Belief]:
    turn = SourceTurn(item="t0", role="user", text=text, at=at)
    return list(await RuleExtractor(**options).extract([turn]))  # type: ignore[arg-type]


async def test_days_named_relative_to_the_turn_become_its_refers_to() -> None:
    cases = {
        "We decided yesterday to use Go.": ("Decided: use Go (on 2026-12-01).", "2026-12-01"),
        "I moved to Lisbon last Tuesday.": (
            "The user lives in Lisbon (on 2026-12-01).",
            "2026-12-01",
        ),
        "Let's go with uvicorn on 3 March.": (
            "Decided: use uvicorn (on 2026-03-03).",
            "2026-03-03",
        ),
        "We decided to ship on Friday.": ("Decided: ship (on 2026-12-04).", "2026-12-04"),
        "We will use Rust in 3 days.": ("Decided: use Rust (on 2026-12-05).", "2026-12-05"),
        "We decided the day before yesterday to pause.": (
            "Decided: pause (on 2026-11-30).",
            "2026-11-30",
        ),
        "We decided two weeks ago to freeze.": ("Decided: freeze (on 2026-11-18).", "2026-11-18"),
    }
    for said, (text, day) in cases.items():
        (belief,) = await _dated(said)
        assert (belief.text, belief.refers_to) == (text, (day,)), said
    # The same turn read again gives the same belief: deterministic.
    assert await _dated("We decided yesterday to use Go.") == await _dated(
        "We decided yesterday to use Go."
    )


async def test_days_are_read_in_the_extractors_zone_and_only_with_a_turn_time() -> None:
    from zoneinfo import ZoneInfo

    late = "2026-12-02T23:30:00Z"  # already 3 December in Auckland
    (utc,) = await _dated("We decided yesterday to use Go.", at=late)
    (nz,) = await _dated(
        "We decided yesterday to use Go.", at=late, zone=ZoneInfo("Pacific/Auckland")
    )
    assert (utc.refers_to, nz.refers_to) == (("2026-12-01",), ("2026-12-02",))
    # No time for the turn: the phrase stays, and no day is claimed.
    (undated,) = await _dated("We decided yesterday to use Go.", at=None)
    assert (undated.text, undated.refers_to) == ("Decided: yesterday to use Go.", ())
    # A bare weekday is no day, and a full date stays in the text and is named.
    (monday,) = await _dated("My favourite day is Monday.")
    assert (monday.text, monday.refers_to) == ("The user's favourite day is Monday.", ())
    (absolute,) = await _dated("We decided on 2026-11-01 to freeze.")
    assert absolute.refers_to == ("2026-11-01",) and "2026-11-01" in absolute.text
    with pytest.raises(InvalidRequest, match="`zone`"):
        RuleExtractor(zone="Europe/Lisbon")  # type: ignore[arg-type]
