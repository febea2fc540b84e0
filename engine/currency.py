"""What is current: among a read's candidates, newer items above the older ones they replace.

A user says in February that they live in Berlin and in June that they moved to
Lisbon. Both are memories; only one is current. Among the candidates a read ranked,
two items are **about the same subject** when

- their texts are similar: the cosine of their vectors (the read's embedder, for
  semantic and hybrid reads) or, for an exact read, the overlap of their stemmed
  content words, at least the rule's threshold;
- both state something (neither only asks nor only supposes) about the same
  person (:mod:`.aboutness`: the user, or the other person named); and
- their texts differ (a text repeated elsewhere says the same, it replaces nothing).

The newer of such a pair (by ``observed_at``, then by seq) is placed just above the
older, which stays in the result, marked ``superseded_by`` the newest item that
replaces it. From version 3, a candidate that only asks (a question a host logged
as a turn: every sentence asks, none states) goes after the ones that state
something, and the places a newer item may climb are counted among those: a
question answers nothing, and similar questions crowded the current fact off a
page. No list of phrasings decides anything.

The rule is pure and deterministic: the same ranking and candidates give the same
order, whatever order the candidates are handed in. It is part of what a read
re-derives, so each version's constants are frozen in :data:`RULES`; a read records
the version it followed (a recorded call's signed ``currency``), and a re-derivation
follows that version through :func:`following` (none: the reads as before the rule,
which is what every call recorded before it had). Only the first
:attr:`Rule.window` candidates take part, so later pages of a fetch keep the order
the first page saw and the cost stays flat however deep the ranking goes.

This module keeps the rule as stated, pair by pair (``_reference``); a read runs
:func:`._linking.reorder`, which gives the same order and marks for less, and which
defers to the reference where it cannot (a semantic read where numpy is absent).
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

import msgspec

from memseal.ledger.errors import InvalidRequest, Unsupported

from . import _linking
from ._resident import unpack
from ._rule_memo import kept_window
from ._rule_reading import overlap as _overlap
from ._rule_reading import readings
from .aboutness import About

__all__ = [
    "RULES",
    "VERSION",
    "Candidate",
    "Rule",
    "check_currency",
    "current_first",
    "following",
    "in_force",
    "noting",
]


class Rule(msgspec.Struct, frozen=True, kw_only=True):
    """One version of the rule: its window and its similarity thresholds."""

    version: int
    #: How many of a ranking's first candidates take part.
    window: int
    #: The cosine (rounded to four places) two vectors reach to be about the same subject.
    cosine: float
    #: The same for the overlap of two texts' stemmed content words (the binary cosine).
    lexical: float
    #: The stemmed content words two texts share at least, for the lexical test.
    shared: int
    #: The characters of a text whose words are compared (a document's opening).
    chars: int
    #: A newer item climbs over an older one only from at most this many places below
    #: it in the read's ranking: a remark ranked far down that merely resembles the
    #: older one (a chat's "okay" turns) never climbs into the page over it.
    reach: int
    #: How the rule reads what a text states and whose (:data:`.aboutness.READING`).
    reading: int = 1
    #: Items that only ask (every sentence a question) go after the window's other
    #: candidates (from version 3): a question logged as a turn answers nothing.
    asks_last: bool = False


_V3: Final = Rule(
    version=3,
    window=32,
    cosine=0.45,
    lexical=0.4,
    shared=2,
    chars=2_000,
    reach=8,
    reading=3,
    asks_last=True,
)
#: Every version a recorded read may name; a version's constants never change.
RULES: Final[Mapping[int, Rule]] = {
    1: Rule(version=1, window=32, cosine=0.45, lexical=0.4, shared=2, chars=2_000, reach=4),
    # Reads hedges ("I suppose") as stated, and "my manager at Acme is Priya" as the user's.
    2: Rule(
        version=2, window=32, cosine=0.45, lexical=0.4, shared=2, chars=2_000, reach=4, reading=2
    ),
    # Puts what only asks (a question logged as a turn) after what states, lets a newer
    # item climb from 8 places, counted among the statements, and reads a sentence
    # opened by someone's name as that person's fact (reading 3).
    3: _V3,
    # Version 3 with reading 4 (:data:`.aboutness.READING`): the conditionals, modals,
    # objects of prepositions and names it reads anew.
    4: msgspec.structs.replace(_V3, version=4, reading=4),
}
#: The version new reads follow when the host keeps the rule on.
VERSION: Final = 4


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """One ranked item as the rule weighs it: ``vector`` is its unit vector
    (little-endian float32 bytes) on a semantic or hybrid read, else None."""

    seq: int
    id: str
    observed_at: str
    text: str
    vector: bytes | None = None
    #: What names its whole text to the read memo (:mod:`._rule_memo`), for a ``text``
    #: that is the text's first :attr:`Rule.chars` characters (as a read loads it): the
    #: keyed content hash and the whole text's length. None: ``text`` is read afresh.
    key: str | None = None


_KEY: Final = operator.attrgetter("key")
_SEQ: Final = operator.attrgetter("seq")

_FOLLOWING: contextvars.ContextVar[tuple[int | None] | None] = contextvars.ContextVar(
    "memseal_currency_following", default=None
)
_NOTED: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar(
    "memseal_currency_noted", default=None
)


def check_currency(value: object, field: str = "currency") -> bool:
    """A host's setting of the rule: True (on, the default) or False; else InvalidRequest."""
    if not isinstance(value, bool):
        raise InvalidRequest(f"`{field}` must be true or false (whether reads put current first)")
    return value


