"""Toolsets: the same tools handed to OpenAI, Anthropic, LangChain or MCP.

A :class:`AsyncToolset` (or, for hosts without an event loop, a
:class:`Toolset`) is a tuple of tools, each with ``name``,
``description``, ``parameters`` (a JSON Schema object) and ``call``
(taking the arguments by keyword, returning text). Its ``to_*`` methods
describe the same tools in the shape a runtime wants, and
:meth:`AsyncToolset.call` runs the one a model named, taking the arguments
as an object or as the JSON text a model API returns.

What a model can act on comes back as text starting with ``error:``: an
:class:`InvalidRequest` (it can correct the call), a :class:`NotFound`
(it can look elsewhere), an :class:`Unsupported` (a tool this agent does
not have, policy refusals included). Everything else is raised (storage
failures, ``ReplayDivergence``, ``ProvenanceError``...), because no wording
a model reads will fix it (seeds/memco).

A toolset is built over anything with ``specs()`` and an async
``call(name, arguments)`` returning a result object: a
:class:`MemoryTools`, or a recorded run of memseal.replay.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, Protocol, TypeVar, cast

import msgspec

from memseal.ledger.errors import InvalidRequest, NotFound, Unsupported

from ._mcp_tools import mcp_definition
from ._tool_calls import tool_call_parts
from .catalog import TRAITS
from .decode import MAX_DEPTH, fail
from .render import to_text
from .specs import ToolSpec, openai_strict, root_rules

__all__ = [
    "MODEL_ERRORS",
    "AsyncTool",
    "AsyncToolset",
    "Outcome",
    "Runner",
    "Tool",
    "ToolSource",
    "Toolset",
    "runner_for",
]

T = TypeVar("T")

#: The failures a model can act on: the only ones a toolset reports as text.
MODEL_ERRORS: Final = (InvalidRequest, NotFound, Unsupported)

Arguments = Mapping[str, Any] | str | bytes
Runner = Callable[[Coroutine[Any, Any, Any]], Any]
"""Runs a coroutine to completion from synchronous code (see :func:`runner_for`)."""

_LANGCHAIN_MISSING: Final = (
    "to_langchain() needs langchain-core; install it with `pip install memseal[langchain]`"
)
_OPENAI_AGENTS_MISSING: Final = (
    "to_openai_agents() needs openai-agents; install it with `pip install memseal[openai-agents]`"
)
_PYDANTIC_AI_MISSING: Final = (
    "to_pydantic_ai() needs pydantic-ai-slim; install it with `pip install memseal[pydantic-ai]`"
)

# The id LangChain handed the tool being run (a ToolCall's ``id``), for its call's key. A
# context variable, not an argument: an argument would show in the schema the model reads.
_LANGCHAIN_CALL_ID: Final[contextvars.ContextVar[object]] = contextvars.ContextVar(
    "memseal_langchain_tool_call_id", default=None
)


# The default of `call`: a tool call object alone, or a name whose arguments were left out.
_OMITTED: Any = object()


class ToolSource(Protocol):
    """What a toolset is built over: specs, and an async call returning a result object."""

    def specs(self) -> Sequence[ToolSpec]:
        """The tools the source offers, in the order a toolset lists them."""
        ...

    def call(self, name: str, arguments: Arguments) -> Awaitable[dict[str, Any]]:
        """Run tool ``name`` on ``arguments`` (an object or JSON text); its result object.

        A :data:`MODEL_ERRORS` error it raises reaches the model as text; any other is raised.
        """
        ...


class Outcome(NamedTuple):
    """A call's text for the model, and whether it is an error the model should read."""

    text: str
    is_error: bool


async def _outcome(source: ToolSource, name: str, arguments: object, key: object = None) -> Outcome:
    refused = _undecodable(name, arguments)
    if refused is not None:
        return Outcome(f"error: {refused}", True)
    try:
        if key is None:
            result = await source.call(name, arguments)  # type: ignore[arg-type]
        else:  # a run's call, keyed by the model's tool-call id
            keyed: Any = source
            result = await keyed.call(name, arguments, key=key)
    except MODEL_ERRORS as exc:
        return Outcome(f"error: {exc}", True)
    return Outcome(to_text(result), False)


