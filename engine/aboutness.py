"""What a text is about: whether it states something, and whose fact it is.

A memory's text may state a fact about the speaker ("we relocated to
Lisbon"), about someone else ("my brother Tomas has a new job"), or nothing
at all ("if I ever worked abroad I would live in Tokyo", "where do I live?").
A reader that ranks or extracts facts must tell these apart, and a model
given the memory should be told rather than left to guess from prose.

:func:`about` reads the sentence structure only: no model, no embedder, no
list of topics. Deterministic: the same text always gives the same
:class:`About` (reads that carry it are recorded and re-derived by replay).

Per sentence (:func:`sentences`):

- a **question** ends with ``?`` or opens as one ("where do I live",
  "can you remind me");
- a **hypothetical** (a question may be one too: "what if I moved?") is a
  conditional or an unreal mood: ``if``, ``suppose``, ``imagine``, ``what
  if``, ``in case``, ``wish``, ``someday``, ``thinking of``, or a modal
  after its subject (``I would``, ``we might``, ``I'd``, ``I could``), but
  not a stated want ("I would like", "I'd prefer") nor, from reading 2, a
  hedge on what is stated ("I suppose", "we guess", "I'd say": the speaker
  still states it);
- the **subject** is the first one the sentence names: the speaker (``I``,
  ``we``, ``my X and I``) is ``None``; a relation (``my brother``, ``my
  friend``, ``his``, ``she``) is the person it names ("my brother Tomas",
  "Ana, my sister") or ``"someone"``; a pronoun after a named person earlier
  in the same text is that person. "My manager is Priya" names the user's
  manager: the user's fact, from reading 2 also when a short qualifier stands
  between ("my manager at Acme is Priya", "my manager's name is Priya"). From
  reading 3, a sentence that opens with a person's name, possessive or before
  a verb ("Ingrid's nephew learned to swim", "Yusuf was promoted to head chef"), and
  nowhere names the speaker, is that person's fact.

Over a whole text (:func:`about`): a conversation's user lines are read
when it has any (an assistant's line states nothing about the user). The
text is hypothetical when at least one sentence is and none states a fact
plainly; its subject is the one every stating sentence shares (the
speaker's when any is theirs, ``"someone"`` for several others). Only the
first :data:`MAX_CHARS` characters are read: a long document is the
speaker's text, and reading it whole on every read would cost for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import msgspec

__all__ = [
    "MAX_CHARS",
    "READING",
    "SOMEONE",
    "About",
    "Sentence",
    "about",
    "about_read",
    "sentences",
]

#: The characters of a text :func:`about` reads (the rest is not weighed).
MAX_CHARS: Final = 4_000
#: The reading new reads follow. Each reading is frozen (the currency rule's versions
#: name theirs, and reads that carry what a text is about are re-derived): reading 1
#: as the rule's version 1 read; reading 2 adds the hedges and the qualified relations;
#: reading 3 the sentences that open with another person's name.
READING: Final = 3
#: The subject of a fact about another person whose name the text does not give.
SOMEONE: Final = "someone"


class About(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a text states a fact, and whose: ``subject`` is ``None`` for the speaker
    (the user), a name ("Tomas") or ``"someone"`` for another person."""

    hypothetical: bool = False
    subject: str | None = None


class Sentence(msgspec.Struct, frozen=True, kw_only=True):
    """One sentence of a text, read as :func:`about` reads it."""

    text: str
    question: bool = False
    hypothetical: bool = False
    subject: str | None = None

    @property
    def states(self) -> bool:
        """Whether the sentence states something as so (neither asks nor supposes)."""
        return not self.question and not self.hypothetical


_SPEAKER: Final = re.compile(r"^([a-z][a-z0-9_-]{0,31}): ?", re.M)
_SENTENCE: Final = re.compile(r"[^.!?\n]+(?:[.!?]+|$)", re.M)

_AUX: Final = (
    r"(?:do|does|did|is|are|was|were|am|can|could|would|should|will|shall|have|has|had|may"
    r"|might|must|isn't|aren't|wasn't|don't|doesn't|didn't|won't|can't|haven't|hasn't)"
)
_QUESTION_OPENING: Final = re.compile(
    r"^\W*(?:(?:and|so|but|also|oh|ok|okay|hey|btw|remind me)\W+)?(?:"
    rf"(?:what|where|when|who|whom|whose|which|why|how)(?:'s|\s+{_AUX}\b|\s+(?:much|many|long"
    rf"|often|far|old)\b)|{_AUX}\s+(?:i|you|we|he|she|they|it|my|your|our|the|there|anyone)\b)",
    re.I,
)
#: "I suppose", "we guess": the speaker hedging what they state, not supposing it.
_HEDGED: Final = r"(?<!\bi\s)(?<!\bwe\s)"
_CONDITIONAL_WORDS: Final = (
    r"|supposing|imagine|imagining|hypothetically|theoretically|in theory"
    r"|in case|what if|wish|wished|wonder|wondering|someday|some day|one day|dream of"
    r"|dreaming of|dreamt of|thinking of|thinking about|considering|fantasi[sz]e)\b"
)
#: A stated want ("I would like") supposes nothing; from reading 2 nor does a hedge
#: ("I'd say", "I would guess").
_WANTS: Final = "like|love|prefer|rather|enjoy|appreciate"


