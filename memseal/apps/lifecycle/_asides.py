"""Asides: what only supposes or is someone else's, read against what a pack is asked.

A pack puts hypotheticals and other people's facts after every other item, in a section
of their own (:mod:`.pack`), and a summary's lines about someone else go first when the
summary is cut: they answer nothing about the user. Whether a text supposes and whose
fact it is come from the engine's reading (:mod:`memseal.engine.aboutness`), a question's
too; a question that supposes, asks about someone else or names the person is not
answered by asides only, so nothing is set apart for it.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from memseal.engine.aboutness import About, about

__all__ = ["Asked", "apart", "asked_by"]

_WORD: Final = re.compile(r"\w+")


class Asked(msgspec.Struct, frozen=True, kw_only=True):
    """What a query asks about (its :func:`about` reading) and the words it says."""

    read: About
    words: frozenset[str]


def asked_by(query: str) -> Asked:
    """What ``query`` asks about (an empty query: the user, as nothing is asked)."""
    read = about(query) if query else About()
    return Asked(read=read, words=frozenset(_WORD.findall(query.casefold())))


def apart(hypothetical: bool, subject: str | None, asked: Asked) -> bool:
    """Whether a text that supposes (``hypothetical``) or is ``subject``'s fact is an
    aside to the question: it only supposes or is someone else's while the question is not.

    A question that names the person asks about them, whoever its grammatical subject
    is ("when is Noor's school play?" is answered by Noor's facts)."""
    if hypothetical and not asked.read.hypothetical:
        return True
    if subject is None or asked.read.subject is not None:
        return False
    return not frozenset(_WORD.findall(subject.casefold())) <= asked.words
