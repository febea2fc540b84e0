"""The default belief extractor's rules: preferences, decisions, facts, each with a confidence."""

from __future__ import annotations

from memseal.tools.lifecycle import Belief, RuleExtractor, SourceTurn, parse_turns


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
