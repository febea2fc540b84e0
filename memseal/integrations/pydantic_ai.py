"""Pydantic AI tools over a memseal toolset: ``run.toolset().to_pydantic_ai()``.

The adapter lives beside the toolsets (``memseal.tools._pydantic_ai``), whose
method imports it when called; this is its public name. Extra ``memseal[pydantic-ai]``.
"""

from memseal.tools._pydantic_ai import tools

__all__ = ["tools"]
