"""Adapters from memseal to agent runtimes, each behind its own extra.

``memseal.integrations.langgraph`` (extra ``memseal[langgraph]``): :class:`MemsealStore`,
LangGraph's ``BaseStore`` whose every put and delete is a signed ledger entry.

``memseal.integrations.pydantic_ai`` (extra ``memseal[pydantic-ai]``): the body of
``AsyncToolset.to_pydantic_ai()``. The toolsets live in a lower layer that never imports
this package, so this package registers the adapter with them
(``memseal.tools.toolset.RUNTIME_ADAPTERS``), importing the runtime only when it is asked for.
"""

from __future__ import annotations

from typing import Any

from memseal.tools.toolset import RUNTIME_ADAPTERS, AsyncToolset

_PYDANTIC_AI_MISSING = (
    "to_pydantic_ai() needs pydantic-ai-slim; install it with `pip install memseal[pydantic-ai]`"
)


def _pydantic_ai(toolset: AsyncToolset) -> list[Any]:
    try:
        import pydantic_ai  # noqa: F401
    except ImportError as exc:
        raise ImportError(_PYDANTIC_AI_MISSING) from exc
    from memseal.integrations.pydantic_ai import tools

    return list(tools(toolset))


RUNTIME_ADAPTERS["pydantic_ai"] = _pydantic_ai
