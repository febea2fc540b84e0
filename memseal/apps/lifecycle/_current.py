"""A pack's currency: the engine's rule over every candidate of every section.

The engine puts a newer item above an older one about the same subject within
one read (:mod:`memseal.engine.currency`, marking the older ``superseded_by``).
A pack merges several reads and a compaction summary, so it applies the same
rule again over all of them: the engine's :func:`~memseal.engine.currency.current_first`,
its thresholds (version :data:`~memseal.engine.currency.VERSION`) and its
:mod:`~memseal.engine.aboutness` reading (questions and hypotheticals replace
nothing; a fact replaces only a fact about the same person). A pack holds no
vectors, so the judgement is the rule's lexical one (the overlap of stemmed
content words); the marks a semantic read made are kept as they came.

A compaction summary is not one candidate but its lines: each line carries
the seq and day of the turn it came from (:func:`summary_line`, ``- [#57
2026-02-03] I live in Berlin.``), so a line is weighed at the time it was
said, never at the summary's. A line whose turn is itself a candidate is that
turn (it shares the turn's fate); a line a newer candidate replaced is shown
as changed (:func:`changed_line`), never as current. Lines of a summary
written before lines carried their turn are weighed at the summary's
``through`` seq.

A belief the background jobs drew from a turn (its ``turn:`` tags, the
:attr:`Ranked.sources`) restates that turn, later: when the turn is a
candidate too, the belief is weighed at the turn's time, just before it: the
turn a search ranked is never left out for its own restatement (the turn, not
the belief, is the newer), a later turn replaces what the belief says as it
replaces the turn, and each of a turn's beliefs is judged on what it says: its
own turn never replaces it (one turn holds many facts, and a later turn that
replaces the turn for one of them leaves the belief drawn from another). Only
an older turn counts, so a ``turn:`` tag, which anyone can write on a
learning, can make an item older, never newer. A belief says "the user" where
the turn said "I": the rule reads it as the speaker's words, as it reads the
turn's (:func:`statement`), so "the user" is no subject every belief shares.

Time here is ledger order (seq, then line order): a thread's turns are
logged as they are said. Deterministic: the same candidates give the same
order and marks, so a replayed pack re-derives byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from memseal.engine import LEARNING_KINDS
from memseal.engine.aboutness import sentences
from memseal.engine.currency import RULES, VERSION, Candidate, current_first
from memseal.ledger.errors import InvalidRequest

from ._job_records import SOURCE_TAG, tag

__all__ = [
    "Judged",
    "Line",
    "Ranked",
    "changed_line",
    "check_sources",
    "judge",
    "statement",
    "summary_line",
    "summary_lines",
    "weighed",
]

_LINE: Final = re.compile(
    r"^- \[#(?P<seq>\d{1,18})(?: (?P<day>\d{4}-\d{2}-\d{2}))?\] (?P<text>.*)$", re.S
)
_DAY: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
#: A line's key is its seq times this, plus its place (an item's is the last place).
_SLOTS: Final = 1_024


_SPEAKER: Final = re.compile(r"^([a-z][a-z0-9_-]{0,31}): ?(.*)$")
#: Words that say when, not what: time is weighed apart (the seq), so two statements of
#: one subject said at different times ("since March", "now") are compared on the rest.
_WHEN: Final = re.compile(
    r"\b(?:since|until|ago|now|nowadays|currently|anymore|any more|these days|again|today"
    r"|yesterday|tomorrow|tonight|recently|lately|just|still|(?:last|next|this) (?:week|month"
    r"|year|weekend)|jan(?:uary)?|feb(?:ruary)?|march|april|may|june|july|aug(?:ust)?"
    r"|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday|\d{4})\b",
    re.I,
)
#: How a belief names the speaker: "The user's manager is Priya", "the user left".
_THE_USER: Final = re.compile(r"\bthe user(?:'s|\u2019s)?(?=\W|$)", re.I)


def _speaker(match: re.Match[str]) -> str:
    return "I" if match.group(0).casefold() == "the user" else "my"


def statement(kind: str, text: str) -> str:
    """What ``text`` states, as the rule compares it: a conversation's user lines
    (an assistant's "Okay." says nothing of the subject), a learning's "the user"
    as the speaker's "I" (else two beliefs of the user share the word "user" and
    nothing else, and one replaced the other), its stating sentences only, less the
    words that say when."""
    if kind == "conversation":
        spoken = [m.group(2) for m in map(_SPEAKER.match, text.split("\n")) if m and m[1] == "user"]
        text = "\n".join(spoken)
    elif kind in LEARNING_KINDS:
        text = _THE_USER.sub(_speaker, text)
    said = " ".join(s.text for s in sentences(text) if s.states)
    return " ".join(_WHEN.sub(" ", said).split())


def summary_line(seq: int, observed_at: str, text: str) -> str:
    """A summary line for ``text`` said at turn ``seq`` on ``observed_at``'s day."""
    day = observed_at[:10] if _DAY.fullmatch(observed_at[:10]) else ""
    return f"- [#{seq}{f' {day}' if day else ''}] {text}"


