"""Belief extraction from conversation turns: the offline rules, and the plug-in port.

The default :class:`RuleExtractor` reads what the user said (never the
assistant: an assistant's guess is no belief about the user) one whole
clause at a time: a sentence is cut at semicolons, at a conjunction before a
new subject ("..., and my wife Ana works at Apple"), and before a
subordinate or relative clause, so a belief is never half a sentence. A
question states nothing; a sentence with a condition ("... if I could"), or
a clause after a hypothetical (:mod:`memseal.engine.aboutness`: "I might
move to Berlin", "If I ever worked abroad, ...") states nothing either.

A clause gives a belief when a rule reads all of it, subject first: the
user ("I", "we", "my partner and I") or another person (the name
:func:`~memseal.engine.aboutness.sentences` reads, a bare name, "he"/"she"
after one), past opening words ("so", "since March,", "I think"). The forms
cover homes, work, the user's people ("since March my manager is Priya"),
likes, preferences, decisions, plans and activities, each with its updates,
negations and stops ("we relocated to", "I left Acme", "I gave up running",
"no longer", "not ... any more", "we cancelled the trip"). Confidence: facts
0.9, plans, activities and decisions 0.85, preferences 0.8; a hedge said
before the clause (I think, maybe) lowers it to 0.6.

A belief names its subject in its text ("The user lives in Lisbon.",
"Tomas has a new job.") and, for what has one value at a time, a
``subject`` key (``lives_in``, ``works_at``, ``my:<k>``, ``does:<activity
stem>``, ``plan:<thing>``, ...; another person's ``about:<person>/<key>``).
A later belief with the same key and another text supersedes it, so a stop
or a negation ("The user no longer works at Acme.") replaces the fact it
ends.

Days a sentence names relative to when it was said ("yesterday", "last
Tuesday", "in 3 days", "on 3 March") are read at the turn's time
(:attr:`SourceTurn.at`, the conversation item's ``observed_at``) in the
extractor's zone, as the engine reads them (``memseal.engine._dates``): the
phrase leaves the belief's text, the day is appended (``"Decided: ship (on
2026-12-04)."``) and listed in :attr:`Belief.refers_to`. A turn without a
time keeps its phrases as they are.

Deterministic: the same turns give the same beliefs, in the same order, so
a job re-run after a crash plans the same writes. A model extractor is any
object with the :class:`Extractor` method; it must be deterministic too, or
its job be run once (a resumed job replays its recorded writes by key).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, date, tzinfo
from typing import Final, Protocol, runtime_checkable

import msgspec

from memseal.engine._dates import extract_refs, resolve
from memseal.engine.aboutness import SOMEONE, Sentence, sentences
from memseal.ledger.errors import InvalidRequest

from ._belief_rules import (
    BREAK,
    CONTRACTIONS,
    DETERMINERS,
    END,
    HEDGE,
    KEY_SYNONYMS,
    LEAD,
    LIGHT_VERBS,
    MONTH_NAMES,
    MY_RELATION,
    NAMED,
    NOT_PEOPLE,
    PAST,
    PERSON,
    POINTERS,
    PREPOSITIONS,
    PRONOUN_SUBJECT,
    RULES,
    SPEAKER,
    TAIL_WORDS,
    THE_USERS,
    BeliefKind,
    Rule,
)

__all__ = ["Belief", "Extractor", "RuleExtractor", "SourceTurn", "parse_turns", "turn_days"]

#: The sentence reading (:mod:`memseal.engine.aboutness`) the rule extractor reads with,
#: pinned: a recorded belief job is replayed by re-running the rules, so every job
#: recorded so far read with reading 3, and a newer reading would draw other beliefs
#: from the same turns. Reading with a newer one needs a versioned extractor whose
#: version is recorded with the job.
_READING: Final = 3


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
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH_NAMES}\b\.?{_NO_YEAR}|"
    rf"{MONTH_NAMES}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b{_NO_YEAR}(?!:)"
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


def _compile(rule: Rule) -> list[tuple[str, re.Pattern[str]]]:
    """The rule's patterns, each with whose clause it reads ("user" or "person")."""
    out: list[tuple[str, re.Pattern[str]]] = []
    if rule.who in ("user", "any"):
        out.append(("user", re.compile(rf"^{SPEAKER}\s+{rule.pattern}{END}", re.I)))
    if rule.who in ("person", "any"):
        out.append(("person", re.compile(rf"^{PERSON}\s+{rule.pattern}{END}", re.I)))
    if rule.who == "identity":
        out.append(("identity", re.compile(rf"^{rule.pattern}{END}", re.I)))
    return out


