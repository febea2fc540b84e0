"""What a model is handed from memory: a ContextPack, its sections and items, as markdown.

The shape only: :mod:`memseal.tools.context` fills one (context.md) and the
lifecycle's holistic recall (:mod:`memseal.apps.lifecycle.pack`) another; both
count a budget in :func:`count_tokens`. It sits in the tools layer because
context.md does, and the apps above it only import it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from memseal.engine.aboutness import SOMEONE

__all__ = [
    "CHARS_PER_TOKEN",
    "REACHES",
    "ContextPack",
    "PackItem",
    "PackSection",
    "ReachName",
    "count_tokens",
    "render_markdown",
]

ReachName = Literal["own", "team", "brain", "thread"]
#: The reaches a pack may read, in the order sections are usually shown.
REACHES: Final[tuple[ReachName, ...]] = ("thread", "own", "team", "brain")
#: What a budget counts a token as: four characters (context.md's count, and every pack's).
CHARS_PER_TOKEN: Final = 4


def count_tokens(text: str) -> int:
    """The tokens ``text`` counts for a budget: four characters a token, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class PackItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One memory in a pack, with what a model needs to weigh it (its JSON leaves out
    the fields left unset, as a fetch hit's does)."""

    id: str
    kind: str
    text: str
    trust: str
    observed_at: str
    ledger_ref: int
    confidence: float | None = None
    score: float | None = None
    #: The seq of the newest statement the item holds: its own entry's, or for a
    #: compaction summary the newest turn it folded (what supersession compares).
    as_of: int = 0
    #: The text only supposes ("if I ever moved..."): no fact (:mod:`memseal.engine.aboutness`).
    hypothetical: bool = False
    #: Whose fact: None for the user's, else the other person's name or "someone".
    subject: str | None = None
    #: The id of a newer memory about the same subject (the read's mark: a pack leaves
    #: the item out when it shows the newer one).
    superseded_by: str | None = None


class PackSection(msgspec.Struct, frozen=True, kw_only=True):
    """A section: the reach it was read from, its title and the items kept.

    A prose section (context.md's briefs: a recall's answer) has no items but an
    ``answer`` and the ids it ``cites``.
    """

    reach: ReachName
    title: str
    items: tuple[PackItem, ...]
    answer: str | None = None
    cites: tuple[str, ...] = ()

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids this section cites."""
        return (*self.cites, *(item.id for item in self.items))


class ContextPack(msgspec.Struct, frozen=True, kw_only=True):
    """What holistic recall hands a model: budgeted sections citing ids and trust.

    ``tokens`` is :func:`count_tokens` of :meth:`markdown`, always at most
    ``budget_tokens``; ``dropped`` counts the items left out for the
    budget; ``superseded`` lists the ids dropped for a newer statement.
    """

    preset: str
    title: str
    query: str
    budget_tokens: int
    tokens: int
    sections: tuple[PackSection, ...]
    superseded: tuple[str, ...] = ()
    dropped: int = 0

    @property
    def ids(self) -> tuple[str, ...]:
        """Every id the pack cites, in the order it shows them."""
        return tuple(i for section in self.sections for i in section.ids)

    @property
    def empty(self) -> bool:
        """Whether the pack holds nothing."""
        return not self.sections

    def markdown(self) -> str:
        """The pack as markdown (what the budget bounds); empty when the pack is."""
        return render_markdown(self.title, self.sections)

    def to_json(self) -> bytes:
        """The pack as JSON (its msgspec form)."""
        return msgspec.json.encode(self)


def _line(item: PackItem) -> str:
    label = item.kind if item.confidence is None else f"{item.kind}, {item.confidence:g}"
    marks = [item.trust]
    if item.hypothetical:
        marks.append("hypothetical")
    if item.subject is not None:
        marks.append("about someone else" if item.subject == SOMEONE else f"about {item.subject}")
    if item.superseded_by is not None:
        marks.append(f"replaced by {item.superseded_by}")
    return f"- ({label}; {'; '.join(marks)}) {item.text} [{item.id}]"


def render_markdown(title: str, sections: Sequence[PackSection]) -> str:
    """The markdown of a pack's sections (empty when there are none)."""
    shown = [s for s in sections if s.items or s.answer]
    if not shown:
        return ""
    parts = [f"# {title}"]
    for section in shown:
        body = section.answer if section.answer else "\n".join(_line(i) for i in section.items)
        parts.append(f"## {section.title}\n{body}")
    return "\n\n".join(parts) + "\n"
