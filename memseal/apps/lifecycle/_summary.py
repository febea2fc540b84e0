"""The default compaction summary: the user's statements, each dated by its turn.

:class:`ExtractiveSummariser` keeps what the user stated (never a question or a
hypothetical: :mod:`memseal.engine.aboutness`), one line a sentence, oldest
first. Each line carries the seq and day of the turn it came from
(``- [#57 2026-02-03] I live in Berlin.``), so a pack weighs it at the time it
was said, not at the summary's (:mod:`._current`). A newer line about the same
subject replaces the older by the engine's currency rule (its lexical
judgement: a summary holds no vectors), never by a list of phrasings; when the
lines exceed the budget the oldest go first. Deterministic and offline.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import msgspec

from memseal.engine.aboutness import sentences
from memseal.engine.currency import RULES, VERSION, Candidate, current_first

from ._current import summary_line, summary_lines
from .pack import count_tokens

__all__ = ["ExtractiveSummariser", "FoldedTurn"]

_SPEAKER: Final = re.compile(r"^([a-z][a-z0-9_-]{0,31}): (.*)$")
_SLOTS: Final = 1_024


class FoldedTurn(msgspec.Struct, frozen=True, kw_only=True):
    """A turn handed to a summariser: its id, seq, ``role: text`` lines and when it was
    said (``observed_at``, RFC 3339; empty when not known)."""

    id: str
    ledger_ref: int
    text: str
    observed_at: str = ""


def _current(lines: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """``lines`` (key, what it says, the line) less those a newer one replaces."""
    cands = {
        key: Candidate(seq=key, id=str(key), observed_at="", text=text) for key, text, _ in lines
    }
    ranked = [(key, 0.0) for key, _, _ in reversed(lines)]
    rule = msgspec.structs.replace(RULES[VERSION], window=max(len(ranked), 2))
    _, marks = current_first(ranked, cands, rule)
    return [line for line in lines if line[0] not in marks]


class ExtractiveSummariser:
    """The default summariser (see the module docstring)."""

    async def summarise(
        self, previous: str | None, turns: Sequence[FoldedTurn], budget_tokens: int
    ) -> str:
        """The summary: ``previous`` with the user's statements in ``turns`` folded in."""
        lines: list[tuple[int, str, str]] = []
        for index, old in enumerate(summary_lines(previous or "")):
            # An older summary's undated lines come before every dated one.
            at = -1 if old.seq is None else old.seq
            lines.append((at * _SLOTS + min(index, _SLOTS - 1), old.text, old.raw))
        for turn in turns:
            spoken = []
            for raw in turn.text.split("\n"):
                match = _SPEAKER.match(raw)
                if match is not None and match.group(1) == "user":
                    spoken.append(match.group(2))
            for index, sentence in enumerate(sentences("\n".join(spoken))):
                if not sentence.states:
                    continue
                # Said again: the newer line stands, at the time it was said again.
                lines = [entry for entry in lines if entry[1] != sentence.text]
                line = summary_line(turn.ledger_ref, turn.observed_at, sentence.text)
                key = turn.ledger_ref * _SLOTS + min(index, _SLOTS - 1)
                lines.append((key, sentence.text, line))
        lines.sort(key=lambda entry: entry[0])
        kept = [raw for _, _, raw in _current(lines)]
        while kept and count_tokens("\n".join(kept)) > budget_tokens:
            kept.pop(0)
        return "\n".join(kept)
