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
#: reading 3 the sentences that open with another person's name; reading 4 the real
#: conditionals, objects of prepositions, organisations and more ways to name a person.
READING: Final = 4
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
#: From reading 4 a modal supposes after a pronoun ("she might move"); "may" the month
#: is no modal. A name or a bare noun before one (an opening "Aiko might go back to
#: university") and a wish ("a flat by the river would be nice") suppose only where the
#: speaker states nothing of their own (:data:`_OTHERS_MODAL_4`): in "rent could be lower
#: here, so I live in Berlin" the modal weighs a clause, not the user's fact.
_MODAL_4: Final = re.compile(
    r"(?:\b(?:i|we|you|he|she|they|it)'d\b|\b(?:i|we|you|he|she|they|it)"
    r"\s+(?:would|might|could|(?-i:may))\b)"
    rf"(?!\s+(?:have\s+)?(?:been|had)\b)(?!\s+(?:really\s+)?(?:{_WANTS}|say|guess|think)\b)",
    re.I,
)
_OTHERS_MODAL_4: Final = re.compile(
    r"^\W*(?-i:[A-Z][\w'-]*)\s+(?:would|might|could|(?-i:may))\b(?!\s+(?:have\s+)?(?:been|had)\b)"
    r"|\bwould\s+be\s+(?:so\s+|really\s+)?(?:nice|great|good|lovely|ideal|perfect|amazing"
    r"|wonderful|better|best|fun|cool)\b",
    re.I,
)
#: Per reading: the conditional words and the unreal modal (reading 3 reads them as 2;
#: reading 4 weighs a bare "if" apart, see :func:`_supposes`).
_CONDITIONAL: Final = {
    1: re.compile(r"\b(?:if|suppose" + _CONDITIONAL_WORDS, re.I),
    2: _CONDITIONAL_2,
    3: _CONDITIONAL_2,
    4: re.compile(rf"\b(?:if\s+only|{_HEDGED}suppose" + _CONDITIONAL_WORDS, re.I),
}
_MODAL: Final = {1: _modal(_WANTS), 2: _MODAL_2, 3: _MODAL_2, 4: _MODAL_4}
_IF: Final = re.compile(r"\bif\b", re.I)
#: An "if" of a set phrase supposes nothing ("if you need me, I live in Leeds").
_IDIOM_IF: Final = re.compile(
    r"\bif\s+(?:you\s+(?:need|want|ask)\s+me|memory\s+serves(?:\s+me)?|anyone\s+asks"
    r"|i'?m\s+(?:honest|being\s+honest)|i\s+(?:remember|recall)(?:\s+(?:rightly|correctly|right))?"
    r"|you\s+must\s+know|that\s+helps|it\s+helps|you\s+like|anything)\b",
    re.I,
)
#: An "if" that opens the sentence sets its condition first, as a supposition does ("if
#: I get the job, I move"): it supposes whatever the tense; a trailing one after what is
#: stated ("ten minutes if the lights are kind") only with a modal or a future.
_OPENING_IF: Final = re.compile(r"^\W*(?:(?:and|but|so|well|oh|ok|okay)\W+)?(?:even\s+)?if\b", re.I)
#: What makes an "if" suppose (reading 4): a modal or a future anywhere in the sentence
#: ("if I won I'd buy", "if I get it I'll move"), or a subjunctive "were" after it.
_UNREAL: Final = re.compile(
    r"\b(?:would|could|might|(?-i:may)|should|will|shall|wo|gonna|going\s+to)\b|'(?:ll|d)\b"
    r"|\bif\b[^,;:]{0,160}?\bwere\b",
    re.I,
)
#: An asked "if" is whether ("she asked if I could cover"): its clause supposes nothing.
_ASKED_IF: Final = re.compile(
    r"\b(?:ask|asks|asked|asking|enquired|inquired|checked|checking)\s+"
    r"(?:(?:me|us|him|her|them|you)\s+)?(?:if|whether)\b[^,;:]*",
    re.I,
)


def _supposes(said: str, reading: int) -> bool:
    """Whether ``said`` only supposes, as ``reading`` reads it (see the module docstring)."""
    # Most sentences have neither word, and the tests below cost more than this one.
    if reading >= 4 and ("if" in (low := said.lower()) or "whether" in low):
        # What is asked is weighed apart; a real conditional ("if it rains I take the
        # bus") states how things are, one with a modal or future supposes.
        said = _IDIOM_IF.sub(" ", _ASKED_IF.sub(" ", said))
        if _OPENING_IF.match(said) is not None:
            return True
        if _IF.search(said) is not None and _UNREAL.search(said) is not None:
            return True
    if reading >= 4 and _SELF.search(said) is None and _OTHERS_MODAL_4.search(said) is not None:
        return True
    return (
        _CONDITIONAL[reading].search(said) is not None or _MODAL[reading].search(said) is not None
    )


