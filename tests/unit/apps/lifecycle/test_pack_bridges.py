"""A pack's question: the replaced turns that bridge it to a current one, and its search words."""

from __future__ import annotations

from memseal.apps.lifecycle import PRE_TURN, ContextPack, PackItem, SectionSpec, fit
from memseal.apps.lifecycle._current import Judged, Ranked
from memseal.apps.lifecycle._question import bridges, expand

SPECS = (
    SectionSpec(reach="thread", title="Thread", weight=2),
    SectionSpec(reach="own", title="Own"),
)


def _turn(n: int, said: str, reply: str = "Okay.") -> PackItem:
    return PackItem(
        id=f"{n:064x}",
        kind="conversation",
        text=f"user: {said}\nassistant: {reply}",
        trust="unverified",
        observed_at="2026-12-01T00:00:00.000000Z",
        ledger_ref=n,
        as_of=n,
    )


def test_a_replaced_turn_naming_what_is_asked_follows_its_replacement() -> None:
    for older, newer, question in (
        (
            "My piano teacher Mrs Adeyemi gives lessons at the Arts Centre.",
            "Mrs Adeyemi gives lessons at the library hall now.",
            "Where does my piano teacher give lessons?",
        ),
        (
            "Rosa is my running coach, she trains us at Victoria Park.",
            "Rosa trains us at Clissold Park since the spring.",
            "Where does my running coach train us?",
        ),
    ):
        # (A long reply: the newer turn takes more of a budget than the older one.)
        old, new = _turn(1, older), _turn(5, newer, reply="Noted: I will keep that in mind.")
        pack = fit("Memory", SPECS, [[old, new], []], 1_000, query=question)
        # Only the older turn says who the teacher (the coach) is: it is kept, after the
        # newer one, marked replaced by it, never as current.
        assert pack.ids == (new.id, old.id) and pack.superseded == ()
        shown = [item for section in pack.sections for item in section.items]
        assert [item.superseded_by for item in shown] == [None, new.id]
        assert f"replaced by {new.id}" in pack.markdown()
        # Where its replacement does not fit, it is left out: alone it would read as current.
        alone = fit("Memory", SPECS, [[old], []], 1_000, query=question)
        tight = fit("Memory", SPECS, [[old, new], []], alone.tokens, query=question)
        assert tight.ids == () and tight.dropped == 1
        assert tight.superseded == (old.id,)
    # An update in other words names nothing: the older value stays out.
    old = _turn(1, "My recipe blog is hosted on Netlify.")
    new = _turn(5, "My recipe blog moved to Render.")
    pack = fit("Memory", SPECS, [[old, new], []], 1_000, query="Where is my recipe blog hosted?")
    assert pack.ids == (new.id,) and pack.superseded == (old.id,)


def _ranked(n: int, text: str, kind: str = "conversation") -> Ranked:
    said = f"user: {text}\nassistant: Okay." if kind == "conversation" else text
    return Ranked(id=str(n), kind=kind, text=said, as_of=n, ledger_ref=n)


def _bridges(older: Ranked, newer: Ranked, question: str) -> dict[str, str]:
    # The replacement given, not read: what is judged here is only the bridge.
    judged = Judged(order=(newer.id, older.id), replaced={older.id: newer.id}, lines={})
    return bridges([older, newer], judged, judged, question)


def test_a_bridge_names_what_the_question_asks_by_the_newer_statements_name() -> None:
    vet = _ranked(1, "Our vet is Dr Halloran at the Mill Lane surgery.")
    moved = _ranked(4, "Dr Halloran moved to the Riverside surgery.")
    assert _bridges(vet, moved, "Which surgery is our vet at?") == {"1": "4"}
    # The question names him itself: nothing to bridge.
    assert _bridges(vet, moved, "Where is Dr Halloran now?") == {}
    # The newer statement says "vet" too: it is reached without the older one.
    again = _ranked(4, "Our vet Dr Halloran moved to the Riverside surgery.")
    assert _bridges(vet, again, "Which surgery is our vet at?") == {}
    # A name the newer statement does not say links nothing.
    other = _ranked(4, "The Mill Lane surgery closed for a refit.")
    assert _bridges(vet, other, "Which surgery is our vet at?") == {}
    # A summary's words are many statements'.
    summary = _ranked(9, "- [#4 2026-03-01] Dr Halloran moved on.", kind="context_summary")
    assert _bridges(vet, summary, "Which surgery is our vet at?") == {}


def test_the_users_own_subjects_are_never_a_bridge() -> None:
    # Where the user works is the phrasing list's: the newer statement is the answer.
    there = _ranked(1, "I work at Brightwell for my mentor Dana.")
    now = _ranked(4, "I joined Corvid Labs with Dana.")
    assert _bridges(there, now, "Where do I work for my mentor?") == {}


def test_home_words_widen_only_a_question_asked_of_the_user() -> None:
    for asked in ("Where are we based these days?", "What town is home for us now?"):
        assert "moved" in expand(asked), asked
    for asked in ("Where is my accountant based?", "Where does my aunt live?", "Is her home far?"):
        assert expand(asked) == asked
    # The other frames are not the user's alone.
    assert "joined" in expand("Who is my employer?")


BROTHER = "Where does my brother fly now?"


def _dated(n: int, said: str, *, hypothetical: bool = False) -> PackItem:
    return PackItem(
        id=f"{n:064x}",
        kind="conversation",
        text=f"user: {said}\nassistant: Okay.",
        trust="unverified",
        observed_at=f"2026-12-0{n}T00:00:00.000000Z",
        ledger_ref=n,
        as_of=n,
        hypothetical=hypothetical,
    )


def _shown(pack: ContextPack) -> list[tuple[str, str, str | None]]:
    return [(s.title, i.id, i.superseded_by) for s in pack.sections for i in s.items]


def _assert_right_after(pack: ContextPack, older: PackItem, newer: PackItem) -> None:
    """``older`` is shown right after ``newer``, in its section, marked replaced by it."""
    shown = _shown(pack)
    ids = [i for _, i, _ in shown]
    assert ids.index(older.id) == ids.index(newer.id) + 1, pack.markdown()
    title, _, replaced_by = shown[ids.index(older.id)]
    assert title == shown[ids.index(newer.id)][0] and replaced_by == newer.id


def test_a_bridge_is_shown_right_after_its_replacement_in_another_section() -> None:
    # The replacement is in "Recent turns", the replaced turn in an earlier section that
    # is shown first: the replaced turn is carried to just after its replacement.
    other = _dated(1, "We flew to Cape Town for my birthday last year.")
    older = _dated(2, "My brother Bongani is a pilot who flies to Nairobi.")
    newer = _dated(5, "Bongani flies to Mauritius now.")
    found: list[list[PackItem]] = [[], [other, older], [newer], [], [], []]
    _assert_right_after(
        fit(PRE_TURN.title, PRE_TURN.sections, found, 1_000, query=BROTHER), older, newer
    )


def test_a_bridge_of_an_aside_replacement_follows_it_among_the_asides() -> None:
    # An aside goes after what answers; its bridge goes with it, never ahead of it.
    other = _dated(1, "We flew to Cape Town for my birthday last year.")
    older = _dated(2, "My brother Bongani is a pilot who flies to Nairobi.")
    newer = _dated(5, "Bongani flies to Mauritius now.", hypothetical=True)
    for found in ([[], [other, older, newer], [], [], [], []], [[], [other, older], [newer]]):
        found += [[] for _ in range(6 - len(found))]
        pack = fit(PRE_TURN.title, PRE_TURN.sections, found, 1_000, query=BROTHER)
        _assert_right_after(pack, older, newer)
