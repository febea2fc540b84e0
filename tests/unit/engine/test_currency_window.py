"""What the currency rule made of a read's window, kept for the next read that meets it.

A read proof re-derives the rule's order and marks, so a kept result must be the one
the rule would make afresh: it is taken only for the very candidates (the read memo's
own objects) it was made from, in the same order and under the same rule, and a
forget drops it with everything else read from the forgotten texts.
"""

from __future__ import annotations

from collections.abc import Iterator
from unittest import mock

import msgspec
import pytest

from memseal.engine import _linking
from memseal.engine import _rule_memo as memo
from memseal.engine.currency import RULES, VERSION, Candidate, current_first

RULE = RULES[VERSION]
_TEXTS = (
    "I live in Berlin with my partner now.",
    "Which city do I live in now?",
    "I live in Lisbon with my partner now.",
    "My brother Tomas lives in Oslo.",
    "I moved to Lisbon in June.",
)


@pytest.fixture(autouse=True)
def _empty() -> Iterator[None]:
    memo.forget_all()
    yield
    memo.forget_all()


def _window(keyed: bool = True) -> tuple[list[tuple[int, float]], dict[int, Candidate]]:
    cands = {
        seq: Candidate(
            seq=seq,
            id=f"id{seq}",
            observed_at=f"2026-0{seq}-01",
            text=text,
            key=f"k{seq}:{len(text)}" if keyed else None,
        )
        for seq, text in enumerate(_TEXTS, start=1)
    }
    return [(seq, 1.0 / seq) for seq in cands], cands


def _counted() -> mock._patch[mock.MagicMock]:
    return mock.patch.object(_linking, "reorder", wraps=_linking.reorder)


def test_the_same_candidates_again_take_the_kept_result() -> None:
    ranked, cands = _window()
    with _counted() as reorder:
        first = current_first(ranked, cands, RULE)
        again = current_first(ranked, cands, RULE)
    assert first == again
    assert first[1]  # the window links: something is marked
    assert reorder.call_count == 1


def test_equal_candidates_made_anew_are_weighed_afresh() -> None:
    ranked, cands = _window()
    first = current_first(ranked, cands, RULE)
    copies = {seq: msgspec.structs.replace(c) for seq, c in cands.items()}
    with _counted() as reorder:
        assert current_first(ranked, copies, RULE) == first
    assert reorder.call_count == 1


def test_another_order_or_rule_is_weighed_afresh() -> None:
    ranked, cands = _window()
    current_first(ranked, cands, RULE)
    flipped = [(seq, score) for seq, score in reversed(ranked)]
    with _counted() as reorder:
        assert current_first(flipped, cands, RULE) == current_first(
            flipped, _window(keyed=False)[1], RULE
        )
        current_first(ranked, cands, RULES[1])
    assert reorder.call_count == 3


def test_the_caller_owns_the_marks() -> None:
    ranked, cands = _window()
    first = current_first(ranked, cands, RULE)
    first[1].clear()
    first[0].clear()
    assert current_first(ranked, cands, RULE) == current_first(
        ranked, _window(keyed=False)[1], RULE
    )


def test_unkeyed_candidates_are_never_kept() -> None:
    ranked, cands = _window(keyed=False)
    current_first(ranked, cands, RULE)
    assert memo.count() == 0


def test_a_forget_drops_what_was_kept() -> None:
    ranked, cands = _window()
    current_first(ranked, cands, RULE)
    assert memo.count() > 0
    memo.forget_all()
    assert memo.count() == 0
    with _counted() as reorder:
        current_first(ranked, cands, RULE)
    assert reorder.call_count == 1