_RELATIONS: Final = (
    r"(?:brother|sister|sibling|mother|mom|mum|father|dad|parents?|wife|husband|partner"
    r"|spouse|fianc[eé]e?|boyfriend|girlfriend|son|daughter|kids?|child|children|baby"
    r"|friend|best friend|colleague|co-?worker|coworker|boss|manager|neighbou?r|cousin|uncle"
    r"|aunt|grand(?:mother|father|ma|pa|parents?)|nan|roommate|flatmate|housemate|niece"
    r"|nephew|teammate|landlord|landlady|doctor|therapist|teacher|student|mentor|client"
    r"|in-laws?|(?:mother|father|brother|sister)-in-law|stepmother|stepfather|stepson"
    r"|stepdaughter)"
)
#: From reading 4 also the grandchildren and godparents ("my newest grandchild"), and
#: plurals ("my two sons").
_RELATIONS_4: Final = (
    rf"(?:{_RELATIONS[3:-1]}|grand(?:child|children|son|daughter|kids?|baby)"
    r"|god(?:mother|father|son|daughter|child))s?"
)
_ADJECTIVES: Final = (
    r"(?:(?:little|older|younger|big|elder|best|new|old|oldest|youngest|eldest|twin|"
    r"ex-?|former|late|dear|close)\s*)*"
)
#: From reading 4 also the relation's place among others ("my newest grandchild").
_ADJECTIVES_4: Final = (
    r"(?:(?:little|older|younger|big|elder|best|new|old|oldest|youngest|eldest|twin|newest"
    r"|latest|middle|only|two|three|ex-?|former|late|dear|close)\s*)*"
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
_UPPER: Final = "".join(c for c in map(chr, range(0x41, 0x250)) if c.isupper())
_LOWER: Final = "".join(c for c in map(chr, range(0x61, 0x250)) if c.islower())
#: From reading 4 a name may open with any Latin capital ("Émile", "Łukasz"), hold a
#: second ("McKenzie", "DeShawn"), open with "O'" ("O'Brien") and carry an honorific
#: ("Sato-san").
_NAME_4: Final = (
    rf"(?-i:(?:O'|D')?[{_UPPER}][{_LOWER}]+(?:[{_UPPER}][{_LOWER}]+)?(?:-[{_UPPER}][{_LOWER}]+)?)"
    r"(?:-(?:san|sama|kun|chan|sensei|senpai|ji|ssi|nim)\b)?"
)
#: A verb in the past a name opens a sentence before ("Lwazi made the team"): the common
#: irregular ones (the regular end in -ed); those spelt as their present are left out.
_IRREGULAR: Final = (
    r"(?:made|got|went|took|left|came|found|said|told|gave|bought|sold|became|began|brought"
    r"|built|caught|chose|drove|fell|felt|flew|forgot|grew|heard|held|kept|knew|lost|met|paid"
    r"|ran|rode|sent|sat|saw|slept|spent|spoke|stood|swam|taught|thought|threw|won|wore|wrote"
    r"|broke|fought|sang|drank|ate|hid|blew|drew|meant|led|lent|fled|shook|stole|woke|tore)"
)
#: What follows a verb in -s ("Aiko works as", "Naledi teaches Grade 4") where a plural
#: noun would be followed by its verb ("Piano lessons start"): an article, a preposition,
#: a pronoun, a name or a number.
_AFTER_VERB: Final = (
    r"(?:(?:the|a|an|this|that|these|those|his|her|their|my|our|your|its|some|no|every|all"
    r"|as|at|in|on|for|with|from|to|into|near|about|by|like|up|out|off|back|over|home|away"
    r"|me|us|him|them|it|you|everything|everyone)\b|[A-Z0-9])"
)
#: From reading 4: a name before any verb, with adverbs between ("Irene just opened a
#: studio"), or with a pronoun's relation ("Tomas and his wife are moving"); a possessive
#: keeps what it owns, to tell an organisation's ("Acme's office") from a person's.
_NAMED_OPENING_4: Final = re.compile(
    rf"^\W*(?P<name>{_NAME_4})(?:'s\s+(?P<owned>[\w-]+(?:\s+[\w-]+)?)|'s\b"
    r"|\s+(?:and|&)\s+(?:his|her|their)\b|\s+(?:(?:just|finally|already|recently|now|also"
    r"|still|never|always|often|really|actually|apparently|suddenly|even|probably|sometimes"
    rf"|usually|soon|only)\s+)*(?:{_AUX}|will|would|might|could|may|{_IRREGULAR}"
    r"|[a-z]{2,}(?<!e)ed|(?!(?:this|thus|plus|across|perhaps|towards|whereas|besides|always"
    # How a thing strikes one is said of places as often as of people ("Lisbon feels
    # like home"): those verbs name no one.
    r"|sometimes|feels|looks|seems|sounds|smells|tastes|appears)\b)"
    rf"[a-z]+[a-rt-z]s(?=\s+{_AFTER_VERB}))\b)"
)
#: What an organisation has and a person does not, after a possessive: "Acme's office
#: moved to Leeds" says nothing of a person (from reading 4).
_ORGANISATION_PARTS: Final = frozenset(
    (
        *("office", "offices", "headquarters", "hq", "branch", "branches", "campus"),
        *("factory", "warehouse", "store", "stores", "app", "website", "servers"),
        *("platform", "product", "products", "stock", "shares", "ceo", "cto", "cfo"),
        *("board", "staff", "employees", "workforce", "department", "policy", "pricing"),
        *("prices", "ipo", "layoffs", "merger", "customers", "revenue", "profits"),
    )
)
#: Capitalised words a sentence opens with before a verb that are no one's name (from
#: reading 4): adverbs, quantifiers, greetings, numbers and nouns said bare ("Budget is
#: tight", a note's "User prefers dark mode").
_NOT_NAMES_4: Final = frozenset(
    (
        *("Apparently", "Actually", "Basically", "Finally", "Honestly", "Hopefully"),
        *("Luckily", "Sadly", "Unfortunately", "Fortunately", "Obviously", "Clearly"),
        *("Recently", "Lately", "Usually", "Normally", "Really", "Probably", "Suddenly"),
        *("Eventually", "Currently", "Maybe", "Perhaps", "Still", "Also", "Just", "Only"),
        *("Even", "Again", "Soon", "Later", "Earlier", "Tonight", "Already", "Anyway"),
        *("Meanwhile", "Instead", "However", "Sometimes", "Often", "Never", "Always"),
        *("Once", "Both", "All", "Each", "Every", "Some", "Most", "Many", "Few", "Several"),
        *("Neither", "Either", "Another", "Other", "Others", "Such", "Plenty", "Lots"),
        *("Well", "Oh", "Yes", "No", "Ok", "Okay", "Hey", "Hi", "Hello", "Thanks", "Please"),
        *("Sorry", "Work", "School", "Home", "Rent", "Budget", "Dinner", "Lunch"),
        *("Breakfast", "Traffic", "Weather", "Class", "Practice", "Training", "Church"),
        *("Life", "Money", "Time", "Business", "Parking", "College", "University", "Uni"),
        *("One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten"),
        *("Eleven", "Twelve", "Twenty", "Thirty", "Forty", "Fifty", "Hundred", "Half"),
        *("First", "Second", "Third", "Any", "User", "Users", "Team", "Customer"),
        *("Customers", "Client", "Clients", "Agent", "Assistant", "Project", "Repo"),
        *("Build", "Release", "Company", "Service", "Server", "System", "Code", "Family"),
    )
)
_SELF: Final = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|we'd|we'll|us|our)\b", re.I
)


