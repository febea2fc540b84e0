"""``briefing``: the system-prompt text that tells a model what its memory is.

Guidance behind a tool only steers the models that reach for it, so a host
says it up front (seeds/memco). Every word here comes from the scope and
the data: what the memory holds within the scope's reach (one recorded
``memory_explore`` of the ``kind`` facet), which tools the scope offers
and what each is for (the first sentence of its own spec), the trust floor
and default, whether writes are offered, frozen or absent, and optionally
a session-start :class:`ContextPack`. The brief fits ``budget_tokens``
(counted as the pack counts): the pack goes first, then the tool lines
from the last, and a brief whose fixed part alone is over is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

from memseal.engine.trust import READABLE
from memseal.ledger.errors import InvalidRequest
from memseal.tools.scope import ToolScope

from .pack import ContextPack, count_tokens

__all__ = ["BriefingSource", "briefing"]


class BriefingSource(Protocol):
    """A recorded run (or recorded tools) for the scope being briefed.

    A port with several implementations: the replay layer's ``Run`` (a session's
    model tools), ``PastReader`` (a view of the past) and the top layer's
    ``RecordedTools`` (the MCP server's brief, one fresh run per read).
    """

    def specs(self) -> Sequence[Any]:
        """The specs of the tools the scope offers."""

    def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Awaitable[Any]:
        """Call a memory tool, recorded."""


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def _holdings(counted: Mapping[str, Any]) -> str:
    total = int(counted.get("total", 0))
    if total == 0:
        return "It holds nothing yet."
    buckets = ", ".join(f"{b['count']} {b['value']}" for b in counted.get("buckets", ()))
    more = " and more kinds" if counted.get("more_buckets") else ""
    return f"It holds {total} memories in your reach: {buckets}{more}."


def _trust(scope: ToolScope) -> str:
    lowest = READABLE.index(scope.floor)
    above = ", ".join(READABLE[lowest:])
    return (
        f"Reads return memories of trust `{scope.default_trust}` and above unless you pass "
        f"`min_trust`; you may ask for as low as `{scope.floor}` ({above}), never lower."
    )


def _writes(scope: ToolScope, offered: Sequence[str]) -> str:
    writing = [n for n in offered if n in ("memory_store", "memory_forget")]
    if not scope.writes or not writing:
        return "Your memory is read-only here: you cannot store or forget."
    if scope.frozen:
        return "Writes are frozen: " + ", ".join(writing) + " will be refused."
    return "What you store is kept as `unverified` until a reviewer vouches for it."


async def briefing(
    source: BriefingSource,
    scope: ToolScope,
    *,
    pack: ContextPack | None = None,
    budget_tokens: int = 2_000,
    key: str | None = "brief",
) -> str:
    """The system-prompt text for ``scope`` (see the module docstring).

    ``source`` is the scope's recorded run or tools (``memory.run(id, scope)``);
    the one read it makes is keyed ``key`` (``{key}/holds``), so a resumed
    session gets the same brief.
    """
    if not isinstance(scope, ToolScope):
        raise InvalidRequest("`scope` must be a ToolScope")
    if pack is not None and not isinstance(pack, ContextPack):
        raise InvalidRequest("`pack` must be a ContextPack or None")
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise InvalidRequest("`budget_tokens` must be a whole number, 1 or more")
    specs = list(source.specs())
    offered = [spec.name for spec in specs]
    if "memory_explore" in offered:
        counted = await source.call(
            "memory_explore",
            {"facet": "kind", "limit": 50},
            key=None if key is None else f"{key}/holds",
        )
        holds = _holdings(counted)
    else:
        holds = "Its contents are not listed to you here (memory_explore is not offered)."
    head = [
        "# Your memory",
        f"You have a long-term memory. {holds}",
        _trust(scope),
        _writes(scope, offered),
    ]
    tools = [f"- `{spec.name}`: {_first_sentence(spec.description)}" for spec in specs]

    def render(tool_lines: int, with_pack: bool) -> str:
        parts = ["\n".join(head)]
        if tool_lines:
            parts.append("## When to use each tool\n" + "\n".join(tools[:tool_lines]))
        if with_pack and pack is not None and not pack.empty:
            parts.append(pack.markdown().rstrip("\n"))
        return "\n\n".join(parts) + "\n"

    shown, with_pack = len(tools), pack is not None
    text = render(shown, with_pack)
    if count_tokens(text) > budget_tokens and with_pack:
        with_pack = False
        text = render(shown, with_pack)
    while count_tokens(text) > budget_tokens and shown:
        shown -= 1
        text = render(shown, with_pack)
    if count_tokens(text) > budget_tokens:
        raise InvalidRequest(
            f"`budget_tokens` {budget_tokens} is below what the brief must say "
            f"({count_tokens(text)} tokens)"
        )
    return text
