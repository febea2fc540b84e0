"""What the currency rule reads of one text: the same for every read that meets it.

Whether a text only asks, what it states and about whom (:mod:`.aboutness`), and
its stemmed content words: each a pure function of the text, read once into a
:class:`Reading` and kept in the read memo (:mod:`._rule_memo`) under the key a
read names the text by, so the next read that meets the text reads none of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ._dialect import index_words
from ._ranking import STOPWORDS
from ._rule_memo import kept_many
from .aboutness import About, about_read, sentences

if TYPE_CHECKING:
    from .currency import Candidate, Rule

__all__ = ["Reading", "overlap", "readings", "stems"]

_WORD: Final = re.compile(r"\w+")
_SPEAKER: Final = re.compile(r"^[a-z][a-z0-9_-]{0,31}: ?", re.M)


def stems(text: str, chars: int) -> frozenset[str]:
    """The stemmed content words of ``text``'s first ``chars`` characters."""
    # A conversation's role names open every line: they say nothing about its subject.
    words = _WORD.findall(_SPEAKER.sub("", text[:chars]).casefold())
    return frozenset(index_words(" ".join(w for w in words if w not in STOPWORDS)).split())


def overlap(a: frozenset[str], b: frozenset[str], shared: int) -> float:
    """The binary cosine of two texts' :func:`stems`, rounded to four places (0.0 when
    they share fewer than ``shared``)."""
    common = len(a & b)
    if common < shared:
        return 0.0
    return round(common / math.sqrt(len(a) * len(b)), 4)


class Reading:
    """What the rule reads of one text: whether it only asks, what it states (None: it
    states nothing, or only supposes) and, when a lexical read first asks, its stemmed
    content words. A pure function of the text (so the read memo may keep it)."""

    __slots__ = ("asks", "stating", "stems")

    def __init__(self, text: str, reading: int) -> None:
        read = sentences(text, reading)
        states = any(s.states for s in read)
        self.asks = not states and any(s.question for s in read)
        found = about_read(read) if states else None
        # As the rule's reference reads it: a text stating only what it supposes states none.
        self.stating: About | None = None if found is None or found.hypothetical else found
        self.stems: frozenset[str] | None = None

    def words(self, text: str, chars: int) -> frozenset[str]:
        """:func:`stems` of ``text`` (the text this reads), read on the first ask and kept."""
        if self.stems is None:
            self.stems = stems(text, chars)
        return self.stems


def readings(cands: Sequence[Candidate], rule: Rule) -> list[Reading]:
    """Each candidate's :class:`Reading` under ``rule``, kept in the read memo by its key."""
    return kept_many(
        f"reading{rule.chars}/{rule.reading}",
        [c.key for c in cands],
        lambda i: Reading(cands[i].text, rule.reading),
    )
