"""The rule extractor's forms: what a clause must look like to state a belief.

Data only (patterns, word lists and the rule table); :mod:`._extract` reads
turns with them. Each rule reads a whole clause, its subject added by
``_extract._compile``: the user (:data:`SPEAKER`) or another person
(:data:`PERSON`); an ``identity`` rule states who the user's people are
("my manager is Priya") and carries its own subject.
"""

from __future__ import annotations

import re
from typing import Final, Literal

import msgspec

BeliefKind = Literal["fact", "decision"]
Who = Literal["user", "person", "any", "identity"]

MONTH_NAMES = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
HEDGE = re.compile(r"\b(i think|i guess|maybe|probably|perhaps|might|not sure)\b", re.I)
#: A clause's value: no comma, but "Porto, Portugal" (names after a comma) is one place.
VALUE = r"(?P<v>[^,;:()]{1,120}?(?:,\s*(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)*)??)"
#: A value that names an organisation (a capital): "I left Acme" is a job, "I quit smoking" is not.
ORG = r"(?P<v>(?-i:[A-Z0-9])[^,;:()]{0,119}?)"
NAMED = r"(?P<v>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)?)"
#: What may follow a value and is not part of it: when it began, "now", "any more".
WHEN = (
    rf"(?:\s+(?:in|since|from|as\s+of|back\s+in)\s+(?:early\s+|late\s+)?{MONTH_NAMES}"
    r"(?:\s+\d{4})?|\s+(?:(?:to|until|till|for)\s+)?(?:last|this|next)\s+(?:week|month|year|spring|summer|autumn|fall|winter)"
    r"|\s+(?:a|an|one|two|three|a\s+few|\d+)\s+(?:days?|weeks?|months?|years?)\s+ago"
    r"|\s+(?:recently|lately|a\s+while\s+ago))*"
)
END = WHEN + r"\s*(?:now|these days|nowadays|any ?more|for good|again)?\s*[.!]*$"
#: The speaker as the clause's subject ("we" includes the user; "my partner and I" too).
SPEAKER = r"(?:i|we|my\s+(?:[a-z-]+\s+){1,2}and\s+i|(?:the|our)\s+(?:family|kids)\s+and\s+i)"
#: Another person as the clause's subject: "my (older) brother (Tomas)", "Ana, my sister,",
#: "Tomas", "he"/"she" (whose name :func:`~memseal.engine.aboutness.sentences` gives).
PERSON = (
    r"(?P<who>my\s+(?:(?!(?:he|she|they|i|it|who|that)\b)[a-z-]+\s+){0,3}?[a-z-]+"
    r"(?:,?\s+(?-i:[A-Z])[\w'-]*,?)?"
    r"|(?-i:[A-Z])[\w-]*(?:,\s+my\s+[a-z -]{1,40},)?|he|she)"
)
#: What the user's K is called: one or two words, never "there" or "now" ("my manager there").
KEY = (
    r"(?P<k>[a-z]+(?:\s+(?!(?:there|here|now|then|currently|today)\b)[a-z]+)??)"
    r"(?:\s+(?:there|here|at\s+work))?"
)
JUST = r"(?:(?:just|recently|finally|now|also|officially|actually|already|since)\s+)?"
HAVE = r"(?:(?:have|has|had)\s+)?"
NOT_A_HOME = (
    r"(?!(?:the\s+|a\s+|an\s+|our\s+|my\s+)?(?:[\w-]+\s+)?"
    r"(?:team|role|job|position|department|project|version|plan|tier|branch|host|server|stack)\b)"
)


class Rule(msgspec.Struct, frozen=True):
    """One form: whose clause it reads, the pattern (its subject added), the belief."""

    who: Who
    pattern: str
    kind: BeliefKind
    template: str
    key: str | None
    confidence: float
    preference: bool = False