def changed_line(line: Line, newer: str) -> str:
    """What a pack shows for a summary line a newer memory replaced: when and where,
    never the replaced value as if current."""
    day = f" {line.day}" if line.day else ""
    when = f"[#{line.seq}{day}] " if line.seq is not None else ""
    return f"- {when}(changed later: see {newer})"


class Line(msgspec.Struct, frozen=True, kw_only=True):
    """One line of a summary: the turn's seq and day (None and empty for an older
    summary's line) and what it says."""

    seq: int | None
    day: str
    text: str
    raw: str


def summary_lines(summary: str) -> list[Line]:
    """The non-blank lines of ``summary``, each with the turn it came from if it says."""
    out = []
    for raw in summary.split("\n"):
        if not raw.strip():
            continue
        match = _LINE.match(raw)
        if match is None:
            out.append(Line(seq=None, day="", text=raw.removeprefix("- "), raw=raw))
        else:
            seq = int(match.group("seq"))
            out.append(Line(seq=seq, day=match.group("day") or "", text=match["text"], raw=raw))
    return out


class Ranked(msgspec.Struct, frozen=True, kw_only=True):
    """A candidate as :func:`judge` takes it, best first: an item's id, kind, text,
    seq (``as_of``), entry (``ledger_ref``: what a summary line's turn names) and, for
    a belief, the tags naming the turns it was drawn from (``sources``)."""

    id: str
    kind: str
    text: str
    as_of: int
    ledger_ref: int
    sources: tuple[str, ...] = ()


def check_sources(sources: object) -> None:
    """``sources`` is None or maps ids to lists of tags, else InvalidRequest naming it."""
    if sources is None:
        return
    if not isinstance(sources, Mapping):
        raise InvalidRequest("`sources` must map item ids to lists of `turn:` tags")
    for key, tags in sources.items():
        if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
            raise InvalidRequest(f"`sources[{key!r}]` must be a list of tags (text)")


def _twins(ranked: Sequence[Ranked]) -> dict[str, Ranked]:
    """Each belief's newest source turn among ``ranked`` that is older than the belief (a
    belief none of whose turns is a candidate is weighed on its own, at its own seq).

    Only an older turn counts: a tag can then only make its item older than it is, so a
    ``turn:`` tag anyone wrote on a learning never lets it outlast a newer fact."""
    turns = {tag(SOURCE_TAG, r.id): r for r in ranked if r.kind == "conversation"}
    out: dict[str, Ranked] = {}
    for item in ranked:
        found = [turns[s] for s in item.sources if s in turns and turns[s].as_of < item.as_of]
        if found:
            out[item.id] = max(found, key=lambda r: r.as_of)
    return out


def weighed(ranked: Sequence[Ranked]) -> list[Ranked]:
    """``ranked`` with each belief at the time of the turn it was drawn from
    (:func:`_twins`): what a judgement by time (the phrasing list's) is to see."""
    twins = _twins(ranked)
    return [
        msgspec.structs.replace(r, as_of=twins[r.id].as_of) if r.id in twins else r for r in ranked
    ]


