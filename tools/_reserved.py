"""Reserved tags: the tags a part of memseal finds its own items by, which no model forges.

A host part that keeps items through the tools (``MemsealStore``, LangGraph's
long-term store) finds them by a tag. Were any ``memory_store`` free to write
that tag, a model handed the tools at the same place could store an item the
part takes for its own (a value the host's ``get`` returns, a key it never put).
So each reserved tag belongs to one node, ``type:name``: ``memory_store``
writes it only from a scope whose place ends in exactly that node (where the
part writes), and refuses it anywhere else, naming ``tags``, before anything is
written. A model placed elsewhere can neither write there (writes land at its
own place) nor write the tag where it is. The node is the whole last segment,
never only its type: a host may well name its own place ``langgraph:support-bot``,
and a model's tools there must not take the store's tags (the store refuses a
host scope at its node, and ``tool_node`` a model scope there). The rule reads
nothing but the call's tags and its scope's place, so a replayed call meets it as
the recorded one did.

A reservation ending in ``:`` is a prefix; any other is one whole tag. Tags are
compared as the engine keeps them (NFC, stripped) and case-folded, so no
spelling of a reserved tag gets through.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["RESERVED_TAGS", "Reservation", "owner_node_at", "reserved_tag_refusal"]


@dataclass(frozen=True, slots=True)
class Reservation:
    """One reserved tag (or prefix), the node (``type:name``) its owner writes it at, and
    the owner."""

    tag: str
    node: str
    owner: str

    def covers(self, tag: str) -> bool:
        """Whether ``tag`` is this reservation's (compared as the engine keeps tags)."""
        folded = unicodedata.normalize("NFC", tag).strip().casefold()
        return folded.startswith(self.tag) if self.tag.endswith(":") else folded == self.tag


#: Every reserved tag. MemsealStore keeps its items at ``<place>/langgraph:store``.
RESERVED_TAGS: Final[tuple[Reservation, ...]] = (
    Reservation(tag="langgraph-store", node="langgraph:store", owner="MemsealStore"),
    Reservation(tag="lgk:", node="langgraph:store", owner="MemsealStore"),
)


def owner_node_at(place: str) -> Reservation | None:
    """A reservation whose node ``place`` ends in (a scope there may write its tags), or
    None: the place is no owner's node."""
    last = place.rpartition("/")[2]
    return next((r for r in RESERVED_TAGS if r.node == last), None)


def reserved_tag_refusal(tags: Sequence[str], place: str) -> str | None:
    """Why storing ``tags`` at ``place`` is refused (naming the tag), or None when it is not."""
    last = place.rpartition("/")[2]
    for i, tag in enumerate(tags):
        for reservation in RESERVED_TAGS:
            if reservation.covers(tag) and last != reservation.node:
                return (
                    f"`tags[{i}]`: {tag!r} is reserved for {reservation.owner}'s own items,"
                    f" stored only at a `{reservation.node}` node; choose another tag"
                )
    return None
