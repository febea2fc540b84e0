"""Pydantic AI tools over a memseal toolset, each call keyed by its ``tool_call_id``.

``run.toolset().to_pydantic_ai()`` (extra ``memseal[pydantic-ai]``) returns one
``pydantic_ai.Tool`` per memseal tool. Each is built with ``Tool.from_schema``, so
the model reads memseal's own JSON Schema, unchanged, and memseal is the one
validator of the arguments: a refusal is worded by memseal and, in a run, recorded
as memseal records every refused call. Only the argument validator is swapped (see
:class:`_Arguments`): anything that is not a JSON object reaches memseal as text.
The id Pydantic AI gives the call (``RunContext.tool_call_id``) is the call's key in
the run, so a run resumed from the start, from a saved ``message_history`` or by
DBOS recovery gets each logical call exactly once: a recorded id returns its
verified memo, a new id runs live.

It sits beside the toolsets, as ``to_langchain`` does, because it needs nothing
above them: the method imports it when called, and ``memseal.integrations.
pydantic_ai`` re-exports it.

What the model can act on (an invalid call, something not found, a tool this agent
does not have, a bad tool-call id) is raised as ``pydantic_ai.ToolFailed`` with
memseal's ``error:`` text: the model reads it in a failed ``ToolReturnPart`` and
may send a corrected call. Not ``ModelRetry``: its budget is shared by every
failure of a tool (one retry by default), so a model's second mistake would end
the run with ``UnexpectedModelBehavior``, and a memseal toolset never raises for a
model's mistake. Anything else (``ReplayDivergence``, ``ProvenanceError``, a
storage failure) is raised out of the agent run: no wording fixes it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, cast

from pydantic_ai import RunContext, Tool, ToolFailed
from pydantic_core import SchemaValidator

if TYPE_CHECKING:
    from .toolset import AsyncTool, AsyncToolset

__all__ = ["tools"]

# Arguments that are not a JSON object (null, a list, text that is not JSON) ride under
# this key, which no memseal schema has, as the text the model sent, so memseal refuses
# them in its own words. Pydantic AI calls a tool with the arguments' keys as keywords and
# fails on anything else; its own JSON parser refuses what memseal would name (a lone
# surrogate), as a retry whose budget a second one exhausts.
_NOT_AN_OBJECT: Final = ""


class _Text(str):
    """Argument text as the model sent it: a model's own JSON never decodes to this type."""

    __slots__ = ()


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")  # NaN, Infinity: memseal's decoder names them


class _Arguments:
    """Stands in for ``from_schema``'s validator (which accepts anything), never refusing.

    A dict is kept as it is (so validating again, as a durable runtime does after a step
    boundary, changes nothing); anything else is carried to memseal as :class:`_Text`.
    """

    def validate_json(self, data: str | bytes | bytearray, **_: Any) -> dict[str, Any]:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8", "surrogateescape")
        try:
            value = json.loads(text, parse_constant=_not_json)
        except ValueError:
            return {_NOT_AN_OBJECT: _Text(text)}
        return value if isinstance(value, dict) else {_NOT_AN_OBJECT: _Text(text)}

    def validate_python(self, value: Any, **_: Any) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        return {_NOT_AN_OBJECT: _Text(json.dumps(value))}


def _arguments(keywords: dict[str, Any]) -> Any:
    if keywords.keys() == {_NOT_AN_OBJECT} and isinstance(keywords[_NOT_AN_OBJECT], _Text):
        return str(keywords[_NOT_AN_OBJECT])
    return keywords


def _bind(toolset: AsyncToolset, name: str) -> Callable[..., Awaitable[str]]:
    async def call(ctx: RunContext[Any], **keywords: Any) -> str:
        outcome = await toolset.outcome(name, _arguments(keywords), key=ctx.tool_call_id)
        if outcome.is_error:
            raise ToolFailed(outcome.text)
        return outcome.text

    call.__name__ = name
    return call


def _tool(toolset: AsyncToolset, spec: AsyncTool) -> Tool[Any]:
    tool: Tool[Any] = Tool.from_schema(
        _bind(toolset, spec.name),
        name=spec.name,
        description=spec.description,
        json_schema=copy.deepcopy(spec.parameters),
        takes_ctx=True,
    )
    # from_schema validates nothing but hands the validated value on as keywords, so a
    # null or a list from the model would crash the run: they reach memseal instead.
    validator = cast(SchemaValidator, _Arguments())
    tool.function_schema = dataclasses.replace(tool.function_schema, validator=validator)
    return tool


def tools(toolset: AsyncToolset) -> list[Tool[Any]]:
    """One ``pydantic_ai.Tool`` per tool of ``toolset``; see the module docstring."""
    return [_tool(toolset, spec) for spec in toolset]