def _modal(wants: str) -> re.Pattern[str]:
    return re.compile(
        r"\b(?:i|we|you|he|she|they|it)(?:\s+(?:would|might|could|may)\b|'d\b)(?!\s+(?:have\s+)?"
        rf"(?:been|had)\b)(?!\s+(?:really\s+)?(?:{wants})\b)",
        re.I,
    )


_CONDITIONAL_2: Final = re.compile(rf"\b(?:if|{_HEDGED}suppose" + _CONDITIONAL_WORDS, re.I)
_MODAL_2: Final = _modal(_WANTS + "|say|guess|think")
#: Per reading: the conditional words and the unreal modal (reading 3 reads them as 2).
_CONDITIONAL: Final = {
    1: re.compile(r"\b(?:if|suppose" + _CONDITIONAL_WORDS, re.I),
    2: _CONDITIONAL_2,
    3: _CONDITIONAL_2,
}
_MODAL: Final = {1: _modal(_WANTS), 2: _MODAL_2, 3: _MODAL_2}

_RELATIONS: Final = (
    r"(?:brother|sister|sibling|mother|mom|mum|father|dad|parents?|wife|husband|partner"
    r"|spouse|fianc[eé]e?|boyfriend|girlfriend|son|daughter|kids?|child|children|baby"
    r"|friend|best friend|colleague|co-?worker|coworker|boss|manager|neighbou?r|cousin|uncle"
    r"|aunt|grand(?:mother|father|ma|pa|parents?)|nan|roommate|flatmate|housemate|niece"
    r"|nephew|teammate|landlord|landlady|doctor|therapist|teacher|student|mentor|client"
    r"|in-laws?|(?:mother|father|brother|sister)-in-law|stepmother|stepfather|stepson"
    r"|stepdaughter)"
)
_ADJECTIVES: Final = (
    r"(?:(?:little|older|younger|big|elder|best|new|old|oldest|youngest|eldest|twin|"
    r"ex-?|former|late|dear|close)\s*)*"
)
_NAME: Final = r"(?-i:[A-Z][a-z\u00e0-\u00ff]+(?:-[A-Z][a-z\u00e0-\u00ff]+)?)"
#: Capitalised words a sentence opens with or names a day by: never a person's name.
_NOT_NAMES: Final = frozenset(
    (
        *("I", "I'm", "I've", "I'd", "I'll", "The", "A", "An", "And", "But", "So", "Or"),
        *("Since", "Last", "Next", "This", "That", "Then", "Now", "Today", "Yesterday"),
        *("Tomorrow", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
        "Sunday",
    )
)
#: Words that open a sentence before ``'s`` or a verb and are no one's name: pronouns,
#: question words and the like (a closed class), and the months.
_NOT_OPENING_NAMES: Final = frozenset(
    (
        *("It", "There", "Here", "What", "Who", "Where", "When", "Why", "How", "Which"),
        *("Let", "He", "She", "They", "You", "Everyone", "Everything", "Someone"),
        *("Something", "Nobody", "Nothing", "Anyone", "Anything", "Everybody", "Somebody"),
        *("January", "February", "March", "April", "May", "June", "July", "August"),
        *("September", "October", "November", "December"),
    )
)
#: From reading 3: a sentence opening with a name's possessive or with a name before a
#: verb ("Ingrid's nephew learned to swim", "Yusuf was promoted") names that person first.
_NAMED_OPENING: Final = re.compile(rf"^\W*(?P<name>{_NAME})(?:'s\b|\s+{_AUX}\b)")
_SELF: Final = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|we'd|we'll|us|our)\b", re.I
)
_RELATION: Final = re.compile(
    rf"\bmy\s+{_ADJECTIVES}{_RELATIONS}(?:'s)?\b(?:,?\s+(?P<name>{_NAME})(?:'s)?\b)?", re.I
)
_APPOSITIVE: Final = re.compile(rf"\b(?P<name>{_NAME}),\s+my\s+{_ADJECTIVES}{_RELATIONS}\b", re.I)
_PRONOUN: Final = re.compile(r"\b(?:he|she|he's|she's|his|her|him)\b", re.I)
#: Per reading, who the user's relation is, their fact: "my manager is Priya", "my new
#: boss is now Dana"; from reading 2 also with a short qualifier of the relation (where,
#: which) between it and the verb, in the clause: "my manager at Acme is Priya", "my
#: boss's name is Dana".
_IDENTITY_2: Final = re.compile(
    r"^(?:(?:'s)?\s+name"
    r"|\s+(?:at|in|on|from|over|back|for|here|there|these|this|now)\b[^,;:()]{0,40}?)?"
    rf"\s*(?:is|was|'s|are)\s+(?:now\s+|still\s+|called\s+|named\s+)*{_NAME}"
)
_IDENTITY: Final = {
    1: re.compile(rf"^\s*(?:is|was|'s|are)\s+(?:now\s+|called\s+|named\s+)*{_NAME}"),
    2: _IDENTITY_2,
    3: _IDENTITY_2,
}
_WITH_SELF: Final = re.compile(r"^\s*(?:,\s*)?(?:and|&)\s+(?:i|me|myself)\b", re.I)