@contextlib.contextmanager
def following(version: int | None) -> Iterator[None]:
    """Reads inside follow ``version`` of the rule (None: no rule), whatever the engine's
    setting: how a re-derivation repeats a recorded read."""
    if version is not None and version not in RULES:
        raise Unsupported(
            f"the read followed version {version} of the currency rule; this memseal knows "
            f"{', '.join(str(v) for v in sorted(RULES))}: re-derive it with a newer memseal"
        )
    token = _FOLLOWING.set((version,))
    try:
        yield
    finally:
        _FOLLOWING.reset(token)


@contextlib.contextmanager
def noting() -> Iterator[set[int]]:
    """Collect the rule versions the reads inside followed (what a recording signs)."""
    seen: set[int] = set()
    token = _NOTED.set(seen)
    try:
        yield seen
    finally:
        _NOTED.reset(token)


def in_force(setting: bool) -> Rule | None:
    """The rule a read follows now: the one :func:`following` names, else the host's."""
    forced = _FOLLOWING.get()
    version = forced[0] if forced is not None else (VERSION if setting else None)
    if version is None:
        return None
    noted = _NOTED.get()
    if noted is not None:
        noted.add(version)
    return RULES[version]


def _stems_of(cands: Sequence[Candidate], rule: Rule) -> list[frozenset[str]]:
    reads = readings(cands, rule)
    return [r.words(c.text, rule.chars) for c, r in zip(cands, reads, strict=True)]


def _stating_of(cands: Sequence[Candidate], rule: Rule) -> list[About | None]:
    return [r.stating for r in readings(cands, rule)]


def _by_vectors(cands: Sequence[Candidate]) -> list[bytes] | None:
    """The candidates' vectors when every one has one of one size (else the lexical test)."""
    vectors = [c.vector for c in cands]
    if all(v is not None for v in vectors) and len({len(v or b"") for v in vectors}) == 1:
        return [v for v in vectors if v is not None]
    return None


def _linked(
    cands: Sequence[Candidate], rule: Rule, places: Sequence[float]
) -> list[tuple[int, int]]:
    """The index pairs (i, j), i < j, in order, of candidates about the same subject:
    similar texts that differ, both stating something about the same person, the newer
    ranked at most :attr:`Rule.reach` places below the older (``places``: places)."""
    n = len(cands)
    vectors = _by_vectors(cands)
    if vectors is not None:
        rows = [unpack(v) for v in vectors]
        close = [
            (i, j)
            for i in range(n)
            for j in range(i + 1, n)
            # Rounded to four places, as the semantic ranking scores (so last-bit
            # differences between machines never decide).
            if round(sum(x * y for x, y in zip(rows[i], rows[j], strict=True)), 4) >= rule.cosine
        ]
    else:
        stems = _stems_of(cands, rule)
        close = [
            (i, j)
            for i in range(n)
            for j in range(i + 1, n)
            if _overlap(stems[i], stems[j], rule.shared) >= rule.lexical
        ]
    pairs = [
        (i, j)
        for i, j in close
        if cands[i].text != cands[j].text and _near(places[j], places[i], rule)
    ]
    involved = sorted({k for pair in pairs for k in pair})
    read = dict(zip(involved, _stating_of([cands[k] for k in involved], rule), strict=True))
    return [
        (i, j)
        for i, j in pairs
        if (a := read[i]) is not None and (b := read[j]) is not None and a.subject == b.subject
    ]


def _near(newer: float, older: float, rule: Rule) -> bool:
    """Whether a newer item ranked close enough below an older one to climb over it."""
    return newer - older <= rule.reach


def _places(cands: Sequence[Candidate], counted: Sequence[int]) -> list[float]:
    """Each candidate's place in the read's ranking (0: first), counted among the seqs
    ``counted`` (a candidate not counted, which links to none, takes the next one's)."""
    place = {seq: k for k, seq in enumerate(counted)}
    return [float(place.get(c.seq, len(counted))) for c in cands]


