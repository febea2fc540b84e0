"""memseal.tools: the seven memory tools a host hands its model.

* :class:`MemoryTools` runs the tools over an engine for one host-fixed
  :class:`ToolScope`: ``specs()``, ``call(name, arguments)``, and the
  two-phase ``prepare`` a recorder uses. It records nothing: it is this
  layer's building block, and hosts get the recorded tools from
  ``memory.tools(scope)`` (every call a signed entry);
* :class:`AsyncToolset` / :class:`Toolset` hand the same tools to OpenAI,
  Anthropic, LangChain and MCP (:func:`mcp_server`), and turn what a model
  got wrong into text it can read;
* :func:`refusal_before_approval` is the policy an approval gate asks first;
* :mod:`memseal.tools.context` compiles the context.md brief.

See docs/tools.md. Modules: ``catalog`` (names and traits), ``scope``,
``args`` (strict argument types), ``decode``, ``specs`` (JSON Schemas), ``render``,
``policy``, ``memory_tools``, ``toolset``, ``mcp_server``, ``context``.
"""

from .args import arguments_type
from .catalog import READ_TOOLS, TOOL_NAMES, TRAITS, WRITE_TOOLS, ToolName, Traits
from .context import DEFAULT_BRIEFS, Brief, ContextSpec
from .decode import FORBIDDEN_KEYS, MAX_ARGUMENT_BYTES, as_plain
from .mcp_server import mcp_server
from .memory_tools import MemoryTools, PreparedCall, cited_ids
from .policy import Refusal, has_side_effects, refusal_before_approval
from .render import to_text
from .scope import ToolScope
from .specs import ToolSpec, parameters_for, spec_for
from .toolset import (
    MODEL_ERRORS,
    AsyncTool,
    AsyncToolset,
    Outcome,
    Runner,
    Tool,
    Toolset,
    ToolSource,
    runner_for,
)

__all__ = [
    "DEFAULT_BRIEFS",
    "FORBIDDEN_KEYS",
    "MAX_ARGUMENT_BYTES",
    "MODEL_ERRORS",
    "READ_TOOLS",
    "TOOL_NAMES",
    "TRAITS",
    "WRITE_TOOLS",
    "AsyncTool",
    "AsyncToolset",
    "Brief",
    "ContextSpec",
    "MemoryTools",
    "Outcome",
    "PreparedCall",
    "Refusal",
    "Runner",
    "Tool",
    "ToolName",
    "ToolScope",
    "ToolSource",
    "ToolSpec",
    "Toolset",
    "Traits",
    "arguments_type",
    "as_plain",
    "cited_ids",
    "has_side_effects",
    "mcp_server",
    "parameters_for",
    "refusal_before_approval",
    "runner_for",
    "spec_for",
    "to_text",
]
