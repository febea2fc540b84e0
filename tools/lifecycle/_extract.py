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

Days a sentence names relative to when it was said ("yesterday", "last
Tuesday", "in 3 days", "on 3 March") are read at the turn's time
(:attr:`SourceTurn.at`, the conversation item's ``observed_at``) in the
extractor's zone, as the engine reads them (``memseal.engine._dates``): the
phrase leaves the belief's text, the day is appended (``"Decided: ship (on
2026-12-04)."``) and listed in :attr:`Belief.refers_to`. A belief is stored
later than its turn, so a "yesterday" left in its text would name the wrong
day; an absolute date names the right one whenever it is read, and the
engine indexes it for ``refers_to`` searches. A turn without a time keeps
its phrases as they are.

Deterministic: the same turns give the same beliefs, in the same order, so
a job re-run after a crash plans the same writes. A model extractor is any
object with the :class:`Extractor` method; it must be deterministic too, or
its job be run once (a resumed job replays its recorded writes by key).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, tzinfo
from typing import Final, Literal, Protocol, runtime_checkable

import msgspec

from memseal.engine._dates import extract_refs, resolve
from memseal.ledger.errors import InvalidRequest

__all__ = ["Belief", "Extractor", "RuleExtractor", "SourceTurn", "parse_turns", "turn_days"]

BeliefKind = Literal["fact", "decision"]


class SourceTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One turn a belief may come from: the conversation item's id, who spoke, what, and
    when (``at``: RFC 3339, the item's ``observed_at``; None when not known)."""

    item: str
    role: str
    text: str
    at: str | None = None


class Belief(msgspec.Struct, frozen=True, kw_only=True):
    """A learning drawn from turns: its text, kind, confidence, subject and source items."""

    text: str
    kind: BeliefKind = "fact"
    confidence: float = 0.8
    subject: str | None = None
    sources: tuple[str, ...] = ()
    preference: bool = False
    #: The days the statement names (ISO dates, sorted), read at its turn's time.
    refers_to: tuple[str, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """What draws beliefs from turns (the rules, or a model the host plugs in).

    The plug-in point for a model: an extractor that does not set ``deterministic =
    True`` has its output recorded in the job's run and replayed from it (see
    :mod:`._model_extract`).
    """

    async def extract(self, turns: Sequence[SourceTurn]) -> Sequence[Belief]:
        """The beliefs ``turns`` state, in order (a later one may supersede an earlier)."""
        ...


_ROLE_LINE = re.compile(r"^([a-z][a-z0-9_-]{0,31}): ?(.*)$")


def parse_turns(item: str, text: str, at: str | None = None) -> list[SourceTurn]:
    """The turns of a stored conversation item, whose text is ``role: text`` lines, said
    at ``at`` (the item's ``observed_at``).

    A line that does not start with a role continues the turn before it.
    """
    turns: list[list[str]] = []
    for line in text.split("\n"):
        match = _ROLE_LINE.match(line)
        if match is not None:
            turns.append([match.group(1), match.group(2)])
        elif turns:
            turns[-1][1] += "\n" + line
    return [SourceTurn(item=item, role=role, text=said, at=at) for role, said in turns]


_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_MONTH_NAMES = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT = r"(?:\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|a)"
_NO_YEAR = r"(?!\s*,?\s*\d{4})"
#: The phrases that name a day relative to when they were said (a date with its year is
#: absolute and stays in the text). A leading "on" goes with the phrase; a bare weekday
#: counts only after "on" ("my favourite day is Monday" names no day).
_RELATIVE_DAY = re.compile(
    r"(?:\bon\s+)?\b(?:"
    r"the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tonight|"
    r"tomorrow|"
    rf"{_COUNT}\s+(?:day|week)s?\s+ago|in\s+{_COUNT}\s+(?:day|week)s?|"
    rf"(?:last|this|next)\s+{_WEEKDAYS}|(?<=on ){_WEEKDAYS}|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_NAMES}\b\.?{_NO_YEAR}|"
    rf"{_MONTH_NAMES}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b{_NO_YEAR}(?!:)"
    r")\b",
    re.IGNORECASE,
)


def turn_days(sentence: str, at: str, zone: tzinfo = UTC) -> tuple[str, list[date]]:
    """``sentence`` less the phrases naming a day relative to ``at`` (RFC 3339), and the
    days they name, read in ``zone`` as the engine reads them; in order, unique.

    >>> turn_days("We decided yesterday to use Go.", "2026-12-02T09:00:00Z")
    ('We decided to use Go.', [datetime.date(2026, 12, 1)])
    """
    days: list[date] = []

    def cut(match: re.Match[str]) -> str:
        refs = extract_refs(match.group(0))
        if refs:
            for day in sorted(resolve(refs, at, zone)):
                if day not in days:
                    days.append(day)
        return " "

    rest = _RELATIVE_DAY.sub(cut, sentence)
    rest = re.sub(r"\s+([,.!?;])", r"\1", " ".join(rest.split()))
    return rest, days


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


def _sentence_beliefs(
    sentence: str, item: str, at: str | None = None, zone: tzinfo = UTC
) -> Belief | None:
    said = sentence.strip()
    if not said or said.endswith("?"):
        return None
    days: list[date] = []
    if at is not None:
        said, days = turn_days(said, at, zone)
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
        named = {d.isoformat() for d in days}
        if days:
            text = f"{text.rstrip('.')} (on {', '.join(d.isoformat() for d in days)})."
        if at is not None:
            # A full date left in the text is a day the statement names too.
            named.update(ref[2:] for ref in extract_refs(said) if ref.startswith("d:"))
        return Belief(
            refers_to=tuple(sorted(named)),
            text=text,
            kind=kind,
            confidence=confidence,
            subject=topic,
            sources=(item,),
            preference=preference,
        )
    return None


class RuleExtractor:
    """The default, offline and deterministic extractor (see the module docstring).

    ``zone`` is where the days a turn names are read (default UTC), as a session's is.
    """

    #: The same turns give the same beliefs: a job need not record what it drew.
    deterministic: Final = True

    def __init__(self, *, zone: tzinfo = UTC) -> None:
        if not isinstance(zone, tzinfo):
            raise InvalidRequest(
                "`zone` must be a tzinfo, such as zoneinfo.ZoneInfo('Europe/Lisbon')"
            )
        self.zone = zone

    async def extract(self, turns: Sequence[SourceTurn]) -> Sequence[Belief]:
        """The beliefs the user's turns state; of several with one subject, the last."""
        found: list[Belief] = []
        for turn in turns:
            if turn.role != "user":
                continue
            for match in _SENTENCE.finditer(turn.text):
                belief = _sentence_beliefs(match.group(0), turn.item, turn.at, self.zone)
                if belief is not None:
                    found.append(belief)
        last: dict[str, int] = {}
        for index, belief in enumerate(found):
            last[belief.subject or f"#{belief.text}"] = index
        kept = sorted(last.values())
        return [found[index] for index in kept]