def _keys(ranked: Sequence[Ranked], twins: Mapping[str, Ranked]) -> dict[str, int]:
    """Each item's key in time (a summary's lines have their own): its seq's last slot,
    and a belief just before the turn it was drawn from (``twins``), so the turn is the
    newer."""
    under: dict[int, int] = {}  # a turn's seq -> its beliefs keyed so far
    keys: dict[str, int] = {}
    for item in ranked:
        if item.kind == "context_summary":
            continue
        twin = twins.get(item.id)
        below = 0 if twin is None else under.get(twin.as_of, 0) + 1
        if twin is None or below > _SLOTS // 2:  # (a thousand beliefs of one turn: own seq)
            keys[item.id] = item.as_of * _SLOTS + _SLOTS - 1
        else:
            under[twin.as_of] = below
            keys[item.id] = twin.as_of * _SLOTS + _SLOTS - 1 - below
    return keys


class Judged(msgspec.Struct, frozen=True, kw_only=True):
    """The rule's outcome: the ids current first, each replaced item's newest
    replacement, and each replaced summary line's (``(summary id, line index)``)."""

    order: tuple[str, ...]
    replaced: dict[str, str]
    lines: dict[tuple[str, int], str]


def judge(ranked: Sequence[Ranked]) -> Judged:
    """The engine's rule over ``ranked`` (best first; see the module docstring). A belief
    whose turn is a candidate is weighed just before that turn (:func:`_keys`)."""
    by_ref = {r.ledger_ref: r for r in ranked if r.kind != "context_summary"}
    twins = _twins(ranked)
    keys = _keys(ranked, twins)
    cands: dict[int, Candidate] = {}
    owner: dict[int, str] = {}  # key -> the pack id it stands for
    line_key: dict[tuple[str, int], int] = {}
    order: list[tuple[int, float]] = []
    for place, item in enumerate(ranked):
        if item.kind != "context_summary":
            key = keys[item.id]
            text = statement(item.kind, item.text)
            cands[key] = Candidate(seq=key, id=item.id, observed_at="", text=text)
            owner[key] = item.id
            order.append((key, -place))
            continue
        for index, line in enumerate(summary_lines(item.text)):
            twin = by_ref.get(line.seq) if line.seq is not None else None
            if twin is not None:  # the turn itself is a candidate: the line is that turn
                line_key[(item.id, index)] = keys[twin.id]
                continue
            at = item.as_of if line.seq is None else line.seq
            key = at * _SLOTS + min(index, _SLOTS - 2)
            if key in cands:
                continue
            text = statement("line", line.text)
            cands[key] = Candidate(seq=key, id=f"{item.id}#{index}", observed_at="", text=text)
            owner[key] = item.id
            line_key[(item.id, index)] = key
            order.append((key, -place))
    rule = msgspec.structs.replace(RULES[VERSION], window=max(len(order), 2))
    moved, marks = current_first(order, cands, rule)
    named = {c.id: k for k, c in cands.items()}
    replaced: dict[str, str] = {}
    for older, newest in marks.items():
        replaced_id = cands[older].id
        twin = twins.get(replaced_id)
        if "#" not in replaced_id and (twin is None or twin.id != owner[named[newest]]):
            replaced[replaced_id] = owner[named[newest]]
    lines: dict[tuple[str, int], str] = {}
    for (summary, index), key in line_key.items():
        newer_id = marks.get(key)
        newer: str | None = (
            owner[named[newer_id]] if newer_id is not None else replaced.get(cands[key].id)
        )
        if newer is not None and newer != summary:
            lines[(summary, index)] = newer
        elif newer == summary:
            lines[(summary, index)] = ""  # a later line of the same summary says it anew
    ids = list(dict.fromkeys(owner[key] for key, _ in moved))
    for place, item in enumerate(ranked):
        if item.id not in ids:  # a summary whose every line is a turn here
            ids.insert(min(place, len(ids)), item.id)
    return Judged(order=tuple(ids), replaced=replaced, lines=lines)
