"""The pack's last phrasing list: a few first-person forms, read when the rule cannot.

The engine's currency rule (:mod:`._current`) links a newer statement to an older one
about the same subject by similarity. Without an embedder that knows words (the
hashing embedder), "I live in Berlin" and "I moved to Lisbon" share no word and
nothing links them, so a pack would show both. Until a similarity that sees it is
served everywhere, this module keeps the older rule for those few forms: the newest
statement of ``I live / moved / relocated ...``, ``I work at / joined ...``,
``my name is`` and ``my <thing> is`` wins. It only adds to what the rule judged
(:func:`phrased`), never overrides it, and weighs a summary line at its own turn.
It is meant to go once a pack has a reading that sees these links.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import msgspec

from memseal.engine import LEARNING_KINDS

from ._current import Judged, Ranked, summary_lines

__all__ = ["phrased", "text_subjects"]

_FRAMES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "residence",
        re.compile(
            r"\bi(?: now|'ve| have| just)? (?:live|lived|moved|relocated|am based|'m based|"
            r"am living|'m living|reside)\b|\bmy home is\b"
        ),
    ),
    (
        "work",
        re.compile(
            r"\bi(?: now|'ve| have| just)? (?:work|started working|joined|am employed|'m employed"
            r"|switched jobs)\b|\bmy (?:job|employer|company) (?:is|was)\b"
        ),
    ),
    ("name", re.compile(r"\bmy name is\b|\bcall me\b")),
)
_MY: Final = re.compile(r"\bmy ((?:favou?rite |preferred )?[a-z]+) (?:is|are)\b")
_SPEAKER: Final = re.compile(r"^([a-z][a-z0-9_-]{0,31}): ", re.M)
_SENTENCE: Final = re.compile(r"[^.!?\n]+[.!?]?")


def _said(text: str) -> str:
    """The statements of ``text``, less the questions (asking "where do I live?"
    states nothing about where one lives)."""
    kept = [m.group(0) for m in _SENTENCE.finditer(text) if not m.group(0).endswith("?")]
    return " ".join(kept).casefold().replace("\u2019", "'")


def text_subjects(statements: str) -> frozenset[str]:
    """What ``statements`` (casefolded) say about the user: ``residence``, ``work``,
    ``name``, ``my:<thing>``."""
    found = {name for name, pattern in _FRAMES if pattern.search(statements)}
    found.update(f"my:{m.group(1)}" for m in _MY.finditer(statements))
    return frozenset(found)


def _subjects(kind: str, text: str) -> frozenset[str]:
    """What an item states: a conversation's user lines, a learning whole."""
    if kind == "conversation":
        spoken = [
            line[m.end() :]
            for line in text.split("\n")
            if (m := _SPEAKER.match(line)) is not None and m.group(1) == "user"
        ]
        return text_subjects(_said("\n".join(spoken)))
    return text_subjects(_said(text)) if kind in LEARNING_KINDS else frozenset()


#: A statement: its time (seq, then line), the pack id holding it, and its summary line.
_At = tuple[tuple[int, int], str, int | None]


def _statements(ranked: Sequence[Ranked]) -> list[tuple[_At, frozenset[str]]]:
    out: list[tuple[_At, frozenset[str]]] = []
    for item in ranked:
        if item.kind != "context_summary":
            out.append((((item.as_of, 1 << 30), item.id, None), _subjects(item.kind, item.text)))
            continue
        for index, line in enumerate(summary_lines(item.text)):
            seq = item.as_of if line.seq is None else line.seq
            out.append((((seq, index), item.id, index), text_subjects(_said(line.text))))
    return out


def phrased(judged: Judged, ranked: Sequence[Ranked]) -> Judged:
    """``judged`` with what the phrasing list adds: an item or summary line each of
    whose subjects a newer statement of the pack states again is replaced by it."""
    said = _statements(ranked)
    newest: dict[str, _At] = {}
    for at, about in said:
        for subject in about:
            if subject not in newest or newest[subject][0] < at[0]:
                newest[subject] = at
    replaced = dict(judged.replaced)
    lines = dict(judged.lines)
    for (when, owner, index), about in said:
        if not about or not all(newest[s][0] > when for s in about):
            continue
        newer = newest[max(about, key=lambda s: newest[s][0])][1]
        if index is None:
            if newer != owner:
                replaced.setdefault(owner, newer)
        elif (owner, index) not in lines:
            lines[(owner, index)] = "" if newer == owner else newer
    return msgspec.structs.replace(judged, replaced=replaced, lines=lines)
