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
from unittest import mock

import msgspec
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memseal
from memseal.engine import HashingEmbedder, Learning, NewItem, _closeness, _linking, _rule_reading
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


def _reference(
    ranked: list[tuple[int, float]], cands: dict[int, Candidate], rule: Rule
) -> tuple[list[tuple[int, float]], dict[int, str]]:
    """The rule as stated, pair by pair: current_first with its fast path declined."""
    with mock.patch.object(_linking, "reorder", lambda *_: None):
        return current_first(ranked, cands, rule)


@settings(max_examples=300, deadline=None)
@given(_candidates(), _rules())
def test_the_fast_path_orders_and_marks_as_the_reference(
    drawn: tuple[list[tuple[int, float]], dict[int, Candidate]], rule: Rule
) -> None:
    ranked, cands = drawn
    assert current_first(ranked, cands, rule) == _reference(ranked, cands, rule)


def _unit(cosine: float, dims: int = 256) -> tuple[bytes, bytes]:
    """Two float32 unit vectors whose cosine is ``cosine`` (to float32's precision)."""
    other = (1 - cosine * cosine) ** 0.5
    return struct.pack(f"<{dims}f", 1.0, *[0.0] * (dims - 1)), struct.pack(
        f"<{dims}f", cosine, other, *[0.0] * (dims - 2)
    )


def _pair(older: bytes, newer: bytes) -> dict[int, Candidate]:
    return {
        1: Candidate(seq=1, id="a", observed_at="2026-01-01", text="I live in Oslo.", vector=older),
        2: Candidate(seq=2, id="b", observed_at="2026-01-02", text="I live in Rome.", vector=newer),
    }


def test_cosines_at_the_threshold_decide_as_einsum() -> None:
    # Cosines swept through the threshold's rounding step (0.44995) by steps finer than
    # a 256-term float32 sum's error bound: those the BLAS product cannot tell from the
    # threshold are decided by einsum's matrix, as the reads before this path did.
    cut = _closeness._cut(RULE.cosine)
    assert numpy.round(numpy.array([cut]), 4)[0] >= RULE.cosine
    assert numpy.round(numpy.array([numpy.nextafter(cut, 0.0)]), 4)[0] < RULE.cosine
    decided: dict[int, bool] = {}
    for step in range(-60, 61):
        older, newer = _unit(0.44995 + step * 1e-6)
        matrix = numpy.frombuffer(older + newer, dtype="<f4").reshape(2, -1)
        cosine = numpy.einsum("ik,jk->ij", matrix, matrix).astype(numpy.float64)[0, 1]
        linked = bool(numpy.round(cosine, 4) >= RULE.cosine)
        with mock.patch.object(numpy, "einsum", wraps=numpy.einsum) as einsum:
            got = current_first([(1, 2.0), (2, 1.0)], _pair(older, newer), RULE)
        assert got == (([(2, 1.0), (1, 2.0)], {1: "b"}) if linked else ([(1, 2.0), (2, 1.0)], {}))
        decided[step] = einsum.called
    # Near the threshold einsum decides; far from it (past the bound) the product does.
    assert decided[0] and not decided[-60] and not decided[60]
    assert any(decided.values()) and not all(decided.values())


@pytest.mark.parametrize("dims", [4, 8, 256, 384])
def test_the_product_decides_every_pair_as_einsum(dims: int) -> None:
    rng = numpy.random.default_rng(dims)
    for trial in range(20):
        # Rows near one direction or not, so cosines fall on both sides of 0.45.
        base = rng.standard_normal(dims)
        rows = base * rng.uniform(0, 2, (32, 1)) + rng.standard_normal((32, dims))
        rows = (rows / numpy.linalg.norm(rows, axis=1, keepdims=True)).astype("<f4")
        cands = [
            Candidate(
                seq=k,
                id=f"i{k}",
                observed_at=f"2026-01-01T00:{k:02d}",
                text="x",
                vector=row.tobytes(),
            )
            for k, row in enumerate(rows)
        ]
        matrix = numpy.frombuffer(b"".join(c.vector or b"" for c in cands), dtype="<f4")
        matrix = matrix.reshape(32, -1)
        want = numpy.round(numpy.einsum("ik,jk->ij", matrix, matrix).astype(numpy.float64), 4)
        every = (1 << 32) - 1
        got = _closeness._by_cosine(cands, RULE.cosine, [every] * 32)
        for a in range(32):
            assert got[a] == sum(1 << b for b in range(32) if want[a, b] >= RULE.cosine), trial


def test_word_overlaps_at_the_threshold_decide_as_python() -> None:
    texts = [
        "Lisbon harbour tram bakery.",
        "Lisbon cat dog fox.",
        "Lisbon harbour owl elk yak.",
        "Oslo fjord ferry skiing bakery winter.",
        "Oslo fjord ferry sauna cabin lake snow.",
    ]
    cands = {
        seq: Candidate(seq=seq, id=f"i{seq}", observed_at=f"2026-01-0{seq}", text=f"I said: {t}")
        for seq, t in enumerate(texts, start=1)
    }
    words = [_rule_reading.stems(c.text, RULE.chars) for c in cands.values()]
    values = [
        len(a & b) / (len(a) * len(b)) ** 0.5 for i, a in enumerate(words) for b in words[i + 1 :]
    ]
    assert 0.4 in values  # on the threshold: overlap's rounding decides
    ranked = [(seq, 1.0 / seq) for seq in cands]
    for rule in (
        RULE,
        Rule(version=0, window=32, cosine=0.5, lexical=0.4009, shared=1, chars=2_000, reach=8),
    ):
        with mock.patch.object(_closeness, "overlap", wraps=_rule_reading.overlap) as overlap:
            got = current_first(ranked, cands, rule)
        assert got == _reference(ranked, cands, rule)
        assert overlap.called or rule is not RULE


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
        assert memo.count() <= memo.BOUND
    assert memo.held("other", ["0", str(memo.BOUND + 4)]) == [None, memo.BOUND + 4]
    memo.forget_all()
    assert memo.count() == 0


def test_what_the_reads_keep_using_outlives_the_bound() -> None:
    memo.forget_all()
    memo.hold("slot", [("used", "value")])
    for n in range(3 * memo.BOUND):
        memo.hold("slot", [(str(n), n)])
        if n % 256 == 0:
            assert memo.held("slot", ["used"]) == ["value"]
    assert memo.held("slot", ["used", "0"]) == ["value", None]
    memo.forget_all()


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


@pytest.mark.parametrize(
    "odd", [(float("inf"), 0.0, 0.0), (1e20, 1e20, 0.0), (float("nan"), 1.0, 0.0)]
)
def test_an_out_of_spec_vector_answers_as_the_reference_without_a_warning(
    odd: tuple[float, float, float],
) -> None:
    # A host's own embedder may hand back such a vector; the suite turns warnings into
    # errors, so an overflow warning from the pairs' product would fail the read here.
    cands = {
        1: Candidate(
            seq=1,
            id="a",
            observed_at="1",
            text="I live in Lisbon.",
            vector=struct.pack("<3f", *odd),
        ),
        2: Candidate(
            seq=2,
            id="b",
            observed_at="2",
            text="I live in Berlin.",
            vector=struct.pack("<3f", 1.0, 0.0, 0.0),
        ),
    }
    ranked = [(1, 1.0), (2, 0.5)]
    rule = RULES[VERSION]
    assert current_first(ranked, cands, rule) == _reference(ranked, cands, rule)
