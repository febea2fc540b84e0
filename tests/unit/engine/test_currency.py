"""The currency rule alone: newer items above the older ones about the same subject."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.engine.currency import (
    RULES,
    VERSION,
    Candidate,
    check_currency,
    current_first,
    following,
    in_force,
    noting,
)
from memseal.errors import InvalidRequest, Unsupported

RULE = RULES[VERSION]


def _cand(seq: int, text: str, day: int, vector: bytes | None = None) -> Candidate:
    return Candidate(
        seq=seq,
        id=f"id{seq}",
        observed_at=f"2026-01-{day:02d}T00:00:00.000000Z",
        text=text,
        vector=vector,
    )


def test_a_newer_fact_moves_just_above_the_older_one_it_replaces() -> None:
    cands = {
        1: _cand(1, "My team lead at the office is Priya.", 1),
        2: _cand(2, "I bake sourdough bread on Sundays.", 2),
        3: _cand(3, "Since March my team lead at the office is Daniel.", 3),
    }
    ranked = [(1, 0.9), (2, 0.8), (3, 0.7)]
    order, marks = current_first(ranked, cands, RULE)
    assert order == [(3, 0.7), (1, 0.9), (2, 0.8)]  # scores stay the items' own
    assert marks == {1: "id3"}


def test_other_people_hypotheticals_questions_and_repeats_replace_nothing() -> None:
    base = "I live in Berlin with my partner near the park."
    for newer in (
        "My brother Tomas lives in Berlin with his partner near the park.",
        "If I ever moved I would live in Berlin with my partner near the park.",
        "Do I live in Berlin with my partner near the park?",
        base,
    ):
        cands = {1: _cand(1, base, 1), 2: _cand(2, newer, 2)}
        ranked = [(1, 0.9), (2, 0.8)]
        assert current_first(ranked, cands, RULE) == (ranked, {}), newer


def test_a_chain_puts_the_newest_first_and_marks_each_older_one_with_it() -> None:
    text = "My team lead at the office is {}."
    cands = {s: _cand(s, text.format(name), s) for s, name in ((1, "Ana"), (2, "Bo"), (3, "Cy"))}
    order, marks = current_first([(1, 1.0), (3, 0.9), (2, 0.8)], cands, RULE)
    assert [seq for seq, _ in order] == [3, 2, 1]
    assert marks == {1: "id3", 2: "id3"}


def test_a_newer_item_ranked_far_below_does_not_climb() -> None:
    # The same subject, but the newer ranked more than Rule.reach places below the
    # older: a remark far down the ranking that only resembles the fact (a chat's
    # "okay" turns) never climbs into the page over it.
    text = "My team lead at the office is {}."
    fillers = (
        "The deploy pipeline runs on Tuesdays.",
        "Our cat sleeps on the piano.",
        "Lunch was a tomato soup.",
        "The train to Porto left late.",
        "Quarterly taxes are due soon.",
        "Helix has modal editing.",
        "Rain is expected tonight.",
        "The garden needs water.",
        "Chess club meets at noon.",
    )
    assert RULE.reach < len(fillers)
    for gap, moves in ((RULE.reach, True), (RULE.reach + 1, False)):
        cands = {1: _cand(1, text.format("Ana"), 1), 2: _cand(2, text.format("Bo"), 2)}
        between = [100 + k for k in range(gap - 1)]
        for k, seq in enumerate(between):
            cands[seq] = _cand(seq, fillers[k], 3)
        ranked = [(1, 1.0), *((seq, 0.9) for seq in between), (2, 0.5)]
        order, marks = current_first(ranked, cands, RULE)
        assert (marks == {1: "id2"}) is moves, gap
        assert (order[0][0] == 2) is moves, gap


def _unit(values: list[float]) -> bytes:
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return struct.pack(f"<{len(values)}f", *(v / norm for v in values))


def test_vectors_decide_when_every_candidate_has_one() -> None:
    # Texts sharing no word: only the vectors say they are about the same thing.
    cands = {
        1: _cand(1, "I live in Berlin.", 1, _unit([1.0, 0.1, 0.0])),
        2: _cand(2, "We relocated to Lisbon.", 2, _unit([0.9, 0.2, 0.0])),
        3: _cand(3, "I bake bread.", 3, _unit([0.0, 0.0, 1.0])),
    }
    order, marks = current_first([(1, 0.9), (3, 0.8), (2, 0.7)], cands, RULE)
    assert [seq for seq, _ in order] == [2, 1, 3]
    assert marks == {1: "id2"}


def test_only_the_window_moves() -> None:
    text = "My team lead at the office is {}."
    far = RULE.window + 5
    cands = {s: _cand(s, text.format(f"N{s}"), 1 + s % 27) for s in range(far)}
    ranked = [(s, float(-s)) for s in range(far)]
    order, _ = current_first(ranked, {s: c for s, c in cands.items() if s < RULE.window}, RULE)
    assert order[RULE.window :] == ranked[RULE.window :]


_TEXTS = [
    "My team lead at the office is Priya.",
    "Since March my team lead at the office is Daniel.",
    "I bake sourdough bread on Sundays.",
    "I stopped baking sourdough bread on Sundays.",
    "My brother Tomas has a new job at the office.",
    "If I moved I would bake bread.",
]


@given(
    st.lists(st.tuples(st.sampled_from(_TEXTS), st.integers(1, 28)), min_size=0, max_size=12),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_the_rule_is_deterministic_and_drops_nothing(
    drawn: list[tuple[str, int]], rnd: random.Random, vectors: bool
) -> None:
    cands = {
        seq: _cand(seq, text, day, _unit([rnd.random() for _ in range(4)]) if vectors else None)
        for seq, (text, day) in enumerate(drawn)
    }
    ranked = [(seq, round(rnd.random(), 4)) for seq in cands]
    rnd.shuffle(ranked)
    order, marks = current_first(ranked, cands, RULE)
    # However the candidates are handed in, the same answer.
    shuffled = list(cands.items())
    rnd.shuffle(shuffled)
    assert current_first(ranked, dict(shuffled), RULE) == (order, marks)
    assert sorted(order) == sorted(ranked)  # nothing dropped, scores kept
    place = {seq: k for k, (seq, _) in enumerate(order)}
    by_id = {c.id: c for c in cands.values()}
    for older, newer_id in marks.items():
        newer = by_id[newer_id]
        assert place[newer.seq] < place[older]
        assert (newer.observed_at, newer.seq) > (cands[older].observed_at, older)


def test_the_setting_and_the_version_followed() -> None:
    assert check_currency(True) and not check_currency(False)
    for bad in ("yes", 1, None):
        with pytest.raises(InvalidRequest, match="`currency`"):
            check_currency(bad)
    with noting() as seen:
        assert in_force(True) == RULE and in_force(False) is None
        with following(None):
            assert in_force(True) is None
        with following(VERSION):
            assert in_force(False) == RULE
    assert seen == {VERSION}
    with pytest.raises(Unsupported, match="version 99"), following(99):
        pass


def test_what_only_asks_goes_after_what_states_from_version_3() -> None:
    # A question a host logged as a turn answers nothing: from version 3 it follows the
    # statements, in its own order; a text that also states something stays where it was.
    cands = {
        1: _cand(1, "Which ferry goes to the island on Thursdays?", 1),
        2: _cand(2, "Is the harbour cafe open late?", 2),
        3: _cand(3, "The island ferry leaves at seven. Is that early?", 3),
        4: _cand(4, "I keep my kayak at the harbour.", 4),
    }
    ranked = [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6)]
    order, marks = current_first(ranked, cands, RULE)
    assert [seq for seq, _ in order] == [3, 4, 1, 2] and marks == {}
    # Version 2 re-derives a read it signed as it ran: the questions stay in place.
    assert current_first(ranked, cands, RULES[2]) == (ranked, {})


def test_questions_between_two_statements_put_no_distance_between_them() -> None:
    # The newer statement is ranked Rule.reach places below the older counted among the
    # statements, with questions between: it still climbs (version 2 counted them).
    text = "My climbing partner at the gym is {}."
    asked = [f"Did the gym change its opening hours in week {k}?" for k in range(6)]
    fillers = [
        "The canal boat needs painting.",
        "Tulips bloom early this spring.",
        "Our printer jams on thick paper.",
        "Saffron costs more than vanilla.",
        "The violin strings snapped again.",
        "Moss covers the old wall.",
        "Lanterns hang along the pier.",
    ][: RULE.reach - 1]
    assert len(fillers) == RULE.reach - 1
    cands = {1: _cand(1, text.format("Odile"), 1), 2: _cand(2, text.format("Kwame"), 3)}
    between = [100 + k for k in range(len(asked) + len(fillers))]
    for seq, said in zip(between, asked + fillers, strict=True):
        cands[seq] = _cand(seq, said, 2)
    ranked = [(1, 1.0), *((seq, 0.9) for seq in between), (2, 0.5)]
    order, marks = current_first(ranked, cands, RULE)
    assert marks == {1: "id2"} and [seq for seq, _ in order[:2]] == [2, 1]
    assert [seq for seq, _ in order[-len(asked) :]] == between[: len(asked)]
    assert current_first(ranked, cands, RULES[2])[1] == {}