def _key_for(source: ToolSource, key: object) -> object:
    """``key`` if ``source`` records calls by key (a run, recorded tools), else None.

    A source without keys (the unrecorded tools) has no use for one; a source that
    takes them checks the key itself (a bad one is an :class:`InvalidRequest`).
    """
    if key is None or getattr(source, "answers_keys", True) is False:
        return None  # (unbound recorded tools: a one-shot run per call, no key to answer)
    return key if "key" in inspect.signature(source.call).parameters else None


def _undecodable(name: str, arguments: object) -> InvalidRequest | None:
    """The error for argument text no JSON decoder below can take, or None.

    msgspec decodes recursively, so text nested past the interpreter's limit
    raises RecursionError, and a str with a lone surrogate cannot be encoded:
    neither is a mistake the source would report as one. Any other fault is
    left to the source, which names it (and a run records it).
    """
    if not isinstance(arguments, str | bytes | bytearray | memoryview):
        return None
    try:
        raw = arguments.encode() if isinstance(arguments, str) else bytes(arguments)
        msgspec.json.decode(raw)
    except RecursionError:
        return fail(str(name), f"`arguments` nest deeper than {MAX_DEPTH} levels")
    except UnicodeEncodeError:
        return fail(str(name), "`arguments` are not valid JSON: the text holds a lone surrogate")
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return None


def _side_effects(name: str) -> bool:
    traits = TRAITS.get(name)
    return traits is None or traits.side_effects