def _subject(sentence: str, named: str | None, reading: int) -> str | None:
    """The first subject ``sentence`` names (see the module docstring)."""
    if reading >= 3 and _SELF.search(sentence) is None:
        # Opened by someone named, and the speaker nowhere in it: that person's fact.
        opening = _NAMED_OPENING.match(sentence)
        if opening is not None:
            name = opening.group("name")
            if name not in _NOT_NAMES and name not in _NOT_OPENING_NAMES:
                return name
    # (place, rank, subject): at one place ("my brother ..."), the relation outranks "my".
    found: list[tuple[int, int, str | None]] = []
    self_match = _SELF.search(sentence)
    if self_match is not None:
        found.append((self_match.start(), 1, None))
    for match in _APPOSITIVE.finditer(sentence):
        if match.group("name") not in _NOT_NAMES:
            found.append((match.start(), 0, match.group("name")))
            break
    for match in _RELATION.finditer(sentence):
        name = match.group("name")
        if name in _NOT_NAMES:
            name = None
        rest = sentence[match.end() :]
        if name is None and (_IDENTITY[reading].match(rest) or _WITH_SELF.match(rest)):
            found.append((match.start(), 0, None))
        else:
            found.append((match.start(), 0, name or SOMEONE))
        break
    pronoun = _PRONOUN.search(sentence)
    if pronoun is not None:
        found.append((pronoun.start(), 0, named or SOMEONE))
    if not found:
        return None
    return min(found, key=lambda entry: (entry[0], entry[1]))[2]


def _statements(text: str) -> str:
    """The part of ``text`` whose sentences are weighed: a conversation's user lines."""
    text = text[:MAX_CHARS].replace("\u2019", "'")
    lines = text.split("\n")
    spoken = [(_SPEAKER.match(line), line) for line in lines]
    if not any(match is not None and match.group(1) == "user" for match, _ in spoken):
        return "\n".join(line if m is None else line[m.end() :] for m, line in spoken)
    kept: list[str] = []
    user = False
    for match, line in spoken:
        if match is not None:
            user = match.group(1) == "user"
            line = line[match.end() :]
        if user:
            kept.append(line)
    return "\n".join(kept)


def sentences(text: str, reading: int = READING) -> tuple[Sentence, ...]:
    """The sentences of ``text`` (a conversation's user lines when it has any), each
    read for question, hypothetical and subject as ``reading`` reads them; a pronoun
    takes the person named before it."""
    out: list[Sentence] = []
    named: str | None = None
    for match in _SENTENCE.finditer(_statements(text)):
        said = " ".join(match.group(0).split())
        if not any(ch.isalnum() for ch in said):
            continue
        question = said.endswith("?") or _QUESTION_OPENING.match(said) is not None
        hypothetical = (
            _CONDITIONAL[reading].search(said) is not None
            or _MODAL[reading].search(said) is not None
        )
        subject = _subject(said, named, reading)
        if subject not in (None, SOMEONE):
            named = subject
        out.append(
            Sentence(text=said, question=question, hypothetical=hypothetical, subject=subject)
        )
    return tuple(out)


def about(text: str, reading: int = READING) -> About:
    """Whether ``text`` only supposes, and whose fact it states, as ``reading`` reads it
    (see the module docstring)."""
    return about_read(sentences(text, reading))


def about_read(read: Sequence[Sentence]) -> About:
    """:func:`about` of the text whose :func:`sentences` are ``read``."""
    stating = [s for s in read if s.states]
    supposing = [s for s in read if s.hypothetical]
    weighed = stating or supposing or list(read)
    subjects = {s.subject for s in weighed}
    if not subjects or None in subjects:
        subject = None
    elif len(subjects) == 1:
        (subject,) = subjects
    else:
        subject = SOMEONE
    return About(hypothetical=bool(supposing) and not stating, subject=subject)
