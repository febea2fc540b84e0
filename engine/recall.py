"""``recall``: an answer to a question, built from the best hits and citing them.

The engine fetches the best hits for the question (hybrid when it serves
it, else exact; confined like every read) and hands them to an
:class:`Answerer`. The default, :class:`ExtractiveAnswerer`, writes no new
text: it takes the best passage (sentence or line) of each hit, in rank
order, until a character budget is spent, and marks each with ``[n]``
pointing at its citation. It is deterministic: the same hits give the same
answer, byte for byte. It ignores ``instructions``; a host that plugs in a
model (any object with an async ``answer`` method) receives them.

Whatever an answerer returns, the engine keeps only citations of items
among the hits it was given: an answerer cannot cite memory the read was
not allowed to see. It also notes every hit it handed the answerer
(``drawn_from``), cited or not: what a forget of any of them must reach.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

import msgspec

from memseal.ledger.errors import InvalidRequest

from ._ranking import STOPWORDS
from .items import Hit

__all__ = [
    "DEFAULT_BUDGET",
    "NO_ANSWER",
    "Answerer",
    "Citation",
    "ExtractiveAnswerer",
    "Recollection",
    "check_answerer",
]

DEFAULT_BUDGET: Final = 1_200
NO_ANSWER: Final = "No stored memory matches the question."
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w+")
_STEM: Final = 5


class Citation(msgspec.Struct, frozen=True, kw_only=True):
    """One cited passage: ``ref`` is the ``[n]`` mark in the answer."""

    ref: int
    id: str
    kind: str
    text: str
    score: float


class Recollection(msgspec.Struct, frozen=True, kw_only=True):
    """A recall's answer and the stored items it cites.

    ``drawn_from`` (set by the engine, whatever an answerer says) lists the id of every
    hit the answerer was given: an answer may quote a hit it does not cite, so a recorded
    recall mentions them all, and forgetting any of them erases the answer.
    """

    answer: str
    citations: tuple[Citation, ...]
    drawn_from: tuple[str, ...] = ()


@runtime_checkable
class Answerer(Protocol):
    """Turns a question and its hits into ``{answer, citations}``."""

    async def answer(
        self, question: str, hits: Sequence[Hit], *, instructions: str | None
    ) -> Recollection:
        """Answer ``question`` from ``hits`` alone, citing the hits it used."""


def check_answerer(value: object) -> Answerer | None:
    """``value`` if None or an :class:`Answerer`, else :class:`InvalidRequest` (before a
    recall would meet it)."""
    if value is None or isinstance(value, Answerer):
        return value
    raise InvalidRequest(
        "`answerer` must be None (the extractive answerer) or an object with an async "
        f"`answer(question, hits, *, instructions)` method, not a {type(value).__name__}"
    )


def _terms(text: str) -> set[str]:
    # A crude, deterministic stem: the first five characters of each non-stopword.
    return {w[:_STEM] for w in _WORD.findall(text.casefold()) if w not in STOPWORDS}


def _best_passage(text: str, terms: set[str]) -> str:
    passages = [p.strip() for p in _SPLIT.split(text) if p.strip()]
    if not passages:
        return text.strip()
    best, best_score = passages[0], -1
    for passage in passages:
        score = len(_terms(passage) & terms)
        if score > best_score:  # strictly greater: the earliest of equals wins
            best, best_score = passage, score
    return best


def _clip(text: str, room: int) -> str:
    if len(text) <= room:
        return text
    cut = text[: max(room - 1, 0)]
    space = cut.rfind(" ")
    if space > room // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


class ExtractiveAnswerer:
    """The default answerer: cited best passages within ``budget`` characters."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        if isinstance(budget, bool) or not isinstance(budget, int) or not 40 <= budget <= 100_000:
            raise InvalidRequest("`budget` must be an integer from 40 to 100000 characters")
        self.budget = budget

    async def answer(
        self, question: str, hits: Sequence[Hit], *, instructions: str | None = None
    ) -> Recollection:
        """The best passages of ``hits`` for ``question``, cited, within the budget."""
        if not hits:
            return Recollection(answer=NO_ANSWER, citations=())
        terms = _terms(question)
        parts: list[str] = []
        citations: list[Citation] = []
        used = 0
        for hit in hits:
            passage = _best_passage(hit.item.text, terms)
            mark = f" [{len(citations) + 1}]"
            room = self.budget - used - len(mark) - (1 if parts else 0)
            if room <= 0:
                break
            if len(passage) > room:
                if parts:
                    break  # the next passage does not fit whole; stop at the budget
                passage = _clip(passage, room)
            parts.append(passage + mark)
            used += len(passage) + len(mark) + (1 if len(parts) > 1 else 0)
            citations.append(
                Citation(
                    ref=len(citations) + 1,
                    id=hit.item.id,
                    kind=hit.item.kind,
                    text=passage,
                    score=hit.score,
                )
            )
        return Recollection(answer=" ".join(parts), citations=tuple(citations))
