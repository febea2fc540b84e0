"""A model's tool call, as the client libraries hand it over: its name, arguments and id.

The id is the call's key in a run (see docs/replay.md, "Keyed calls"): a
host that passes the tool call itself, rather than its name and arguments,
resumes exactly once with no extra code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from memseal.ledger.errors import InvalidRequest

__all__ = ["ToolCallParts", "tool_call_parts"]


class ToolCallParts(NamedTuple):
    """What a tool call names: the tool, its arguments (object or JSON text), its id."""

    name: Any
    arguments: Any
    key: Any


def _get(value: Any, field: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(field)
    return getattr(value, field, None)


def tool_call_parts(call: Any) -> ToolCallParts:
    """The parts of an OpenAI Chat Completions ``tool_calls[]`` item, an OpenAI Responses
    ``function_call`` item, an Anthropic ``tool_use`` block or a LangChain ``ToolCall``
    (a dict or the SDK's object); raise :class:`InvalidRequest` naming ``tool_call``."""
    function = _get(call, "function")
    if function is not None:  # OpenAI Chat Completions
        return ToolCallParts(_get(function, "name"), _get(function, "arguments"), _get(call, "id"))
    kind = _get(call, "type")
    if kind == "tool_use":  # Anthropic
        return ToolCallParts(_get(call, "name"), _get(call, "input"), _get(call, "id"))
    if kind == "function_call":  # OpenAI Responses: its id is the item's, call_id the call's
        return ToolCallParts(_get(call, "name"), _get(call, "arguments"), _get(call, "call_id"))
    if kind in ("tool_call", None) and isinstance(call, Mapping) and "args" in call:
        return ToolCallParts(call.get("name"), call.get("args"), call.get("id"))  # LangChain
    raise InvalidRequest(
        "`tool_call` must be an OpenAI or Anthropic tool call or a LangChain ToolCall, "
        f"not {type(call).__name__}"
    )
