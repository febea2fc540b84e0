"""Reserved tags: the tags a part of memseal finds its own items by, which no model forges.

A host part that keeps items through the tools (``MemsealStore``, LangGraph's
long-term store) finds them by a tag. Were any ``memory_store`` free to write
that tag, a model handed the tools at the same place could store an item the
part takes for its own (a value the host's ``get`` returns, a key it never put).
So each reserved tag belongs to a node type: ``memory_store`` writes it only
from a scope placed at a node whose last segment is of that type (where the
part writes), and refuses it anywhere else, naming ``tags``, before anything is
written. A model placed elsewhere can neither write there (writes land at its
own place) nor write the tag where it is. The rule reads nothing but the call's
tags and its scope's place, so a replayed call meets it as the recorded one did.

A reservation ending in ``:`` is a prefix; any other is one whole tag. Tags are
compared as the engine keeps them (NFC, stripped) and case-folded, so no
spelling of a reserved tag gets through.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["RESERVED_TAGS", "Reservation", "reserved_tag_refusal"]


@dataclass(frozen=True, slots=True)
class Reservation:
    """One reserved tag (or prefix), the node type its owner writes it at, and the owner."""

    tag: str
    node: str
    owner: str

    def covers(self, tag: str) -> bool:
        """Whether ``tag`` is this reservation's (compared as the engine keeps tags)."""
        folded = unicodedata.normalize("NFC", tag).strip().casefold()
        return folded.startswith(self.tag) if self.tag.endswith(":") else folded == self.tag


#: Every reserved tag. MemsealStore keeps its items at ``<place>/langgraph:store``.
RESERVED_TAGS: Final[tuple[Reservation, ...]] = (
    Reservation(tag="langgraph-store", node="langgraph", owner="MemsealStore"),
    Reservation(tag="lgk:", node="langgraph", owner="MemsealStore"),
)


def reserved_tag_refusal(tags: Sequence[str], place: str) -> str | None:
    """Why storing ``tags`` at ``place`` is refused (naming the tag), or None when it is not."""
    last = place.rpartition("/")[2].partition(":")[0]
    for i, tag in enumerate(tags):
        for reservation in RESERVED_TAGS:
            if reservation.covers(tag) and last != reservation.node:
                return (
                    f"`tags[{i}]`: {tag!r} is reserved for {reservation.owner}'s own items,"
                    f" stored only at a `{reservation.node}:` node; choose another tag"
                )
    return None
