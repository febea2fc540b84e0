"""Belief extraction from conversation turns: the offline rules, and the plug-in port.

The default :class:`RuleExtractor` reads what the user said (never the
assistant: an assistant's guess is no belief about the user) one sentence at
a time and keeps three things, each with a confidence:

=============  =====================================================  ==========
what           said as                                                confidence
=============  =====================================================  ==========
preference     I prefer / like / love / enjoy X; I don't like X;      0.8
               my favourite K is V
decision       we decided to X; let's go with X; we will use X        0.85
fact           I live in / moved to X; my name is X; I work at X;     0.9
               my K is V
=============  =====================================================  ==========

A hedge (I think, maybe, probably, perhaps, might) lowers the confidence to
0.6, and a question is never a belief. A belief about something that can
only have one value at a time (where the user lives, their name, their
favourite colour, whether they like X) has a ``subject``; a later belief
with the same subject and another text supersedes it.

Deterministic: the same turns give the same beliefs, in the same order, so
a job re-run after a crash plans the same writes. A model extractor is any
object with the :class:`Extractor` method; it must be deterministic too, or
its job be run once (a resumed job replays its recorded writes by key).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal, Protocol, runtime_checkable

import msgspec

__all__ = ["Belief", "Extractor", "RuleExtractor", "SourceTurn", "parse_turns"]

BeliefKind = Literal["fact", "decision"]


class SourceTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One turn a belief may come from: the conversation item's id, who spoke, what."""

    item: str
    role: str
    text: str


class Belief(msgspec.Struct, frozen=True, kw_only=True):
    """A learning drawn from turns: its text, kind, confidence, subject and source items."""

    text: str
    kind: BeliefKind = "fact"
    confidence: float = 0.8
    subject: str | None = None
    sources: tuple[str, ...] = ()
    preference: bool = False


@runtime_checkable
class Extractor(Protocol):
    """What draws beliefs from turns (the rules, or a model the host plugs in)."""

    async def extract(self, turns: Sequence[SourceTurn]) -> Sequence[Belief]:
        """The beliefs ``turns`` state, in order (a later one may supersede an earlier)."""
        ...


_ROLE_LINE = re.compile(r"^([a-z][a-z0-9_-]{0,31}): ?(.*)$")


def parse_turns(item: str, text: str) -> list[SourceTurn]:
    """The turns of a stored conversation item, whose text is ``role: text`` lines.

    A line that does not start with a role continues the turn before it.
    """
    turns: list[list[str]] = []
    for line in text.split("\n"):
        match = _ROLE_LINE.match(line)
        if match is not None:
            turns.append([match.group(1), match.group(2)])
        elif turns:
            turns[-1][1] += "\n" + line
    return [SourceTurn(item=item, role=role, text=said) for role, said in turns]


_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_HEDGE = re.compile(r"\b(i think|i guess|maybe|probably|perhaps|might|not sure)\b", re.I)
_VALUE = r"(?P<v>[^,;:()]{1,120}?)"
_END = r"\s*(?:now|these days|nowadays|any ?more)?\s*[.!]*$"

_Rule = tuple[re.Pattern[str], BeliefKind, str, str | None, float, bool]


def _rule(
    pattern: str,
    kind: BeliefKind,
    template: str,
    subject: str | None,
    confidence: float,
    preference: bool = False,
) -> _Rule:
    return (re.compile(pattern + _END, re.I), kind, template, subject, confidence, preference)


# First match wins: the specific forms before the general "my K is V".
_RULES: Final[tuple[_Rule, ...]] = (
    _rule(r"\bi(?:'ve| have)? (?:just |recently )?moved to " + _VALUE, "fact",
          "The user lives in {v}.", "lives_in", 0.9),
    _rule(r"\bi (?:now |currently )?live in " + _VALUE, "fact",
          "The user lives in {v}.", "lives_in", 0.9),
    _rule(r"\bmy name is " + _VALUE, "fact", "The user's name is {v}.", "name", 0.9),
    _rule(r"\bi (?:now )?work (?:at|for) " + _VALUE, "fact",
          "The user works at {v}.", "works_at", 0.9),
    _rule(r"\bmy favou?rite (?P<k>[a-z]+(?: [a-z]+)?) is " + _VALUE, "fact",
          "The user's favourite {k} is {v}.", "favourite:{k}", 0.8, True),
    _rule(r"\bi (?:don't|do not|no longer|never) (?:like|enjoy|want) " + _VALUE, "fact",
          "The user does not like {v}.", "likes:{v}", 0.8, True),
    _rule(r"\bi (?:really )?(?:like|love|enjoy) " + _VALUE, "fact",
          "The user likes {v}.", "likes:{v}", 0.8, True),
    _rule(r"\bi (?:much |strongly )?prefer " + _VALUE, "fact",
          "The user prefers {v}.", None, 0.8, True),
    _rule(r"\b(?:we|i) (?:have |'ve )?decided (?:to |on |that )?" + _VALUE, "decision",
          "Decided: {v}.", None, 0.85),
    _rule(r"\blet's (?:go with|use) " + _VALUE, "decision", "Decided: use {v}.", None, 0.85),
    _rule(r"\bwe(?:'ll| will) use " + _VALUE, "decision", "Decided: use {v}.", None, 0.85),
    _rule(r"\bmy (?P<k>[a-z]+(?: [a-z]+)?) is " + _VALUE, "fact",
          "The user's {k} is {v}.", "my:{k}", 0.9),
)  # fmt: skip


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def _sentence_beliefs(sentence: str, item: str) -> Belief | None:
    said = sentence.strip()
    if not said or said.endswith("?"):
        return None
    for pattern, kind, template, subject, confidence, preference in _RULES:
        match = pattern.search(said)
        if match is None:
            continue
        parts = {name: value.strip() for name, value in match.groupdict().items() if value}
        if not parts.get("v"):
            continue
        text = template.format(**parts)
        topic = None
        if subject is not None:
            topic = subject.format(**{name: _slug(value) for name, value in parts.items()})
        if _HEDGE.search(said):
            confidence = 0.6
        return Belief(
            text=text,
            kind=kind,
            confidence=confidence,
            subject=topic,
            sources=(item,),
            preference=preference,
        )
    return None


class RuleExtractor:
    """The default, offline and deterministic extractor (see the module docstring)."""

    async def extract(self, turns: Sequence[SourceTurn]) -> Sequence[Belief]:
        """The beliefs the user's turns state; of several with one subject, the last."""
        found: list[Belief] = []
        for turn in turns:
            if turn.role != "user":
                continue
            for match in _SENTENCE.finditer(turn.text):
                belief = _sentence_beliefs(match.group(0), turn.item)
                if belief is not None:
                    found.append(belief)
        last: dict[str, int] = {}
        for index, belief in enumerate(found):
            last[belief.subject or f"#{belief.text}"] = index
        kept = sorted(last.values())
        return [found[index] for index in kept]
