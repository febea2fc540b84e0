"""The seven tools by name, and what each one does to memory.

The names are the seed's (tinymemory): five reads and two writes. Each
tool's traits say whether it has side effects (what an approval gate asks
about, seeds/memory-add-tool), and carry the MCP hints derived from them:
reads are read-only, forget is destructive, and every tool is idempotent
(a read changes nothing; storing the same memory again is a replay;
forgetting the same ids again finds nothing more to forget).
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

__all__ = [
    "READ_TOOLS",
    "TOOL_NAMES",
    "TRAITS",
    "WRITE_TOOLS",
    "ToolName",
    "Traits",
    "is_tool_name",
]

ToolName = Literal[
    "memory_recall",
    "memory_fetch",
    "memory_list",
    "memory_get",
    "memory_explore",
    "memory_store",
    "memory_forget",
]

READ_TOOLS: Final[tuple[ToolName, ...]] = (
    "memory_recall",
    "memory_fetch",
    "memory_list",
    "memory_get",
    "memory_explore",
)
WRITE_TOOLS: Final[tuple[ToolName, ...]] = ("memory_store", "memory_forget")
#: Every tool, in the order specs list them.
TOOL_NAMES: Final[tuple[ToolName, ...]] = READ_TOOLS + WRITE_TOOLS


class Traits(msgspec.Struct, frozen=True, kw_only=True):
    """What calling a tool does: ``side_effects`` (it writes), and the MCP hints."""

    title: str
    side_effects: bool
    destructive: bool
    idempotent: bool

    @property
    def read_only(self) -> bool:
        """Whether the tool only reads (no side effects, so no approval is needed)."""
        return not self.side_effects


TRAITS: Final[dict[str, Traits]] = {
    "memory_recall": Traits(
        title="Recall from memory", side_effects=False, destructive=False, idempotent=True
    ),
    "memory_fetch": Traits(
        title="Search memory", side_effects=False, destructive=False, idempotent=True
    ),
    "memory_list": Traits(
        title="List memory", side_effects=False, destructive=False, idempotent=True
    ),
    "memory_get": Traits(
        title="Get memories by id", side_effects=False, destructive=False, idempotent=True
    ),
    "memory_explore": Traits(
        title="Explore memory", side_effects=False, destructive=False, idempotent=True
    ),
    "memory_store": Traits(
        title="Store a memory", side_effects=True, destructive=False, idempotent=True
    ),
    "memory_forget": Traits(
        title="Forget memories", side_effects=True, destructive=True, idempotent=True
    ),
}


def is_tool_name(value: object) -> bool:
    """Whether ``value`` names one of the seven memory tools."""
    return isinstance(value, str) and value in TRAITS