@dataclass(frozen=True, slots=True)
class AsyncTool:
    """One tool on an event loop: ``await tool.call(**arguments)`` returns text."""

    name: str
    description: str
    parameters: dict[str, Any]
    call: Callable[..., Awaitable[str]]
    side_effects: bool


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool for synchronous code: ``tool.call(**arguments)`` returns text."""

    name: str
    description: str
    parameters: dict[str, Any]
    call: Callable[..., str]
    side_effects: bool


class _Definitions:
    """The runtime-neutral descriptions shared by both toolsets."""

    def _tools(self) -> Iterable[AsyncTool | Tool]:
        return self  # type: ignore[return-value]

    def names(self) -> list[str]:
        return [tool.name for tool in self._tools()]

    def to_openai(
        self, *, strict: bool = False, api: Literal["chat", "responses"] = "chat"
    ) -> list[dict[str, Any]]:
        """OpenAI function tools, for Chat Completions or (``api="responses"``) the Responses API.

        Chat Completions takes ``{"type": "function", "function": {...}}``;
        the Responses API takes the same fields flat, ``{"type": "function",
        "name", ...}``. With ``strict=True`` the parameters are rewritten into
        the subset strict mode accepts (every property required, the
        optional ones nullable, every object closed;
        :func:`~memseal.tools.specs.openai_strict`): the dispatcher reads a
        null as an absent argument. OpenAI refuses top-level rules, so
        "exactly one of" stays in the descriptions (the server enforces it).

        Definitions only: pair them with ``call()``, which also takes the
        JSON text (or the empty text) that API hands back as a call's arguments.
        """
        if api not in ("chat", "responses"):
            raise ValueError(f"`api` must be 'chat' or 'responses', not {api!r}")
        out: list[dict[str, Any]] = []
        for tool in self._tools():
            parameters = (
                openai_strict(tool.parameters) if strict else copy.deepcopy(tool.parameters)
            )
            function: dict[str, Any] = {
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
            }
            if strict or api == "responses":
                # The Responses API requires the field; Chat Completions takes it as opt-in, and
                # leaving it out keeps the plain shape LangChain's own conversion gives.
                function["strict"] = strict
            if api == "responses":
                out.append({"type": "function", **function})
            else:
                out.append({"type": "function", "function": function})
        return out

    def to_anthropic(self) -> list[dict[str, Any]]:
        """Anthropic Messages API tools: ``{"name", "description", "input_schema"}``.

        The input schema adds the top-level rules OpenAI refuses (exactly
        one of memory_store's learning / document / conversation, of
        memory_forget's ids / filter), as a ``not``: Anthropic refuses a
        top-level ``oneOf`` / ``anyOf`` / ``allOf``, not a ``not``.
        """
        return [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": {**copy.deepcopy(tool.parameters), **root_rules(tool.name)},
            }
            for tool in self._tools()
        ]

    def to_openai_agents(self, *, strict: bool = True, **options: Any) -> list[Any]:
        """One OpenAI Agents SDK ``agents.FunctionTool`` per tool, keyed by the SDK's call id.

        See :func:`memseal.integrations.openai_agents.function_tools` (extra
        ``memseal[openai-agents]``); ImportError without the package.
        """
        try:  # the adapter imports the SDK, an extra: only when asked
            from ._openai_agents import function_tools
        except ImportError as exc:
            raise ImportError(_OPENAI_AGENTS_MISSING) from exc
        return function_tools(cast("AsyncToolset | Toolset", self), strict=strict, **options)

    def mcp_tools(self) -> list[dict[str, Any]]:
        """MCP ``Tool`` definitions (wire form: ``inputSchema``, ``annotations``).

        Annotations: ``readOnlyHint`` on the reads, ``destructiveHint`` on
        forget, ``idempotentHint`` on every tool, ``openWorldHint`` false. A tool
        the source refuses before any approval (a write under a freeze) says so in
        its description, hints and ``_meta`` (see :mod:`._mcp_tools`).
        """
        source = getattr(self, "_source", None)
        return [
            mcp_definition(
                tool.name,
                tool.description,
                tool.parameters,
                _refusal(source, tool.name, None),
            )
            for tool in self._tools()
        ]


class AsyncToolset(tuple[AsyncTool, ...], _Definitions):
    """Every tool a source offers, as awaitable tools (see the module docstring)."""

    _source: ToolSource | None = None

    def __new__(cls, tools: Iterable[AsyncTool] = (), /) -> AsyncToolset:
        return super().__new__(cls, tuple(tools))

    @classmethod
    def of(cls, source: ToolSource) -> AsyncToolset:
        """The tools ``source`` offers now (its specs), each bound to ``source``."""

        def bind(name: str) -> Callable[..., Awaitable[str]]:
            async def call(**arguments: Any) -> str:
                return (await _outcome(source, name, arguments)).text

            return call

        made = cls(
            AsyncTool(
                name=spec.name,
                description=spec.description,
                parameters=copy.deepcopy(spec.parameters),
                call=bind(spec.name),
                side_effects=_side_effects(spec.name),
            )
            for spec in source.specs()
        )
        made._source = source
        return made

    async def call(self, name: Any, arguments: Any = _OMITTED) -> str:
        """Run the tool a model named; the result, or what the model got wrong, as text.

        ``name`` and ``arguments`` are untrusted: an object, or the JSON
        text OpenAI hands back. Raises only what no model can fix. Given the
        tool call itself instead (an OpenAI or Anthropic tool call, a
        LangChain ``ToolCall``; a dict or the SDK's object), its id is the
        call's key in the run, so a resumed host gets each call once.
        """
        if isinstance(name, str):
            # Only an omitted argument means none: a model's explicit null is refused.
            return (await self.outcome(name, {} if arguments is _OMITTED else arguments)).text
        parts = tool_call_parts(name)
        source = _bound(self._source)
        key = _key_for(source, parts.key)
        return (await _outcome(source, parts.name, parts.arguments, key)).text

    async def outcome(self, name: str, arguments: Arguments, key: object = None) -> Outcome:
        """Like :meth:`call`, saying apart whether the text is an error (MCP's ``isError``).

        ``key`` is the call's key (the model's tool-call id), passed to a source that
        records calls by key (a run), checked there: a bad one is an ``error:`` text.
        """
        source = _bound(self._source)
        return await _outcome(source, name, arguments, _key_for(source, key))

    async def call_mcp(self, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """An MCP ``tools/call`` result (wire form): one text content, ``isError`` set."""
        outcome = await self.outcome(name, {} if arguments is None else arguments)
        return {"content": [{"type": "text", "text": outcome.text}], "isError": outcome.is_error}

    def refusal_before_approval(self, name: str, arguments: object = None) -> Any:
        """The policy refusal a call meets whatever an approver answers, or None; runs nothing.

        What an approval gate asks before asking a human (a
        :class:`~memseal.tools.policy.Refusal`, or None when the call may run
        or the source has no policy).
        """
        return _refusal(self._source, name, arguments)

    def to_pydantic_ai(self) -> list[Any]:
        """One ``pydantic_ai.Tool`` per tool, keyed by the ``RunContext``'s ``tool_call_id``.

        The model reads the same JSON Schema; what it can act on is a ``ToolFailed``
        with the ``error:`` text (memseal.integrations.pydantic_ai). Raises ImportError
        when pydantic-ai-slim is not installed.
        """
        try:  # the adapter imports pydantic_ai, an extra: only when asked
            from ._pydantic_ai import tools
        except ImportError as exc:
            raise ImportError(_PYDANTIC_AI_MISSING) from exc
        return list(tools(self))

    def to_langchain(self) -> list[Any]:
        """One ``langchain_core.tools.StructuredTool`` per tool, bound as a coroutine.

        An ``error:`` result (what the model can act on) is raised as a
        ``ToolException`` the tool handles, so a call made with a ``ToolCall``
        answers a ``ToolMessage`` with ``status="error"`` and the same text.
        Invoked with a ``ToolCall`` (as ``ToolNode`` does), the call's ``id`` is
        its key in a run, so a resumed graph gets each call once; the schema
        the model reads is the same. Raises ImportError when langchain-core is
        not installed.
        """
        structured, failed = _structured_tool()
        source = self._source

        def bind(tool: AsyncTool) -> Callable[..., Awaitable[str]]:
            if source is None:
                return tool.call

            async def call(**arguments: Any) -> str:
                key = _key_for(source, _LANGCHAIN_CALL_ID.get())
                outcome = await _outcome(source, tool.name, arguments, key)
                if outcome.is_error:
                    raise failed(outcome.text)
                return outcome.text

            return call

        return [
            structured(
                name=tool.name,
                description=tool.description,
                args_schema=copy.deepcopy(tool.parameters),
                coroutine=bind(tool),
                handle_tool_error=True,
            )
            for tool in self
        ]


class Toolset(tuple[Tool, ...], _Definitions):
    """Every tool a source offers, for synchronous code; mirrors :class:`AsyncToolset`."""

    _source: ToolSource | None = None
    _runner: Runner | None = None

    def __new__(cls, tools: Iterable[Tool] = (), /) -> Toolset:
        return super().__new__(cls, tuple(tools))

    @classmethod
    def of(cls, source: ToolSource, runner: Runner) -> Toolset:
        """The tools ``source`` offers, each run to completion by ``runner``.

        ``runner`` runs a coroutine on the loop that owns the engine, such
        as ``runner_for(loop)`` for an engine on a loop in another thread.
        """

        def bind(name: str) -> Callable[..., str]:
            def call(**arguments: Any) -> str:
                outcome: Outcome = runner(_outcome(source, name, arguments))
                return outcome.text

            return call

        made = cls(
            Tool(
                name=spec.name,
                description=spec.description,
                parameters=copy.deepcopy(spec.parameters),
                call=bind(spec.name),
                side_effects=_side_effects(spec.name),
            )
            for spec in source.specs()
        )
        made._source = source
        made._runner = runner
        return made

    def call(self, name: Any, arguments: Any = _OMITTED) -> str:
        """Run the tool a model named; see :meth:`AsyncToolset.call`.

        Given the tool call itself (an OpenAI or Anthropic tool call, a LangChain
        ``ToolCall``), its id is the call's key in the run, as there.
        """
        if isinstance(name, str):
            # Only an omitted argument means none: a model's explicit null is refused.
            return self.outcome(name, {} if arguments is _OMITTED else arguments).text
        parts = tool_call_parts(name)
        source = _bound(self._source)
        key = _key_for(source, parts.key)
        result: Outcome = self._run(_outcome(source, parts.name, parts.arguments, key))
        return result.text

    def outcome(self, name: str, arguments: Arguments, key: object = None) -> Outcome:
        """Like :meth:`call`, saying apart whether the text is an error; ``key`` as for
        :meth:`AsyncToolset.outcome`."""
        source = _bound(self._source)
        result: Outcome = self._run(_outcome(source, name, arguments, _key_for(source, key)))
        return result

    def _run(self, coroutine: Coroutine[Any, Any, Outcome]) -> Outcome:
        runner = self._runner
        if runner is None:
            coroutine.close()
            raise TypeError("build a Toolset with Toolset.of(source, runner) to call it")
        result: Outcome = runner(coroutine)
        return result

    def refusal_before_approval(self, name: str, arguments: object = None) -> Any:
        """The policy refusal a call meets before any approval; see :class:`AsyncToolset`."""
        return _refusal(self._source, name, arguments)

    def to_langchain(self) -> list[Any]:
        """One ``langchain_core.tools.StructuredTool`` per tool (sync ``invoke``).

        An ``error:`` result (what the model can act on) is raised as a
        ``ToolException`` the tool handles, so a call made with a ``ToolCall``
        answers a ``ToolMessage`` with ``status="error"`` and the same text.
        A ``ToolCall``'s ``id`` is the call's key, as for :class:`AsyncToolset`.
        Raises ImportError when langchain-core is not installed.
        """
        structured, failed = _structured_tool()
        source, runner = self._source, self._runner

        def bind(tool: Tool) -> Callable[..., str]:
            if source is None or runner is None:
                return tool.call

            def call(**arguments: Any) -> str:
                key = _key_for(source, _LANGCHAIN_CALL_ID.get())
                outcome: Outcome = runner(_outcome(source, tool.name, arguments, key))
                if outcome.is_error:
                    raise failed(outcome.text)
                return outcome.text

            return call

        return [
            structured(
                name=tool.name,
                description=tool.description,
                args_schema=copy.deepcopy(tool.parameters),
                func=bind(tool),
                handle_tool_error=True,
            )
            for tool in self
        ]


def _bound(source: ToolSource | None) -> ToolSource:
    if source is None:
        raise TypeError("build a toolset with .of(source) to call it by name")
    return source


def _structured_tool() -> tuple[Any, Any]:
    try:
        from langchain_core.tools import ToolException
    except ImportError as exc:
        raise ImportError(_LANGCHAIN_MISSING) from exc
    return _keyed_structured_tool(), ToolException


@functools.cache
def _keyed_structured_tool() -> Any:
    """A ``StructuredTool`` that hands its bound call the id of the ToolCall it runs.

    ``BaseTool.run`` / ``arun`` receive the id (``invoke`` / ``ainvoke`` pass a
    ToolCall's ``id`` as ``tool_call_id``). LangChain's own injection
    (``InjectedToolCallId``) needs a pydantic schema, and the tools keep the
    JSON Schema the model is given, so the id rides a context variable that the
    call reads in the same context: LangChain runs the function in a copy of it.
    """
    from langchain_core.tools import StructuredTool

    class KeyedStructuredTool(StructuredTool):
        def run(self, tool_input: Any, *args: Any, tool_call_id: Any = None, **kwargs: Any) -> Any:
            token = _LANGCHAIN_CALL_ID.set(tool_call_id)
            try:
                return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
            finally:
                _LANGCHAIN_CALL_ID.reset(token)

        async def arun(
            self, tool_input: Any, *args: Any, tool_call_id: Any = None, **kwargs: Any
        ) -> Any:
            token = _LANGCHAIN_CALL_ID.set(tool_call_id)
            try:
                return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
            finally:
                _LANGCHAIN_CALL_ID.reset(token)

    return KeyedStructuredTool


def _refusal(source: ToolSource | None, name: str, arguments: object) -> Any:
    ask = getattr(source, "refusal_before_approval", None)
    return None if ask is None else ask(name, arguments)


def runner_for(loop: asyncio.AbstractEventLoop) -> Runner:
    """A :data:`Runner` for ``loop`` running in another thread (as memseal's sync facade does).

    Calling it from the loop's own thread would wait forever, so that is a
    RuntimeError: code on the loop uses an :class:`AsyncToolset`.
    """

    def run(coroutine: Coroutine[Any, Any, T]) -> T:
        thread = getattr(loop, "_thread_id", None)
        if thread is not None and thread == threading.get_ident():
            coroutine.close()
            raise RuntimeError("a sync Toolset was called on its own event loop; use AsyncToolset")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    return run