def _relation(owner: str, name: str, reading: int) -> re.Pattern[str]:
    relations, adjectives = (
        (_RELATIONS_4, _ADJECTIVES_4) if reading >= 4 else (_RELATIONS, _ADJECTIVES)
    )
    return re.compile(
        rf"\b{owner}\s+{adjectives}{relations}(?:'s)?\b(?:,?\s+(?P<name>{name})(?:'s)?\b)?",
        re.I,
    )


def _appositive(owner: str, name: str, reading: int) -> re.Pattern[str]:
    relations, adjectives = (
        (_RELATIONS_4, _ADJECTIVES_4) if reading >= 4 else (_RELATIONS, _ADJECTIVES)
    )
    return re.compile(rf"\b(?P<name>{name}),\s+{owner}\s+{adjectives}{relations}\b", re.I)


#: Per reading, the user's relations (from reading 4 "our" ones too: "our son Callum"), and
#: the pronouns that may be a subject ("him" never is, from reading 4).
_RELATION: Final = {
    **dict.fromkeys((1, 2, 3), _relation("my", _NAME, 3)),
    4: _relation("(?:my|our)", _NAME_4, 4),
}
_APPOSITIVE: Final = {
    **dict.fromkeys((1, 2, 3), _appositive("my", _NAME, 3)),
    4: _appositive("(?:my|our)", _NAME_4, 4),
}
_PRONOUN: Final = {
    **dict.fromkeys((1, 2, 3), re.compile(r"\b(?:he|she|he's|she's|his|her|him)\b", re.I)),
    4: re.compile(r"\b(?:he|she|he's|she's|his|her|their)\b", re.I),
}
#: From reading 4, a relation or pronoun right after a preposition is its object, not what
#: the sentence is about: "home is Leeds, with my wife Ana" is the speaker's fact.
_PREPOSITION_BEFORE: Final = re.compile(
    r"\b(?:with|to|for|from|by|at|near|beside|besides|without|like|about|of|behind|after"
    r"|before|around|alongside|toward|towards|than|on|in|into|onto|over|under|between|among"
    r"|against|via|past|beyond|except|including)\s+$",
    re.I,
)
#: The characters before a relation or pronoun searched for its preposition: the longest
#: preposition and the spaces after it.
_PREPOSITION_REACH: Final = 24
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
    **dict.fromkeys((2, 3, 4), _IDENTITY_2),
}
_WITH_SELF: Final = re.compile(r"^\s*(?:,\s*)?(?:and|&)\s+(?:i|me|myself)\b", re.I)


