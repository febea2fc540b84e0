"""Pydantic AI tools over a memseal toolset, each call keyed by its ``tool_call_id``.

``run.toolset().to_pydantic_ai()`` (extra ``memseal[pydantic-ai]``) returns one
``pydantic_ai.Tool`` per memseal tool. Each is built with ``Tool.from_schema``, so
the model reads memseal's own JSON Schema, unchanged, and memseal is the one
validator of the arguments: a refusal is worded by memseal and, in a run, recorded
as memseal records every refused call. The id Pydantic AI gives the call
(``RunContext.tool_call_id``) is the call's key in the run, so a run resumed from
the start, from a saved ``message_history`` or by DBOS recovery gets each logical
call exactly once: a recorded id returns its verified memo, a new id runs live.

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
from typing import TYPE_CHECKING, Any, Final

from pydantic_ai import RunContext, Tool, ToolFailed
from pydantic_core import SchemaValidator, core_schema

if TYPE_CHECKING:
    from memseal.tools.toolset import AsyncTool, AsyncToolset

__all__ = ["tools"]

# Arguments that are not a JSON object (null, a list, a number) ride under this key,
# which no memseal schema has, so memseal refuses them in its own words. Pydantic AI
# calls a tool with the arguments' keys as keywords and fails on anything else.
_NOT_AN_OBJECT: Final = ""


def _as_keywords(value: Any) -> dict[str, Any]:
    # Idempotent (a dict is kept as it is), as a validator must be: a durable runtime
    # validates arguments again after they crossed a step boundary as JSON.
    return value if isinstance(value, dict) else {_NOT_AN_OBJECT: value}


_ANY_ARGUMENTS: Final = SchemaValidator(core_schema.no_info_plain_validator_function(_as_keywords))


def _arguments(keywords: dict[str, Any]) -> Any:
    if keywords.keys() == {_NOT_AN_OBJECT} and not isinstance(keywords[_NOT_AN_OBJECT], dict):
        # Back to the JSON text the model sent: a None handed to the tools would read as
        # arguments left out, and a model's explicit null must be refused.
        return json.dumps(keywords[_NOT_AN_OBJECT])
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
    tool.function_schema = dataclasses.replace(tool.function_schema, validator=_ANY_ARGUMENTS)
    return tool


def tools(toolset: AsyncToolset) -> list[Tool[Any]]:
    """One ``pydantic_ai.Tool`` per tool of ``toolset``; see the module docstring."""
    return [_tool(toolset, spec) for spec in toolset]