def current_first(
    ranked: Sequence[tuple[int, float]], candidates: Mapping[int, Candidate], rule: Rule
) -> tuple[list[tuple[int, float]], dict[int, str]]:
    """``ranked`` with each newer item above the older ones about the same subject,
    and ``{older seq: id of the newest item replacing it}``; nothing dropped.

    Only the first ``rule.window`` entries of ``ranked`` (those in ``candidates``)
    move; the rest keep their places after them.
    """
    window = ranked[: rule.window]
    head = [p for p in window if p[0] in candidates]
    if len(head) < 2:
        return list(ranked), {}
    seqs = [seq for seq, _ in head]
    cands = list(map(candidates.__getitem__, seqs))
    if None not in map(_KEY, cands) and list(map(_SEQ, cands)) == seqs:
        # A read's candidates, as the read memo keeps them: the next read whose window
        # holds these same ones in this order (the same question asked again) takes
        # what this one made of them. The rule is pure, so it is what it would make.
        moved, marks = kept_window(rule, cands, lambda: _reordered(head, candidates, rule))
    else:
        moved, marks = _reordered(head, candidates, rule)
    if moved is None:
        return list(ranked), {}
    score = dict(head)
    out = list(ranked)
    out[: len(head)] = [(seq, score[seq]) for seq in moved]
    if len(head) < len(window):
        # The rest keep their places: only the window's first entries can be in the head.
        out[len(head) : len(window)] = [p for p in window if p[0] not in score]
    # The caller's own marks: a kept result stays as it was made.
    return out, dict(marks)


def _reordered(
    head: Sequence[tuple[int, float]], candidates: Mapping[int, Candidate], rule: Rule
) -> tuple[tuple[int, ...] | None, Mapping[int, str]]:
    """The head's seqs in their new order (None: none moves) and the marks, by
    :func:`._linking.reorder`, else by the reference (where it defers)."""
    found = _linking.reorder(head, candidates, rule)
    moved, marks, asking = _reference(head, candidates, rule) if found is None else found
    if not marks and not asking:
        return None, {}
    if not marks:
        moved = [seq for seq, _ in head]
    if asking:
        moved = [s for s in moved if s not in asking] + [s for s in moved if s in asking]
    return tuple(moved), marks


def _reference(
    head: Sequence[tuple[int, float]], candidates: Mapping[int, Candidate], rule: Rule
) -> tuple[list[int], dict[int, str], set[int]]:
    """The rule as stated, pair by pair (what :func:`._linking.reorder` gives for less):
    the head's new order (empty: nothing moves), the marks and the seqs that only ask.
    Where numpy is absent it sums a pair's cosine in Python, the reads' einsum (float32)
    otherwise: the two agree but within a float32 rounding of the threshold."""
    # Sorted by (time, seq): the result depends on the candidates, never on how they came.
    cands = sorted((candidates[seq] for seq, _ in head), key=lambda c: (c.observed_at, c.seq))
    asking: set[int] = set()
    if rule.asks_last:
        asking = {c.seq for c, r in zip(cands, readings(cands, rule), strict=True) if r.asks}
    # Places are counted among the items that state something: a question between two
    # statements goes last, so it puts no distance between them.
    places = _places(cands, [seq for seq, _ in head if seq not in asking])
    moved, marks = _moved(head, cands, rule, places)
    return moved, marks, asking


def _moved(
    head: Sequence[tuple[int, float]],
    cands: Sequence[Candidate],
    rule: Rule,
    places: Sequence[float],
) -> tuple[list[int], dict[int, str]]:
    """The head's seqs in their new order, and the marks (none: nothing moves)."""
    replaced_by: dict[int, list[int]] = {}  # older seq -> newer seqs about the same subject
    for i, j in _linked(
        cands, rule, places
    ):  # in order: each list of newer seqs grows in (time, seq)
        replaced_by.setdefault(cands[i].seq, []).append(cands[j].seq)
    if not replaced_by:
        return [], {}
    by_seq = {c.seq: c for c in cands}
    rank = {seq: place for place, (seq, _) in enumerate(head)}
    order: list[int] = []
    placed: set[int] = set()

    def place(seq: int) -> None:
        # Every newer item about the same subject goes first (in rank order, each with
        # its own newer ones before it); time only grows along these links, so no cycle.
        placed.add(seq)
        for newer in sorted(replaced_by.get(seq, ()), key=rank.__getitem__):
            if newer not in placed:
                place(newer)
        order.append(seq)

    for seq, _ in head:
        if seq not in placed:
            # Held back until its newer items are placed, then placed itself.
            place(seq)
    # The newest of each list is its last: the lists grew in (time, seq).
    marks = {older: by_seq[newer[-1]].id for older, newer in replaced_by.items()}
    return order, marks
