"""Adapters from memseal to agent runtimes, each behind its own extra.

* ``memseal.integrations.langgraph`` (extra ``memseal[langgraph]``): ``tool_node`` (a
  ``ToolNode`` whose calls are keyed by LangGraph's tool-call ids, in the run named by the
  thread) and :class:`MemsealStore`, LangGraph's ``BaseStore`` whose every put and delete
  is a signed ledger entry;
* ``memseal.integrations.openai_agents`` (extra ``memseal[openai-agents]``): the tools as
  OpenAI Agents SDK ``FunctionTool`` objects, keyed by the SDK's call id, reached as
  ``toolset.to_openai_agents()``;
* ``memseal.integrations.pydantic_ai`` (extra ``memseal[pydantic-ai]``): the tools as
  ``pydantic_ai.Tool`` objects keyed by the ``tool_call_id``, reached as
  ``toolset.to_pydantic_ai()``.

The toolsets live in a lower layer that never imports this package, so this package
registers the two toolset methods' bodies with it (``register_runtime``) when memseal is
imported; each runtime is imported only when its method is called.
"""

from typing import Any

from memseal.tools.toolset import register_runtime


def _openai_agents(toolset: Any, **options: Any) -> list[Any]:
    # Imported when asked: the SDK is an extra (memseal[openai-agents]).
    try:
        from memseal.integrations.openai_agents import function_tools
    except ImportError as exc:
        raise ImportError(
            "to_openai_agents() needs openai-agents; install it with "
            "`pip install memseal[openai-agents]`"
        ) from exc
    return function_tools(toolset, **options)


def _pydantic_ai(toolset: Any) -> list[Any]:
    try:
        import pydantic_ai  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "to_pydantic_ai() needs pydantic-ai-slim; install it with "
            "`pip install memseal[pydantic-ai]`"
        ) from exc
    from memseal.integrations.pydantic_ai import tools

    return list(tools(toolset))


register_runtime("openai_agents", _openai_agents)
register_runtime("pydantic_ai", _pydantic_ai)
