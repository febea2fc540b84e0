"""memseal's tools for the OpenAI Agents SDK: ``toolset.to_openai_agents()``.

It sits beside the toolsets, as ``to_langchain`` does, because it needs nothing
above them: the method imports it when called, and ``memseal.integrations.
openai_agents`` re-exports it. The SDK itself is the extra ``memseal[openai-agents]``.

Each tool is an ``agents.FunctionTool`` whose ``on_invoke_tool`` hands the
SDK's ``ToolContext.tool_call_id`` (the model's ``call_id``, the same id a
session or ``result.to_input_list()`` keeps beside the call's output) to the
toolset as the call's key. So an agent resumed from an ``SQLiteSession``, from
``to_input_list()`` or by a re-run from the start gets each recorded call's
verified memo, in any order, and each new id runs live once.

* The schema is the strict subset the SDK (and OpenAI's strict mode) accepts,
  :func:`~memseal.tools.specs.openai_strict`: every property required, the
  optional ones nullable, every object closed. The SDK's own strict rewrite
  leaves it as it is, and the tools read a null as an absent argument.
  ``strict=False`` hands the plain schema instead.
* What the model can act on (a bad argument, a refusal, a bad key) comes back
  as the tool's ``error: ...`` text, as ``to_langchain`` does; anything else
  (``ReplayDivergence``, ``ProvenanceError``, storage failures) is raised and
  ends the run: the SDK passes an ``on_invoke_tool`` exception through, and no
  wording a model reads fixes it.
* A sync :class:`~memseal.tools.Toolset` (``memseal.open_sync``) works too: its
  blocking call runs in a worker thread, so the SDK's event loop never waits on
  the facade's.

Other ``FunctionTool`` fields (``needs_approval``, ``timeout_seconds``,
``is_enabled``...) pass through as keyword options.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from agents import FunctionTool
from agents.tool_context import ToolContext

from .specs import openai_strict

if TYPE_CHECKING:  # the toolset imports this module when asked: a type, not an import
    from .toolset import AsyncTool, AsyncToolset, Tool, Toolset

__all__ = ["function_tools"]


def function_tools(
    toolset: AsyncToolset | Toolset, *, strict: bool = True, **options: Any
) -> list[FunctionTool]:
    """One ``agents.FunctionTool`` per tool of ``toolset``, keyed by the SDK's call id.

    ``toolset`` is ``run.toolset()``, ``memory.tools(scope, run_id=...).toolset()``
    or a sync facade's ``memory.toolset(scope, run_id=...)``. ``options`` are
    further ``FunctionTool`` fields.
    """
    tools: Iterable[AsyncTool | Tool] = toolset
    return [
        FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=(
                openai_strict(tool.parameters) if strict else copy.deepcopy(tool.parameters)
            ),
            on_invoke_tool=_invoker(toolset, tool.name),
            strict_json_schema=strict,
            **options,
        )
        for tool in tools
    ]


def _invoker(toolset: AsyncToolset | Toolset, name: str) -> Callable[[ToolContext[Any], str], Any]:
    # Told apart by the method, not by isinstance: the toolset module imports this one.
    if inspect.iscoroutinefunction(toolset.outcome):
        on_loop = cast("AsyncToolset", toolset)

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            # Always set: the SDK runs a function tool with a ToolContext for its call.
            return (await on_loop.outcome(name, arguments, context.tool_call_id)).text

        return invoke
    blocking = cast("Toolset", toolset)

    async def invoke_blocking(context: ToolContext[Any], arguments: str) -> str:
        # A sync toolset waits on the facade's loop: a worker thread keeps the SDK's free.
        outcome = await asyncio.to_thread(blocking.outcome, name, arguments, context.tool_call_id)
        return outcome.text

    return invoke_blocking