def _r(
    who: Who,
    pattern: str,
    template: str,
    key: str | None,
    confidence: float = 0.9,
    kind: BeliefKind = "fact",
    preference: bool = False,
) -> Rule:
    return Rule(who, pattern, kind, template, key, confidence, preference)


# First match wins: the specific forms before the general ones. ``{who}`` is "The user" or
# the person; keys are what a later belief must share to supersede this one.
RULES: Final[tuple[Rule, ...]] = (
    # Where one lives: moves, relocations, and leaving a place.
    _r("any", HAVE + JUST + r"(?:moved|relocated|emigrated)(?:\s+(?:back|house|home|over|across))*"
       r"(?:\s+(?:from|out\s+of)\s+[^,;:()]{1,60}?)?\s+(?:to|into)\s+" + NOT_A_HOME + VALUE
       + r"(?:\s+from\s+[^,;:()]{1,60}?)?", "{who} lives in {v}.", "lives_in"),
    _r("identity", r"(?:my|our)\s+(?:new\s+)?(?:home|flat|apartment|house|place)\s+is\s+(?:now\s+)?"
       r"in\s+" + VALUE, "The user lives in {v}.", "lives_in"),
    _r("any", r"(?:do|does|did)\s+not\s+live\s+in\s+" + VALUE + r"\s+any ?more",
       "{who} no longer lives in {v}.", "lives_in"),
    _r("any", r"(?:no\s+longer|do\s+not|does\s+not)\s+lives?\s+in\s+" + VALUE,
       "{who} no longer lives in {v}.", "lives_in"),
    _r("any", HAVE + JUST + r"moved\s+(?:away\s+from|out\s+of)\s+" + VALUE,
       "{who} no longer lives in {v}.", "lives_in"),
    _r("any", r"(?:now\s+|currently\s+|still\s+)?(?:lives?|resides?|am\s+living|are\s+living"
       r"|is\s+living|(?:have|has)\s+(?:been\s+living|lived))\s+in\s+" + VALUE,
       "{who} lives in {v}.", "lives_in"),
    _r("any", r"(?:am|are|is)\s+(?:now\s+|currently\s+)?(?:based|living|settled)\s+in\s+"
       + VALUE, "{who} lives in {v}.", "lives_in"),
    # Work: joining, working at, leaving.
    _r("any", r"(?:no\s+longer|do\s+not|does\s+not)\s+works?\s+(?:at|for)\s+" + VALUE,
       "{who} no longer works at {v}.", "works_at"),
    _r("any", r"(?:am|is|are)\s+(?:no\s+longer|not)\s+(?:working\s+)?(?:at|with)\s+" + ORG
       + r"\s+any ?more", "{who} no longer works at {v}.", "works_at"),
    _r("any", r"(?:am|is|are)\s+(?:no\s+longer)\s+(?:working\s+)?(?:at|with)\s+" + ORG,
       "{who} no longer works at {v}.", "works_at"),
    _r("any", HAVE + JUST + r"(?:quit|left|lost)\s+(?:my|his|her|their|our)\s+job\s+(?:at|with)"
       r"\s+" + VALUE, "{who} no longer works at {v}.", "works_at"),
    _r("any", HAVE + JUST + r"(?:quit|left|lost)\s+(?:my|his|her|their|our)\s+job",
       "{who} left their job.", "works_at"),
    _r("any", HAVE + JUST + r"(?:left|quit|resigned\s+from|retired\s+from|(?:was|got|were)"
       r"\s+(?:laid\s+off|let\s+go|fired)\s+(?:from|by))\s+" + ORG,
       "{who} no longer works at {v}.", "works_at"),
    _r("any", r"(?:now\s+|currently\s+|still\s+)?(?:works?|am\s+working|is\s+working|are\s+working"
       r"|(?:have|has)\s+(?:been\s+working|worked))\s+(?:at|for)\s+" + VALUE,
       "{who} works at {v}.", "works_at"),
    _r("any", HAVE + JUST + r"joined\s+" + ORG, "{who} works at {v}.", "works_at"),
    _r("any", HAVE + JUST + r"(?:started\s+(?:a\s+new\s+job\s+|a\s+job\s+|working\s+)?at"
       r"|(?:was|got|were)\s+hired\s+(?:by|at)|started\s+(?:working\s+)?(?:with|for)|(?:got|took|accepted|landed|started)\s+(?:a|an)"
       r"\s+(?:new\s+)?(?:job|position|role|offer)\s+(?:at|with|from))\s+" + VALUE,
       "{who} works at {v}.", "works_at"),
    _r("any", r"(?:am|is|are)\s+(?:now\s+)?employed\s+(?:by|at)\s+" + VALUE,
       "{who} works at {v}.", "works_at"),
    _r("any", r"(?:am|is|are)\s+(?:now\s+)?(?:a|an|the)\s+[a-z -]{1,40}?\s+(?:at|for|with)\s+"
       + ORG, "{who} works at {v}.", "works_at"),
    _r("identity", r"my\s+(?:new\s+|current\s+)?(?:job|employer|company|workplace)\s+is\s+"
       r"(?:now\s+)?(?:at\s+|with\s+)?" + VALUE, "The user works at {v}.", "works_at"),
    _r("identity", r"(?:it\s+was\s+)?my\s+last\s+day\s+(?:at|with)\s+" + ORG,
       "The user no longer works at {v}.", "works_at"),
    _r("any", r"(?:has|have|got|found|started)\s+(?:a|an)\s+new\s+job",
       "{who} has a new job.", "works_at"),
    _r("any", r"(?:am|is|are)\s+(?:now\s+)?(?P<state>unemployed|out\s+of\s+work|between\s+jobs"
       r"|retired)", "{who} is {state}.", "works_at"),
    # Who the user's people are: "my manager is Priya", "since March Priya is my manager".
    _r("user", r"(?:now\s+)?reports?\s+to\s+" + NAMED, "The user's manager is {v}.",
       "my:manager"),
    _r("user", r"(?:have|has|got)\s+(?:got\s+)?(?:a\s+)?new\s+(?P<k>[a-z]+)"
       r"(?:,|\s+called|\s+named)?\s+" + NAMED, "The user's {k} is {v}.", "my:{k}"),
    _r("identity", NAMED + r"\s+(?:has\s+)?(?:took|taken)\s+over\s+as\s+my\s+(?:new\s+)?"
       r"" + KEY + r"", "The user's {k} is {v}.", "my:{k}"),
    _r("identity", r"my\s+favou?rite\s+" + KEY + r"\s+(?:is|has\s+been)\s+"
       r"(?:now\s+)?" + VALUE, "The user's favourite {k} is {v}.", "favourite:{k}", 0.8,
       preference=True),
    _r("identity", r"my\s+name\s+is\s+" + VALUE, "The user's name is {v}.", "name"),
    _r("identity", r"my\s+(?:new\s+|current\s+)?" + KEY + r"\s+(?:now\s+)?(?:takes|lasts|costs)\s+"
       r"(?:now\s+)?" + VALUE, "The user's {k} takes {v}.", "my:{k}"),
    _r("user", HAVE + JUST + r"(?:moved|migrated|switched|transferred)\s+(?:my|our)\s+" + KEY
       + r"\s+(?:over\s+)?to\s+" + VALUE, "The user moved their {k} to {v}.", "my:{k}"),
    _r("identity", r"my\s+(?:new\s+|current\s+)?" + KEY + r"\s+is\s+no\s+longer\s+"
       + VALUE, "The user's {k} is no longer {v}.", "my:{k}"),
    _r("identity", r"my\s+(?:new\s+|current\s+)?" + KEY + r"\s+(?:is|has\s+been"
       r"|has\s+become)\s+(?:now\s+)?" + VALUE, "The user's {k} is {v}.", "my:{k}"),
    _r("identity", NAMED + r"\s+is\s+no\s+longer\s+my\s+(?:new\s+|current\s+)?(?P<k>[a-z]+"
       r"(?:\s+[a-z]+)??)", "The user's {k} is no longer {v}.", "my:{k}"),
    _r("identity", NAMED + r"\s+(?:is|has\s+been)\s+(?:now\s+)?my\s+(?:new\s+|current\s+)?"
       r"" + KEY + r"", "The user's {k} is {v}.", "my:{k}"),
    # Likes and preferences.
    _r("any", r"(?:(?:do|does|did)\s+not|no\s+longer|never)\s+(?:like|enjoy|want|love)s?\s+"
       + VALUE, "{who} does not like {v}.", "likes:{v}", 0.8, preference=True),
    _r("any", HAVE + r"(?:stopped\s+(?:liking|enjoying)|gone\s+off|went\s+off|hates?|cannot"
       r"\s+stand|am\s+(?:over|done\s+with|sick\s+of|tired\s+of))\s+" + VALUE,
       "{who} does not like {v}.", "likes:{v}", 0.8, preference=True),
    _r("any", r"(?:am|is|are)\s+(?:no\s+longer|not)\s+(?:into|a\s+fan\s+of)\s+" + VALUE
       + r"(?:\s+any ?more)?", "{who} does not like {v}.", "likes:{v}", 0.8, preference=True),
    _r("any", r"(?:really\s+)?(?:likes?|loves?|enjoys?)\s+" + VALUE, "{who} likes {v}.",
       "likes:{v}", 0.8, preference=True),
    _r("any", r"(?:am|is|are)\s+(?:really\s+|now\s+)?(?:into|a\s+(?:big\s+)?fan\s+of)\s+" + VALUE,
       "{who} likes {v}.", "likes:{v}", 0.8, preference=True),
    _r("user", r"(?:much\s+|strongly\s+)?prefer\s+" + VALUE, "The user prefers {v}.", None, 0.8,
       preference=True),
    # Decisions.
    _r("user", HAVE + r"decided\s+(?:to\s+|on\s+|that\s+)?" + VALUE, "Decided: {v}.", None,
       0.85, "decision"),
    _r("identity", r"let's\s+(?:go\s+with|use)\s+" + VALUE, "Decided: use {v}.", None, 0.85,
       "decision"),
    _r("user", r"will\s+use\s+" + VALUE, "Decided: use {v}.", None, 0.85, "decision"),
    # Plans, and calling them off.
    _r("any", HAVE + JUST + r"(?P<verb>cancell?ed|called\s+off|postponed|scrapped|put\s+off)"
       r"\s+" + VALUE, "{who} {verb} {v}.", "plan:{head}", 0.85),
    _r("identity", r"(?:the|our|my)\s+(?P<v>[a-z][\w\s-]{0,60}?)\s+(?:is|was|got|has\s+been)\s+"
       r"(?P<verb>cancell?ed|called\s+off|off|postponed|scrapped)", "The user's {v} is {verb}.",
       "plan:{head}", 0.85),
    _r("any", HAVE + JUST + r"(?P<verb>booked|planned|scheduled|organi[sz]ed|arranged)\s+"
       + VALUE, "{who} {verb} {v}.", "plan:{head}", 0.85),
    # Activities: stops ("gave up", "no longer", "not ... any more") and starts.
    _r("any", HAVE + JUST + r"(?:completely\s+)?(?P<verb>gave\s+up|given\s+up|quit|stopped"
       r"|dropped|ditched|abandoned|left)\s+(?P<v>(?-i:[a-z])[^,;:()]{0,119}?)",
       "{who} {verb} {v}.", "does:{act}", 0.85),
    _r("any", r"(?:am|is|are)\s+(?:not|no\s+longer)\s+(?P<v>[a-z]+ing(?:\s+[^,;:()]{1,80}?)??)"
       r"(?:\s+any ?more)?", "{who} is no longer {v}.", "does:{act}", 0.85),
    _r("any", r"(?:am|is|are)\s+(?:not|no\s+longer)\s+(?:living\s+|based\s+)?in\s+" + ORG
       + r"(?:\s+any ?more)?", "{who} no longer lives in {v}.", "lives_in"),
    _r("identity", r"no\s+more\s+(?P<v>[a-z][\w\s-]{0,40}?)(?:\s+for\s+(?:me|us))?",
       "The user no longer does {v}.", "does:{act}", 0.85),
    _r("any", r"(?:have|has)\s+not\s+(?:played|done|gone|been)\s+(?P<v>[a-z][\w\s-]{0,40}?)"
       r"\s+(?:in|for)\s+(?:months|years|ages|weeks|a\s+(?:while|long\s+time))",
       "{who} no longer does {v}.", "does:{act}", 0.85),
    _r("any", r"(?:am|is|are)\s+not\s+(?:a\s+|an\s+)?(?P<v>[a-z-]+(?:\s+[a-z-]+)?)\s+any ?more",
       "{who} is no longer {v}.", "is:{v}", 0.85),
    _r("any", r"(?:am|is|are)\s+no\s+longer\s+(?:a\s+|an\s+)?(?P<v>[a-z-]+(?:\s+[a-z-]+)?)",
       "{who} is no longer {v}.", "is:{v}", 0.85),
    _r("any", r"(?:do|does)\s+not\s+(?P<act>[a-z]+)(?:\s+(?P<v>[^,;:()]{1,80}?))??\s+any ?more",
       "{who} no longer {act} {v}.", "does:{act}", 0.85),
    _r("any", r"no\s+longer\s+(?P<act>[a-z]+)(?:\s+(?P<v>[^,;:()]{1,80}?))??",
       "{who} no longer {act} {v}.", "does:{act}", 0.85),
    _r("any", r"(?:have\s+been|am|are|is)\s+(?P<verb>doing|playing|going|practi[cs]ing|learning)"
       r"\s+(?P<v>(?-i:[a-z])[^,;:()]{0,119}?)", "{who} is {verb} {v}.", "does:{act}",
       0.85),
    _r("any", HAVE + JUST + r"(?P<verb>started|took\s+up|taken\s+up|picked\s+up|began|begun"
       r"|got\s+into|joined)\s+(?P<v>(?-i:[a-z])[^,;:()]{0,119}?)", "{who} {verb} {v}.",
       "does:{act}", 0.85),
    _r("any", r"(?:now\s+|still\s+|also\s+|regularly\s+|usually\s+)?(?P<verb>go|goes|play|plays"
       r"|practi[cs]es?)\s+(?P<v>(?-i:[a-z])[^,;:()]{0,119}?)", "{who} {verb} {v}.",
       "does:{act}", 0.85),
)  # fmt: skip

