"""Policy, apart from registration: which tools a scope offers, and which calls it refuses.

:func:`refusal_before_approval` is what an approval gate asks first (seeds/
memory-add-tool): the refusal a call meets whatever a human would answer,
read before the arguments are even looked at, so no one is asked to approve
a call that cannot act. It answers, in this order, for

1. a tool outside the scope's allowlist (neither offered nor callable);
2. a write tool on read-only tools (``writes=False``: not offered);
3. a write tool under a write freeze (``frozen=True``: offered, refused).

The call itself refuses the same, in the same order, before its schema
check: :class:`Refusal` is what it raises. A refusal is an
:class:`Unsupported` (the call is well formed; the scope does not offer
the operation), so hosts that handle the seed's two errors handle it too.
"""

from __future__ import annotations

from typing import Final, Literal

from memseal.ledger.errors import Unsupported

from .catalog import TRAITS
from .scope import ToolScope

__all__ = [
    "REFUSAL_CODES",
    "Refusal",
    "check_unfrozen",
    "has_side_effects",
    "offered",
    "refusal_before_approval",
]

RefusalCode = Literal["not_allowed", "read_only", "frozen"]
REFUSAL_CODES: Final[tuple[RefusalCode, ...]] = ("not_allowed", "read_only", "frozen")


class Refusal(Unsupported):
    """A call the scope refuses by policy; ``code`` says which rule, ``tool`` which tool."""

    def __init__(self, tool: str, code: RefusalCode, message: str) -> None:
        self.tool = tool
        self.code = code
        super().__init__(f"{tool}: {message}")


def has_side_effects(name: str) -> bool:
    """Whether tool ``name`` writes (what an approval gate asks about); False for unknown names."""
    traits = TRAITS.get(name)
    return traits is not None and traits.side_effects


def refusal_before_approval(
    scope: ToolScope, name: str, arguments: object = None
) -> Refusal | None:
    """The refusal a call to ``name`` meets under ``scope``, or None when it may run.

    ``arguments`` are not looked at (they are unchecked at this point); an
    unknown tool name is no refusal here (the call reports it as an
    invalid request).
    """
    del arguments
    traits = TRAITS.get(name) if isinstance(name, str) else None
    if traits is None:
        return None
    if not scope.offers(name):
        return Refusal(
            name, "not_allowed", "this tool is not allowed for this agent (the host's allowlist)"
        )
    if traits.side_effects and not scope.writes:
        return Refusal(
            name, "read_only", "this agent's memory tools are read-only (set by the host)"
        )
    if traits.side_effects and scope.frozen:
        return Refusal(name, "frozen", "memory writes are frozen for this agent (set by the host)")
    return None


def check_unfrozen(scope: ToolScope, moment: str, what: str) -> None:
    """Raise the ``frozen`` :class:`Refusal` of ``moment`` (a host's write made for the
    agent: a session's turn, a belief build's retraction) when ``scope`` is frozen:
    ``what`` says what is not done. Raised before any call, so nothing is written."""
    if scope.frozen:
        raise Refusal(
            moment, "frozen", f"memory writes are frozen for this agent (set by the host): {what}"
        )


def offered(scope: ToolScope, name: str, modes: tuple[str, ...]) -> bool:
    """Whether ``scope`` offers tool ``name`` (frozen writes are offered, then refused)."""
    traits = TRAITS.get(name)
    if traits is None or not scope.offers(name):
        return False
    if traits.side_effects and not scope.writes:
        return False
    return not (name == "memory_fetch" and not modes)