def _opening(sentence: str, reading: int) -> str | None:
    """The person whose name opens ``sentence`` (reading 3 on), else None."""
    opening = (_NAMED_OPENING if reading < 4 else _NAMED_OPENING_4).match(sentence)
    if opening is None:
        return None
    name = opening.group("name")
    if name in _NOT_NAMES or name in _NOT_OPENING_NAMES:
        return None
    if reading >= 4:
        owned = opening.group("owned")
        if name in _NOT_NAMES_4 or name.endswith("ing"):  # a gerund: "Running helps"
            return None
        if owned is not None and _ORGANISATION_PARTS.intersection(owned.casefold().split()):
            return None
    return name


def _object(sentence: str, at: int, reading: int) -> bool:
    """Whether what starts at ``at`` follows a preposition, as ``reading`` weighs it."""
    if reading < 4:
        return False
    # Only the words just before ``at``: searching the whole head for each pronoun made a
    # text of many ("of her of her ...") cost its length squared.
    start = max(0, at - _PREPOSITION_REACH)
    found = _PREPOSITION_BEFORE.search(sentence[start:at])
    # A window cut inside a word ("sandwith") names no preposition.
    return found is not None and (
        found.start() > 0 or start == 0 or not sentence[start - 1].isalnum()
    )


def _subject(sentence: str, named: str | None, reading: int) -> str | None:
    """The first subject ``sentence`` names (see the module docstring)."""
    self_match = _SELF.search(sentence)
    if reading >= 3 and self_match is None:
        # Opened by someone named, and the speaker nowhere in it: that person's fact.
        opening = _opening(sentence, reading)
        if opening is not None:
            return opening
    # (place, rank, subject): at one place ("my brother ..."), the relation outranks "my".
    found: list[tuple[int, int, str | None]] = []
    if self_match is not None:
        found.append((self_match.start(), 1, None))
    for match in _APPOSITIVE[reading].finditer(sentence):
        if match.group("name") not in _NOT_NAMES:
            found.append((match.start(), 0, match.group("name")))
            break
    for match in _RELATION[reading].finditer(sentence):
        if _object(sentence, match.start(), reading):
            continue
        name = match.group("name")
        if name in _NOT_NAMES:
            name = None
        rest = sentence[match.end() :]
        if name is None and (_IDENTITY[reading].match(rest) or _WITH_SELF.match(rest)):
            found.append((match.start(), 0, None))
        else:
            found.append((match.start(), 0, name or SOMEONE))
        break
    for pronoun in _PRONOUN[reading].finditer(sentence):
        if not _object(sentence, pronoun.start(), reading):
            found.append((pronoun.start(), 0, named or SOMEONE))
            break
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
        hypothetical = _supposes(said, reading)
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