_COMPILED: Final = tuple((rule, _compile(rule)) for rule in RULES)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def _stem(word: str) -> str:
    """A word's crude stem, so "running", "run" and "runs" share a key."""
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
        if len(word) >= 3 and word[-1] == word[-2] and word[-1] not in "aeiousl":
            word = word[:-1]
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def _activity_key(phrase: str) -> str:
    """What an activity is, whatever verb it came with: "go running every day", "gave up
    running" and "do not run" are all ``run``."""
    words = re.findall(r"[a-z]+", phrase.lower())
    while words and words[0] in LIGHT_VERBS:
        words.pop(0)
    kept: list[str] = []
    for word in words:
        if word in TAIL_WORDS or len(kept) == 2:
            break
        if word not in DETERMINERS:
            kept.append(_stem(word))
    return "-".join(kept) or _slug(phrase)


def _head(phrase: str) -> str:
    """The thing a plan is ("the trip to Japan", "our Japan trip": ``trip``): the last word
    before the first preposition, less the determiners."""
    words = [w for w in re.findall(r"[a-z]+", phrase.lower()) if w not in DETERMINERS]
    before: list[str] = []
    for word in words:
        if word in PREPOSITIONS and before:
            break
        before.append(word)
    return _stem(before[-1]) if before else _slug(phrase)


def _third(verb: str) -> str:
    """``verb`` as "the user" says it: "run" -> "runs", "go" -> "goes"."""
    irregular = {"be": "is", "have": "has", "do": "does", "go": "goes"}
    if verb in irregular:
        return irregular[verb]
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def _key_of(rule: Rule, parts: dict[str, str], person: str | None) -> str | None:
    if rule.key is None:
        return None
    k = _slug(re.sub(r"^(?:new|current)\s+", "", parts.get("k", "")))
    key = rule.key.format(
        k=KEY_SYNONYMS.get(k, k),
        v=_slug(parts.get("v", "")),
        act=_activity_key(f"{parts.get('act', '')} {parts.get('v', '')}"),
        head=_head(parts.get("v", "")),
    )
    # Another person's fact is theirs: its key never meets the user's.
    return key if person is None else f"about:{_slug(person.removeprefix(THE_USERS))}/{key}"


# A month or a weekday is a time, never a person a fact is about ("May" the name loses).
_WHEN_WORD: Final = re.compile(rf"{MONTH_NAMES}|(?:mon|tues|wednes|thurs|fri|satur|sun)day", re.I)


def _person(who: str, subject: str | None, named: str | None) -> str | None:
    """Who the clause's person is, as a belief names them: the name :mod:`aboutness` read,
    the one a pronoun refers to, a bare name, or "The user's <relation>"; None if unknown."""
    if subject is not None and subject != SOMEONE:
        # "since March, ..." cut at "since" leaves a month where a name would stand.
        return None if _WHEN_WORD.fullmatch(subject) else subject
    if PRONOUN_SUBJECT.match(who):
        return named
    if who.lower().startswith("my "):
        relation = " ".join(who[3:].replace(",", " ").split())
        return f"{THE_USERS}{relation}" if relation else None
    name = who.split(",")[0].strip()
    if name.lower() in NOT_PEOPLE or not name[:1].isupper() or _WHEN_WORD.fullmatch(name):
        return None
    return name