LEAD: Final = re.compile(
    r"^(?:(?:so|well|oh|ok|okay|anyway|actually|also|btw|by\s+the\s+way|and|but|update|fyi"
    r"|news|good\s+news|bad\s+news|in\s+fact|as\s+it\s+happens|these\s+days|nowadays|recently"
    r"|lately|finally|now|yes|yeah|no(?!\s+(?:more|longer)\b))\b[,:!]?\s*"
    r"|(?:i\s+think|i\s+guess|i\s+believe|i'm\s+not\s+sure\s+but)\s+(?:that\s+)?"
    r"|(?:since|as\s+of|from|starting(?:\s+from)?|beginning|back\s+in|in|on|last|this"
    r"|earlier\s+this|at\s+the\s+(?:start|end)\s+of)\s+[\w-]+(?:\s+[\w-]+){0,2}?\s*,?\s+"
    r"(?=(?:i|we|my|our|he|she)\b|(?-i:[A-Z])))+",
    re.I,
)
MY_RELATION: Final = re.compile(r"^my\s+([a-z-]+)\s", re.I)
PRONOUN_SUBJECT: Final = re.compile(r"^(?:he|she)\b", re.I)
AHEAD: Final = (
    r"(?=(?:i|we|he|she|they|my|our|his|her|their)\b|(?-i:[A-Z])[\w-]*,?\s+(?:my\s+|has\b|have\b"
    r"|is\b|was\b|lives\b|works\b|moved\b|got\b|started\b|joined\b|left\b|quit\b|gave\b"
    r"|stopped\b|no\s+longer\b|just\b|recently\b|now\b|also\b))"
)
#: Where one clause ends and the next begins: a semicolon, a conjunction before a new
#: subject, a subordinate or relative clause. ``cond``: a condition, and ``said``: reported
#: speech ("my sister said she moved"); what follows either is not stated by the speaker.
BREAK: Final = re.compile(
    r"\s*[;:\u2014\u2013]\s*|\s+-\s+"
    rf"|,?\s+(?:and|but|so|yet|or|then)\s+(?:then\s+|now\s+|also\s+)?{AHEAD}"
    r"|,\s+(?=(?:i|we|he|she)\b)"
    r"|,?\s+(?P<cond>if|unless|in\s+case)\b\s*"
    r"|\s+(?P<said>(?:said|says|told|tells|thinks|believes|claims|heard|mentioned)\b)"
    r"|,?\s+(?:because|since|although|though|while|whereas|when|whenever|after|before|until"
    r"|where|which|who|whom|whose|once)\s+",
    re.I,
)
CONTRACTIONS: Final = (
    (re.compile(r"\bi'm\b", re.I), "I am"),
    (re.compile(r"\b(we|you|they)'re\b", re.I), r"\1 are"),
    (re.compile(r"\b(i|we|you|they)'ve\b", re.I), r"\1 have"),
    (re.compile(r"\b(do|does|did|is|are|was|were|have|has)n't\b", re.I), r"\1 not"),
    (re.compile(r"\bwe'll\b", re.I), "we will"),
    (re.compile(r"\bcan't\b", re.I), "cannot"),
)
PAST: Final = {
    "given up": "gave up",
    "begun": "began",
    "taken up": "took up",
    "canceled": "cancelled",
}
#: Values that only point back ("I love it"): no belief names what they mean.
POINTERS: Final = frozenset(("it", "that", "this", "them", "him", "her", "those", "these"))
NOT_PEOPLE: Final = frozenset(
    [
        "i",
        "we",
        "you",
        "they",
        "it",
        "this",
        "that",
        "there",
        "here",
        "the",
        "a",
        "an",
        "everyone",
        "someone",
        "nobody",
        "people",
    ]
)
LIGHT_VERBS: Final = frozenset(
    [
        "go",
        "goes",
        "going",
        "play",
        "plays",
        "playing",
        "do",
        "does",
        "doing",
        "to",
        "the",
        "a",
        "an",
        "my",
        "our",
    ]
)
TAIL_WORDS: Final = frozenset(
    [
        "every",
        "each",
        "on",
        "in",
        "at",
        "since",
        "for",
        "last",
        "this",
        "any",
        "anymore",
        "now",
        "again",
        "because",
        "after",
        "with",
        "twice",
        "once",
        "daily",
        "weekly",
        "regularly",
        "altogether",
        "completely",
        "entirely",
        "times",
        *("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    ]
)
DETERMINERS: Final = frozenset(
    ["a", "an", "the", "our", "my", "their", "his", "her", "this", "that"]
)
PREPOSITIONS: Final = frozenset(
    ["to", "for", "in", "at", "on", "with", "of", "from", "next", "this", "last"]
)
THE_USERS: Final = "The user's "
KEY_SYNONYMS: Final = {"boss": "manager", "line-manager": "manager"}
