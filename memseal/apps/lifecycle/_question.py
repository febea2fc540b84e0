"""What a pack's question asks of memory: the words that state it, and the bridges it needs.

:func:`expand` widens a search by the words that state what the question asks
("where do I live?" also finds "I moved to Lisbon"), only when the question asks
it of the user: "where is my dentist based?" asks about someone else's place,
and the user's home words found the user's home for it.

:func:`bridges` names the replaced items a pack keeps for a question. The rule
replaces an older statement by a newer one about the same subject, and a pack
leaves the older out; but a question may reach the newer one only through the
older: "where does my brother fly now?" is answered by "Bongani flies to
Mauritius now" only with "my brother Bongani is a pilot", which the newer one
replaced. Such an item names what the question asks about: a word of the
question the newer statement lacks is given there the name the newer one goes
by ("my brother Bongani", "my GP is Dr Ruiz", "Irene is my best friend"). An
older statement that only shares the question's words (an update said in
other words: "my site is hosted on X", "it moved to Y") names nothing, so it
stays out, as does an item a summary replaced (a summary's words are many
statements'). The phrasing list's subjects (where the user lives, works,
their name, "my X is") are the user's own: a newer statement of them is the
answer, nothing is left to resolve.
A bridge is shown right after its replacement, in its section, marked replaced by
it (:func:`placed`): the newer fact first, and what it replaced after it, never above.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from memseal.engine._rule_reading import stems
from memseal.engine.currency import RULES, VERSION
from memseal.tools.packs import PackItem

from ._current import Judged, Ranked, statement
from ._phrasings import phrased

__all__ = ["bridges", "expand", "placed", "replacement"]

_FRAMES: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(r"\b(?:live|living|based|home|reside|moved|city|located)\b"),
        "live living lived moved relocated based home city",
    ),
    (
        re.compile(r"\b(?:work|working|job|employer|company|employed)\b"),
        "work works working joined job employer company",
    ),
    (re.compile(r"\b(?:name|called)\b"), "name called"),
)
#: Where the user lives is asked with the user as subject ("do I live", "are we based")
#: or of a home no one else owns ("my home", "what city is home?", not "her home").
_OF_USER: Final = re.compile(
    r"\b(?:i|we)\b|(?<!'s )(?<!\bhis )(?<!\bher )(?<!\btheir )(?<!\byour )\bhome\b"
)
_TOKEN: Final = re.compile(r"[\w'\u2019-]+")
_GAP: Final = re.compile(r"[\s,]*")
#: What joins a relation to the name it is given: "my GP is Dr Anand", "Irene is my friend".
_IS: Final = frozenset({"is", "are", "was", "were"})
_OWNER: Final = frozenset({"my", "our"})
#: The frames asked only of the user: the residence frame (its words are the user's home).
_USERS_OWN: Final = frozenset({0})


def expand(query: str) -> str:
    """``query`` with the words that state the subjects it asks about (so "where do I
    live?" also finds "I moved to Lisbon" in an exact search). Only the search is
    widened: which of the found items is current is the currency rule's to say."""
    text = query.casefold().replace("\u2019", "'")
    of_user = _OF_USER.search(text) is not None
    extra = [
        words
        for index, (pattern, words) in enumerate(_FRAMES)
        if pattern.search(text) and (of_user or index not in _USERS_OWN)
    ]
    return query if not extra else f"{query} {' '.join(extra)}"


def _words(text: str) -> frozenset[str]:
    """The stemmed content words of ``text``, as the rule compares them."""
    return stems(text, RULES[VERSION].chars)


def _name(tokens: Sequence[re.Match[str]], at: int, step: int) -> frozenset[str]:
    """The words of the name written from ``tokens[at]`` on (``step`` 1) or back (-1):
    capitalised words, one after the other with only spaces or a comma between."""
    found: set[str] = set()
    while 0 <= at < len(tokens) and tokens[at][0][:1].isupper():
        found |= _words(tokens[at][0])
        after = at + step
        if not 0 <= after < len(tokens):
            break
        left, right = sorted((at, after))
        if not _GAP.fullmatch(tokens[left].string[tokens[left].end() : tokens[right].start()]):
            break
        at = after
    return frozenset(found)


def _names(said: str, asked: frozenset[str], newer: frozenset[str]) -> bool:
    """Whether ``said`` names, by a word the question says (``asked``) and the newer
    statement does not (``newer``), someone or something the newer one names and the
    question does not: "my brother Bongani", "my GP is Dr Anand", "Irene is my best
    friend". That is what a question reaches the newer statement through."""
    tokens = list(_TOKEN.finditer(said))
    named = newer - asked
    for index, token in enumerate(tokens):
        words = _words(token[0])
        if not words & asked or words & newer:
            continue
        ahead = index + 1
        if ahead < len(tokens) and tokens[ahead][0].lower() in _IS:
            ahead += 1
        if _name(tokens, ahead, 1) & named:
            return True
        owner = next(
            (k for k in (index - 1, index - 2) if k >= 0 and tokens[k][0].lower() in _OWNER), None
        )
        if (
            owner is not None
            and owner >= 2
            and tokens[owner - 1][0].lower() in _IS
            and _name(tokens, owner - 2, -1) & named
        ):
            return True
    return False


def bridges(ranked: Sequence[Ranked], rule: Judged, judged: Judged, query: str) -> dict[str, str]:
    """The items ``rule`` (the engine's rule alone) replaced that name what ``query``
    asks about for their replacement in ``judged`` (the pack's whole judgement), each
    to that replacement's id. ``ranked`` is the phrasing list's view (beliefs at their
    turns' time)."""
    if not query.strip():
        return {}
    own = phrased(Judged(order=(), replaced={}, lines={}), ranked).replaced
    by_id = {r.id: r for r in ranked}
    asked = _words(query)
    out: dict[str, str] = {}
    for older, newer in judged.replaced.items():
        if older not in rule.replaced or older in own or newer not in by_id:
            continue
        # A summary's words are many statements': sharing one with it links nothing.
        if older not in by_id or by_id[newer].kind == "context_summary":
            continue
        then = _words(statement(by_id[newer].kind, by_id[newer].text))
        if _names(statement(by_id[older].kind, by_id[older].text), asked, then):
            out[older] = newer
    return out


def placed(
    ordered: Sequence[tuple[int, PackItem]],
    order: Sequence[str],
    items: Mapping[str, PackItem],
    bridging: Mapping[str, str],
) -> list[tuple[int, PackItem]]:
    """``ordered`` (section, item) with each bridge (``bridging``: a kept replaced item's
    id to its replacement's; ``items`` by id) just after its replacement, in its
    replacement's section, marked replaced by it; ``order`` is the rule's. A bridge is
    kept to read the newer fact by, never as current: in another section it could be
    shown above its replacement. (Reversed: each goes in just after its replacement,
    so two bridges of one replacement keep the rule's order.)"""
    out = list(ordered)
    for older in reversed([i for i in order if i in bridging]):
        places = [p for p, (_, item) in enumerate(out) if item.id == bridging[older]]
        if places:
            section = out[places[0]][0]
            marked = msgspec.structs.replace(items[older], superseded_by=bridging[older])
            out.insert(places[0] + 1, (section, marked))
    return out


def replacement(item: str, bridging: Mapping[str, str]) -> str:
    """The id of the shown item ``item`` is read by: its replacement's (that one's, for a
    bridge of a bridge) when it is a bridge, else its own. A bridge goes where that goes."""
    seen = {item}
    while (item := bridging.get(item, item)) not in seen:
        seen.add(item)
    return item
