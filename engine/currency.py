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
replaces it. No list of phrasings decides anything.

The rule is pure and deterministic: the same ranking and candidates give the same
order, whatever order the candidates are handed in. It is part of what a read
re-derives, so each version's constants are frozen in :data:`RULES`; a read records
the version it followed (a recorded call's signed ``currency``), and a re-derivation
follows that version through :func:`following` (none: the reads as before the rule,
which is what every call recorded before it had). Only the first
:attr:`Rule.window` candidates take part, so later pages of a fetch keep the order
the first page saw and the cost stays flat however deep the ranking goes.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import msgspec

from memseal.ledger.errors import InvalidRequest, Unsupported

from ._dialect import index_words
from ._ranking import STOPWORDS
from ._resident import unpack
from .aboutness import About, about, sentences

_np: Any
try:  # numpy is optional, as for the semantic ranking (see _resident)
    import numpy

    _np = numpy
except ImportError:  # pragma: no cover - exercised only where numpy is absent
    _np = None

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


#: Every version a recorded read may name; a version's constants never change.
RULES: Final[Mapping[int, Rule]] = {
    1: Rule(version=1, window=32, cosine=0.45, lexical=0.4, shared=2, chars=2_000),
}
#: The version new reads follow when the host keeps the rule on.
VERSION: Final = 1


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """One ranked item as the rule weighs it: ``vector`` is its unit vector
    (little-endian float32 bytes) on a semantic or hybrid read, else None."""

    seq: int
    id: str
    observed_at: str
    text: str
    vector: bytes | None = None


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


_WORD: Final = re.compile(r"\w+")
_SPEAKER: Final = re.compile(r"^[a-z][a-z0-9_-]{0,31}: ?", re.M)


def _stems(text: str, chars: int) -> frozenset[str]:
    # A conversation's role names open every line: they say nothing about its subject.
    words = _WORD.findall(_SPEAKER.sub("", text[:chars]).casefold())
    return frozenset(index_words(" ".join(w for w in words if w not in STOPWORDS)).split())


def _overlap(a: frozenset[str], b: frozenset[str], shared: int) -> float:
    common = len(a & b)
    if common < shared:
        return 0.0
    return round(common / math.sqrt(len(a) * len(b)), 4)


def _cosines(vectors: Sequence[bytes]) -> list[list[float]]:
    """Every pair's inner product, rounded to four places, as the semantic ranking
    scores (so last-bit differences between machines never decide)."""
    if _np is not None:
        matrix = _np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(vectors), -1)
        # einsum, not BLAS: one fixed summation order whatever the thread count.
        product = _np.einsum("ik,jk->ij", matrix, matrix)
        rounded: list[list[float]] = _np.round(product.astype(_np.float64), 4).tolist()
        return rounded
    rows = [unpack(v) for v in vectors]
    return [[round(sum(x * y for x, y in zip(a, b, strict=True)), 4) for b in rows] for a in rows]


def _similar(cands: Sequence[Candidate], rule: Rule) -> set[tuple[int, int]]:
    """The index pairs (i, j), i < j, of candidates whose texts are similar enough."""
    pairs: set[tuple[int, int]] = set()
    n = len(cands)
    vectors = [c.vector for c in cands]
    if all(v is not None for v in vectors) and len({len(v or b"") for v in vectors}) == 1:
        sims = _cosines([v for v in vectors if v is not None])
        threshold = rule.cosine
    else:
        stems = [_stems(c.text, rule.chars) for c in cands]
        sims = [[_overlap(stems[i], stems[j], rule.shared) for j in range(n)] for i in range(n)]
        threshold = rule.lexical
    for i in range(n):
        for j in range(i + 1, n):
            if sims[i][j] >= threshold and cands[i].text != cands[j].text:
                pairs.add((i, j))
    return pairs


def _stating(text: str) -> About | None:
    """What a text states and about whom; None when it only asks or supposes."""
    if not any(s.states for s in sentences(text)):
        return None
    found = about(text)
    return None if found.hypothetical else found


def current_first(
    ranked: Sequence[tuple[int, float]], candidates: Mapping[int, Candidate], rule: Rule
) -> tuple[list[tuple[int, float]], dict[int, str]]:
    """``ranked`` with each newer item above the older ones about the same subject,
    and ``{older seq: id of the newest item replacing it}``; nothing dropped.

    Only the first ``rule.window`` entries of ``ranked`` (those in ``candidates``)
    move; the rest keep their places after them.
    """
    head = [p for p in ranked[: rule.window] if p[0] in candidates]
    if len(head) < 2:
        return list(ranked), {}
    # Sorted by (time, seq): the result depends on the candidates, never on how they came.
    cands = sorted((candidates[seq] for seq, _ in head), key=lambda c: (c.observed_at, c.seq))
    pairs = _similar(cands, rule)
    read: dict[int, About | None] = {}
    replaced_by: dict[int, list[int]] = {}  # older seq -> newer seqs about the same subject
    for i, j in sorted(pairs):
        for k in (i, j):
            if k not in read:
                read[k] = _stating(cands[k].text)
        a, b = read[i], read[j]
        if a is not None and b is not None and a.subject == b.subject:
            replaced_by.setdefault(cands[i].seq, []).append(cands[j].seq)
    if not replaced_by:
        return list(ranked), {}
    by_seq = {c.seq: c for c in cands}
    rank = {seq: place for place, (seq, _) in enumerate(head)}
    score = dict(head)
    order: list[int] = []
    placed: set[int] = set()

    def place(seq: int) -> None:
        # Every newer item about the same subject goes first (in rank order, each with
        # its own newer ones before it); time only grows along these links, so no cycle.
        if seq in placed:
            return
        placed.add(seq)
        for newer in sorted(replaced_by.get(seq, ()), key=rank.__getitem__):
            place(newer)
        order.append(seq)

    for seq, _ in head:
        if seq not in placed:
            # Held back until its newer items are placed, then placed itself.
            place(seq)
    marks = {
        older: by_seq[max(newer, key=lambda s: (by_seq[s].observed_at, s))].id
        for older, newer in replaced_by.items()
    }
    moved = [(seq, score[seq]) for seq in order]
    rest = [p for p in ranked if p[0] not in score]
    return moved + rest, marks
