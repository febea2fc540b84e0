"""The currency rule's fast path: the same results as its reference, for less.

The rule (``memseal.engine.currency``) is re-derived by read proofs, so how it is
computed must never change what it gives: the matrix path (numpy) gives the
reference's order and marks on any candidates, a read that keeps what it read of a
text (``_rule_memo``) gives what a read afresh gives, and a forget leaves nothing
read from the forgotten text behind.
"""

from __future__ import annotations

import struct
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memseal
from memseal.engine import HashingEmbedder, Learning, NewItem, currency
from memseal.engine import _rule_memo as memo
from memseal.engine.currency import RULES, VERSION, Candidate, Rule, current_first
from memseal.engine.results import Mode

RULE = RULES[VERSION]
_WORDS = ("live", "Lisbon", "Berlin", "moved", "work", "manager", "dog", "run", "since", "now")
_OPENINGS = ("I", "We", "My brother Tomas", "My sister", "If I", "Do I", "She")


@st.composite
def _candidates(draw: st.DrawFn) -> tuple[list[tuple[int, float]], dict[int, Candidate]]:
    seqs = draw(st.lists(st.integers(0, 60), min_size=0, max_size=36, unique=True))
    vectors = draw(st.booleans())
    base = draw(st.lists(st.floats(-1, 1), min_size=4, max_size=4))
    cands = {}
    for seq in seqs:
        words = draw(st.lists(st.sampled_from(_WORDS), max_size=7))
        text = " ".join([draw(st.sampled_from(_OPENINGS)), *words]) + draw(
            st.sampled_from((".", "?", ""))
        )
        vector = None
        if vectors:
            # Near one shared direction or not: cosines on both sides of the threshold.
            own = draw(st.lists(st.floats(-1, 1), min_size=4, max_size=4))
            mixed = [b * draw(st.floats(0, 3)) + o for b, o in zip(base, own, strict=True)]
            norm = sum(x * x for x in mixed) ** 0.5 or 1.0
            vector = struct.pack("<4f", *(x / norm for x in mixed))
        cands[seq] = Candidate(
            seq=seq,
            id=f"id{seq}",
            observed_at=f"2026-01-{draw(st.integers(1, 4)):02d}",
            text=text,
            vector=vector,
        )
    order = draw(st.permutations(seqs))
    return [(seq, float(len(order) - place)) for place, seq in enumerate(order)], cands


def _rules() -> st.SearchStrategy[Rule]:
    return st.sampled_from(
        (
            RULE,
            Rule(version=0, window=8, cosine=0.2, lexical=0.5, shared=1, chars=12, reach=8),
            Rule(
                version=0,
                window=32,
                cosine=0.9,
                lexical=0.3333,
                shared=2,
                chars=2_000,
                reach=32,
            ),
        )
    )


@settings(max_examples=300, deadline=None)
@given(_candidates(), _rules())
def test_the_matrix_path_orders_and_marks_as_the_reference(
    drawn: tuple[list[tuple[int, float]], dict[int, Candidate]], rule: Rule
) -> None:
    ranked, cands = drawn
    head = [p for p in ranked[: rule.window] if p[0] in cands]
    if len(head) < 2:
        return
    ordered = sorted((cands[s] for s, _ in head), key=lambda c: (c.observed_at, c.seq))
    places = currency._places(ordered, [seq for seq, _ in head])
    assert currency._moved_np(head, ordered, rule, places) == currency._moved(
        head, ordered, rule, places
    )


@settings(max_examples=150, deadline=None)
@given(_candidates())
def test_a_read_keeping_what_it_read_gives_what_a_read_afresh_gives(
    drawn: tuple[list[tuple[int, float]], dict[int, Candidate]],
) -> None:
    ranked, cands = drawn
    afresh = current_first(ranked, cands, RULE)
    # Keyed by text here (a read keys by content hash and length: one key, one text).
    keyed = {s: msgspec.structs.replace(c, key=f"t:{c.text}") for s, c in cands.items()}
    assert current_first(ranked, keyed, RULE) == afresh
    assert current_first(ranked, keyed, RULE) == afresh  # the second time from the memo


def test_the_overlap_matrix_decides_as_python_near_the_threshold() -> None:
    # 1/sqrt(2*3) = 0.40825 and 2/sqrt(5*5) = 0.4: on and just past the threshold.
    stems = [frozenset({"a", "b"}), frozenset({"a", "c", "d"}), frozenset()]
    stems += [frozenset({"a", "b", "e", "f", "g"}), frozenset({"a", "b", "h", "i", "j"})]
    for rule in (
        RULE,
        Rule(version=0, window=32, cosine=0.5, lexical=0.4083, shared=1, chars=9, reach=8),
    ):
        matrix = currency._overlap_matrix(stems, rule)
        for i in range(len(stems)):
            for j in range(i + 1, len(stems)):
                want = currency._overlap(stems[i], stems[j], rule.shared) >= rule.lexical
                assert bool(matrix[i, j]) == want, (i, j, rule)


def test_the_memo_is_bounded_and_reads_a_key_once() -> None:
    memo.forget_all()
    reads: list[int] = []

    def read(n: int) -> int:
        reads.append(n)
        return n

    assert memo.kept("slot", "k", lambda: read(1)) == 1
    assert memo.kept("slot", "k", lambda: read(2)) == 1  # kept: not read again
    assert memo.kept("slot", None, lambda: read(3)) == 3  # no key: always read
    assert memo.kept_many("slot", ["k", "j", None], lambda i: read(10 + i)) == [1, 11, 12]
    assert reads == [1, 3, 11, 12]
    for n in range(memo.BOUND + 5):
        memo.hold("other", [(str(n), n)])
    assert memo.count() == memo.BOUND
    assert memo.held("other", ["0", str(memo.BOUND + 4)]) == [None, memo.BOUND + 4]
    memo.forget_all()
    assert memo.count() == 0


@pytest.mark.parametrize("mode", ["exact", "semantic"])
async def test_a_forget_leaves_nothing_read_from_its_text(tmp_path: Path, mode: Mode) -> None:
    memo.forget_all()
    texts = ["I live in Berlin near the park.", "We moved to Lisbon near the park."]
    async with memseal.open(
        tmp_path / "m", embedder=HashingEmbedder(), checkpoint_interval=None
    ) as memory:
        stored = await memory.engine.store_many(
            [NewItem(content=Learning(text=t), namespace="user:dana") for t in texts]
        )
        fetched = await memory.engine.fetch("where do I live near the park", mode=mode)
        assert [h.item.text for h in fetched.hits] == texts[::-1]
        assert fetched.hits[1].superseded_by == stored[1].id
        assert memo.count() > 0
        await memory.engine.forget(ids=[stored[0].id])
        assert memo.count() == 0
        again = await memory.engine.fetch("where do I live near the park", mode=mode)
        assert [h.item.text for h in again.hits] == texts[1:]
