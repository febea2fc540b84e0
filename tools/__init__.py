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
``policy``, ``memory_tools``, ``toolset``, ``mcp_server``, ``context``, ``packs``
(the shape of a context pack).

The lifecycle moved up to :mod:`memseal.apps.lifecycle` (issue 40); its old name,
``memseal.tools.lifecycle``, and its modules' still import it (see the end of
this file).
"""

import importlib as _importlib
import sys as _sys
import types as _types
from importlib import abc as _abc
from importlib import machinery as _machinery
from importlib import util as _util

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


# -- the lifecycle's name from before memseal.apps ------------------------------------
#
# ``memseal.tools.lifecycle`` and each module in it (``...lifecycle.pack``) are the
# moved modules themselves, imported when asked for. The targets are names, never
# imports: this layer still imports nothing above it.

_OLD = f"{__name__}.lifecycle"
_NEW = "memseal.apps.lifecycle"


class _MovedLoader(_abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target
        self._spec: _machinery.ModuleSpec | None = None

    def create_module(self, spec: _machinery.ModuleSpec) -> _types.ModuleType:
        module = _importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: _types.ModuleType) -> None:
        # The module ran under its own name; the import machinery has just put the
        # old name's spec on it, and its own spec goes back.
        module.__spec__ = self._spec


class _MovedFinder(_abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> _machinery.ModuleSpec | None:
        if fullname != _OLD and not fullname.startswith(_OLD + "."):
            return None
        moved = _NEW + fullname[len(_OLD) :]
        if _util.find_spec(moved) is None:
            return None
        return _machinery.ModuleSpec(fullname, _MovedLoader(moved))


if not any(isinstance(finder, _MovedFinder) for finder in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedFinder())
