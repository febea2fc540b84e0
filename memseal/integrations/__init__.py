"""Adapters from memseal to agent runtimes, each behind its own extra.

``memseal.integrations.langgraph`` (extra ``memseal[langgraph]``): :class:`MemsealStore`,
LangGraph's ``BaseStore`` whose every put and delete is a signed ledger entry.

``memseal.integrations.openai_agents`` (extra ``memseal[openai-agents]``): the tools as
OpenAI Agents SDK ``FunctionTool`` objects, keyed by the SDK's call id; reached as
``toolset.to_openai_agents()``, which this package registers with the tools layer.
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


register_runtime("openai_agents", _openai_agents)