def _clause_belief(clause: str, subject: str | None, named: str | None) -> Belief | None:
    """The belief one whole clause states, if one of the rules reads all of it."""
    for rule, patterns in _COMPILED:
        for whose, pattern in patterns:
            if whose == "user" and subject is not None:
                continue
            match = pattern.match(clause)
            if match is None:
                continue
            parts = {k: " ".join(v.split()) for k, v in match.groupdict().items() if v}
            if whose == "identity" and subject is not None and not _named_relation(parts):
                continue
            if parts.get("v", "").lower() in POINTERS:
                continue
            person = None
            if whose == "person":
                person = _person(parts.get("who", ""), subject, named)
                if person is None:
                    continue
            elif "act" in parts:
                parts["act"] = _third(parts["act"].lower())
            if "verb" in parts:
                verb = parts["verb"].lower()
                parts["verb"] = PAST.get(verb, _third(verb) if verb in ("go", "play") else verb)
            key = _key_of(rule, parts, person)
            parts["who"] = person or "The user"
            if whose == "user" and "v" in parts:
                # The belief speaks of the user: "I love my job" is "likes their job".
                parts["v"] = re.sub(r"\b(?:my|our)\b", "their", parts["v"])
            text = rule.template.format_map(defaultdict(str, parts))
            text = re.sub(r"\s+([.,])", r"\1", " ".join(text.split()))
            return Belief(
                text=text,
                kind=rule.kind,
                confidence=rule.confidence,
                subject=key,
                preference=rule.preference,
            )
    return None


def _named_relation(parts: dict[str, str]) -> bool:
    """Whether an "identity" form names who the user's relation is ("Priya is my manager",
    "my manager has been Priya"): the user's fact though :mod:`aboutness` read a person."""
    return "k" in parts and re.fullmatch(NAMED, parts.get("v", "")) is not None


def _clauses(sentence: str) -> list[str] | None:
    """``sentence`` cut into whole clauses, each less its opening words ("so", "since
    March,", "I think"); None when one clause is a condition (nothing is stated)."""
    out: list[str] = []
    start = 0
    for cut in BREAK.finditer(sentence):
        if cut.group("cond"):
            return None
        if cut.group("said"):
            # What was said is reported, not stated: the clause before it states nothing.
            return out
        out.append(sentence[start : cut.start()].strip())
        start = cut.end()
    out.append(sentence[start:].strip())
    return [part for part in out if part]


def _normalise(text: str) -> str:
    text = text.replace("\u2019", "'")
    for pattern, replacement in CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


def _sentence_beliefs(
    sentence: Sentence, item: str, named: str | None, at: str | None, zone: tzinfo
) -> tuple[list[Belief], str | None]:
    """The beliefs of one sentence, clause by clause, and the person last named."""
    said = _normalise(sentence.text)
    days: list[date] = []
    if at is not None:
        said, days = turn_days(said, at, zone)
    clauses = _clauses(said)
    if clauses is None:
        return [], named
    found: list[Belief] = []
    prefix = ""
    for said_clause in clauses:
        prefix = f"{prefix} {said_clause}".strip()
        clause = LEAD.sub("", said_clause).strip()
        (read, *_) = sentences(clause, _READING) or (Sentence(text=clause),)
        if sentence.hypothetical and not all(s.states for s in sentences(prefix, _READING)):
            # A condition or an unreal mood earlier in the sentence governs this clause.
            return found, named
        if not read.states:
            continue
        belief = _clause_belief(clause, read.subject, named)
        if read.subject not in (None, SOMEONE):
            named = read.subject
        elif read.subject == SOMEONE and (relation := MY_RELATION.match(clause)):
            named = f"{THE_USERS}{relation.group(1).lower()}"
        if belief is None:
            continue
        found.append(_finish(belief, prefix, said, item, days, at))
    return found, named


def _finish(
    belief: Belief, prefix: str, said: str, item: str, days: list[date], at: str | None
) -> Belief:
    """``belief`` with its source, its days, and a hedge said before it ("I think")."""
    text = belief.text
    named = {d.isoformat() for d in days}
    if days:
        text = f"{text.rstrip('.')} (on {', '.join(d.isoformat() for d in days)})."
    if at is not None:
        # A full date left in the text is a day the statement names too.
        named.update(ref[2:] for ref in extract_refs(said) if ref.startswith("d:"))
    return msgspec.structs.replace(
        belief,
        text=text,
        confidence=0.6 if HEDGE.search(prefix) else belief.confidence,
        sources=(item,),
        refers_to=tuple(sorted(named)),
    )


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
        named: str | None = None
        for turn in turns:
            if turn.role != "user":
                continue
            for sentence in sentences(f"user: {turn.text}", _READING):
                if sentence.question:
                    continue
                beliefs, named = _sentence_beliefs(sentence, turn.item, named, turn.at, self.zone)
                found.extend(beliefs)
        last: dict[str, int] = {}
        for index, belief in enumerate(found):
            last[belief.subject or f"#{belief.text}"] = index
        kept = sorted(last.values())
        return [found[index] for index in kept]
