"""memseal's tools for the OpenAI Agents SDK: ``toolset.to_openai_agents()``.

The adapter lives beside the toolsets (``memseal.tools._openai_agents``), whose
method imports it when called; this is its public name. Extra ``memseal[openai-agents]``.
"""

from memseal.tools._openai_agents import function_tools

__all__ = ["function_tools"]
