"""The currency rule as a read runs it: the reference's order and marks, for less.

:mod:`.currency` states the rule and keeps its reference (every pair of the window
weighed in turn, in time order). A read runs :func:`reorder` instead, which gives
the same order and marks (a property test holds the two together) by doing less:

- each text is read once (:class:`._rule_reading.Reading`: whether it only asks, what it states and
  whose, and on a lexical read its stemmed words, from one pass over its sentences),
  and kept in the read memo for the next read that meets it;
- the pairs are sets held as the bits of one integer (bit ``a``: the head's ``a``-th
  candidate, by rank): the candidates stating something about one person, holding one
  text, placed up to some place, earlier in time. A candidate's newer and older ones
  that may link to it are a few ``&`` of those; which of them are similar is
  :mod:`._closeness`'s to say (a semantic read's every pair at once, a lexical read's
  a pair when asked);
- the order is read off the bits, the lowest unplaced bit the next by rank, and asks
  only about the pairs it turns on: an item's newer ones in rank order until one is
  similar. So do the marks, going back in time from the newest until one is.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ._closeness import Similar, similar
from ._rule_reading import Reading, readings

if TYPE_CHECKING:
    from .currency import Candidate, Rule

__all__ = ["reorder"]


def reorder(
    head: Sequence[tuple[int, float]], candidates: Mapping[int, Candidate], rule: Rule
) -> tuple[list[int], dict[int, str], set[int]] | None:
    """The reference's ``(order, marks, asking)`` for ``head`` (two or more, all in
    ``candidates``): the head's seqs reordered (empty: nothing moves), the marks and the
    seqs that only ask (when ``rule`` puts those last). None where the reference must
    decide: a semantic read without numpy, or a head naming a seq twice."""
    seqs = [seq for seq, _ in head]
    cs = [candidates[seq] for seq in seqs]
    if len(set(seqs)) != len(seqs) or [c.seq for c in cs] != seqs:
        return None  # not a ranking of candidates: the reference says what it gives
    reads = readings(cs, rule)
    asking = {c.seq for c, r in zip(cs, reads, strict=True) if r.asks} if rule.asks_last else set()
    links = _links(cs, reads, rule)
    if links is None:
        return [], {}, asking
    newer, older, by_time = links
    known = similar(cs, reads, rule, newer, older)
    if known is None:
        return None
    order = _order(head, known)
    marks = _marks(head, cs, by_time, known)
    return (order if marks else []), marks, asking


def _links(
    cs: Sequence[Candidate], reads: Sequence[Reading], rule: Rule
) -> tuple[list[int], list[int], list[int]] | None:
    """Per head position, the newer and the older candidates it may link to, all but
    their similarity weighed (both state something about the same person, their texts
    differ, the newer is ranked at most :attr:`Rule.reach` places below the older), and
    the candidates that state something by (time, seq); None: no pair may link."""
    whose: dict[str | None, int] = {}  # a person: the candidates stating their facts
    texts: dict[str, int] = {}  # a text: the stating candidates holding it
    # Per stating candidate, along the head: its bit, place, person and text, and time.
    bits: list[int] = []
    places: list[int] = []
    owners: list[tuple[str | None, str]] = []
    times: list[tuple[str, int, int]] = []
    place, asks_last = 0, rule.asks_last
    for a, read in enumerate(reads):
        if asks_last and read.asks:
            continue  # placed after the rest: no place of its own, and it states nothing
        stating = read.stating
        if stating is not None:  # only what states something links (a question never)
            c, bit, subject = cs[a], 1 << a, stating.subject
            text = c.text
            whose[subject] = whose.get(subject, 0) | bit
            texts[text] = texts.get(text, 0) | bit
            times.append((c.observed_at, c.seq, len(bits)))
            bits.append(bit)
            places.append(place)
            owners.append((subject, text))
        place += 1
    if all(group & (group - 1) == 0 for group in whose.values()):
        return None  # no person has two statements: nothing to link
    upto = list(itertools.accumulate(bits, operator.or_))  # [k]: the first k + 1 of them
    everyone = upto[-1]
    times.sort()  # by (time, seq), as the reference weighs them: "newer" is later
    newer, older = [0] * len(cs), [0] * len(cs)
    right, left, reach = bisect.bisect_right, bisect.bisect_left, rule.reach
    before = 0  # the stating candidates earlier in time
    for _, _, k in times:
        subject, text = owners[k]
        own = whose[subject] & ~texts[text]
        # The newer ranked at most ``reach`` places below it, the older at most above
        # (places grow along the head, so each is a run of the stating ones).
        place, bit = places[k], bits[k]
        last, first = right(places, place + reach) - 1, left(places, place - reach)
        a = bit.bit_length() - 1
        newer[a] = own & (upto[last] if last >= 0 else 0) & ~before
        older[a] = own & (everyone & ~upto[first - 1] if first else everyone) & before
        before |= bit
    if not any(newer):
        return None
    return newer, older, [bits[k].bit_length() - 1 for _, _, k in times]


def _order(head: Sequence[tuple[int, float]], known: Similar) -> list[int]:
    """The head's seqs, each item's newer similar ones placed before it in rank order,
    each with its own newer ones before it."""
    order: list[int] = []
    placed = 0
    newer, near, far, settle = known.newer, known.near, known.far, known.settle

    def place(a: int) -> None:
        # Time only grows along the links, so no cycle.
        nonlocal placed
        placed |= 1 << a
        while waiting := newer[a] & ~placed & ~far[a]:
            # The lowest by rank of a's newer similar ones not placed yet, if any.
            while waiting:
                one = waiting & -waiting
                if near[a] & one or settle(a, one.bit_length() - 1):
                    break
                waiting ^= one
            if not waiting:
                break
            place(one.bit_length() - 1)
        order.append(head[a][0])

    for a, (seq, _) in enumerate(head):
        if placed >> a & 1:
            continue
        if newer[a] & ~placed & ~far[a]:
            place(a)
        else:  # nothing newer can wait: placed at once
            placed |= 1 << a
            order.append(seq)
    return order


def _marks(
    head: Sequence[tuple[int, float]],
    cs: Sequence[Candidate],
    by_time: list[int],
    known: Similar,
) -> dict[int, str]:
    """``{older seq: id of the newest candidate replacing it}``: going back in time, the
    first similar one among those that may replace an older one is its newest."""
    older, near, far, settle = known.older, known.near, known.far, known.settle
    waiting = 0  # the candidates some newer one may still replace
    for a, row in enumerate(known.newer):
        if row & ~far[a]:
            waiting |= 1 << a
    marks: dict[int, str] = {}
    for b in reversed(by_time):
        found = older[b] & waiting
        while found:
            one = found & -found
            a = one.bit_length() - 1
            if near[a] >> b & 1 or (not far[a] >> b & 1 and settle(a, b)):
                marks[head[a][0]] = cs[b].id
                waiting ^= one
            found ^= one
        if not waiting:
            break
    return marks
