"""LangGraph's ``ToolNode`` on durable runs: :func:`tool_node`, one memseal run per thread.

``tool_node(memory, scope, **toolnode_kwargs)`` is a ``ToolNode`` serving the
memory tools of ``scope``. Each call is a step of a run the node opens itself,
named by the graph config the call runs under, so one compiled graph serves
every thread:

* the root graph's calls go to the run whose id is exactly the ``thread_id``
  (``str()`` of an integer or UUID one, as LangGraph's checkpointers store it);
* a subgraph's calls go to ``"<thread_id>|<namespace>"``, where the namespace is
  the subgraph's own checkpoint namespace (the node's ``checkpoint_ns`` without
  its last ``|``-separated segment, which names the node's task), for example
  ``"t1|research:4b1d..."``, or ``"t1|research"`` for a subgraph compiled with
  ``checkpointer=True``; when that would be longer than 200 characters or not
  printable, the namespace is replaced by ``#`` and 40 hex digits of its blake2b.

So that no thread can ever name another thread's subgraph run, a ``thread_id``
containing ``|`` (LangGraph's own namespace separator) is refused.

Every call is keyed by the id LangGraph's ToolNode hands the tool (the model's
tool-call id): a resumed thread, or a node LangGraph re-executes (``interrupt()``
resumed, a retry, a time-travel replay), gets each recorded call's memo, checked
against its signed entry; a new id is a new live step wherever it comes; the same
id with other arguments is a ``ReplayDivergence`` naming it. A call with no id,
or a bad one, is refused (``InvalidRequest`` naming ``key``) before anything is
written: unkeyed, a re-issued call would be matched by position.

Runs are opened on first use and stay leased by this process until the memory
closes (or :meth:`MemsealToolNode.arelease` lets a thread go); a process that
starts after this one died resumes them. The node's runs are shared by every
``tool_node`` on the same memory object, so two tool nodes of one graph level
share the thread's run; a second scope for the same run is a ``Conflict``.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import uuid
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.prebuilt import ToolNode

from memseal._sync_memory import SyncMemory
from memseal.ledger.errors import Conflict, InvalidRequest
from memseal.memory import Memory
from memseal.replay.runs.run import Run, other_scope
from memseal.tools import AsyncToolset, Outcome, ToolScope

from ._langgraph_store import _in_loop_thread, _on_loop, refuse_store_node

__all__ = ["NS_SEP", "MemsealToolNode", "run_id_for", "tool_node"]

#: LangGraph's namespace separator: between a thread and its subgraph's namespace.
NS_SEP: Final = "|"
_MAX_RUN_ID: Final = 200
_MAX_KEY: Final = 200

# The config and the tool-call id of the tool being run, set by its run / arun and read
# by its function in the same context (LangChain runs the function in a copy of it).
_INVOCATION: Final[contextvars.ContextVar[tuple[object, object] | None]] = contextvars.ContextVar(
    "memseal_langgraph_invocation", default=None
)


def run_id_for(config: object) -> str:
    """The run id a tool call under graph ``config`` is recorded in (module docstring).

    Raises :class:`InvalidRequest` naming ``thread_id`` (or ``checkpoint_ns``) when
    the config names no usable thread.
    """
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    if thread is None:
        raise InvalidRequest(
            "`thread_id`: a memseal tool node records each call in the thread's run;"
            ' invoke the graph with config={"configurable": {"thread_id": ...}}'
            " (and a checkpointer)"
        )
    assert isinstance(configurable, Mapping)
    if isinstance(thread, uuid.UUID) or (isinstance(thread, int) and not isinstance(thread, bool)):
        thread = str(thread)  # as LangGraph's checkpointers store it
    if not isinstance(thread, str):
        raise InvalidRequest(
            f"`thread_id` must be text, an integer or a UUID, not {type(thread).__name__}"
        )
    if not 1 <= len(thread) <= _MAX_RUN_ID or not thread.isprintable():
        raise InvalidRequest(
            f"`thread_id` must be 1 to {_MAX_RUN_ID} printable characters (it is the run id)"
        )
    if NS_SEP in thread:
        raise InvalidRequest(
            f"`thread_id` must not contain {NS_SEP!r}: a subgraph's run is"
            f" <thread_id>{NS_SEP}<namespace>, and no thread may name another's"
        )
    ns = configurable.get("checkpoint_ns", "")
    if not isinstance(ns, str):
        raise InvalidRequest("`checkpoint_ns` must be text")
    # The last segment names the tool node's own task; what is left is its graph's.
    graph_ns = ns.rpartition(NS_SEP)[0]
    if not graph_ns:
        return thread
    readable = f"{thread}{NS_SEP}{graph_ns}"
    if len(readable) <= _MAX_RUN_ID and readable.isprintable():
        return readable
    digest = hashlib.blake2b(graph_ns.encode("utf-8", "surrogatepass"), digest_size=20)
    hashed = f"{thread}{NS_SEP}#{digest.hexdigest()}"
    if len(hashed) > _MAX_RUN_ID:
        raise InvalidRequest(
            f"`thread_id` is {len(thread)} characters: a subgraph's run id needs"
            f" {len(hashed) - len(thread)} more, and a run id is at most {_MAX_RUN_ID}"
        )
    return hashed


def _check_call_id(name: str, call_id: object) -> str:
    if call_id is None:
        raise InvalidRequest(
            f"{name}: the tool call has no id (`key`): a memseal tool node keys every"
            " call by it, so a resumed thread gets each call once"
        )
    if not isinstance(call_id, str):
        raise InvalidRequest(f"{name}: `key` must be a string, not {type(call_id).__name__}")
    if not 1 <= len(call_id) <= _MAX_KEY or not call_id.isprintable():
        raise InvalidRequest(
            f"{name}: `key` must be 1 to {_MAX_KEY} printable characters, not {len(call_id)}"
        )
    return call_id


class _Held:
    """One run a memory's tool nodes opened in this process."""

    __slots__ = ("run", "scope", "toolset")

    def __init__(self, run: Run, scope: ToolScope) -> None:
        self.run = run
        self.scope = scope
        self.toolset = AsyncToolset.of(run)


# Per memory object: every tool node on it shares the runs (one Run object per run id,
# as the lease requires). Weak, so a memory dropped by its host takes its runs along.
_RUNS: weakref.WeakKeyDictionary[Memory, dict[str, _Held]] = weakref.WeakKeyDictionary()


class _Core:
    """The memory, scope and loop behind one tool node's tools."""

    def __init__(self, memory: Memory | SyncMemory, scope: ToolScope) -> None:
        if not isinstance(memory, Memory | SyncMemory):
            raise InvalidRequest("`memory` must be a memseal Memory or SyncMemory")
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be a ToolScope")
        refuse_store_node(scope, "the model's")
        self.memory, self.loop = _on_loop(memory)
        self.scope = scope
        self.tools = self.memory.tools(scope)  # specs and policy only: it records nothing

    def held(self, run_id: str) -> _Held:
        runs = _RUNS.setdefault(self.memory, {})
        held = runs.get(run_id)
        if held is None:
            # Opened on its first call (run.call starts it: lease, scope check, memos).
            held = runs[run_id] = _Held(self.memory.run(run_id, self.scope), self.scope)
        elif held.scope != self.scope:
            raise Conflict(other_scope(run_id, ["the tool node's scope"]))
        return held

    async def outcome(self, name: str, arguments: Any, config: object, call_id: object) -> Outcome:
        """On the memory's loop: the call in its thread's run, keyed by its tool-call id."""
        run_id = run_id_for(config)
        key = _check_call_id(name, call_id)
        return await self.held(run_id).toolset.outcome(name, arguments, key)

    def _loop_for_async(self) -> asyncio.AbstractEventLoop:
        if self.loop is None:
            # A Memory's tool node built outside any loop: the graph runs on the memory's.
            self.loop = asyncio.get_running_loop()
        return self.loop

    async def acall(self, name: str, arguments: Any) -> str:
        config, call_id = _INVOCATION.get() or (None, None)
        loop = self._loop_for_async()
        work = self.outcome(name, arguments, config, call_id)
        if asyncio.get_running_loop() is loop:
            outcome = await work
        else:  # a SyncMemory's loop, from the graph's
            outcome = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))
        return _text(outcome)

    def call(self, name: str, arguments: Any) -> str:
        config, call_id = _INVOCATION.get() or (None, None)
        loop = self.loop
        if loop is None or (loop.is_running() and _in_loop_thread(loop)):
            raise InvalidRequest(
                "a memseal tool node over an async Memory runs in async graphs (ainvoke,"
                " astream) on the memory's loop; for graph.invoke use memseal.open_sync"
            )
        work = self.outcome(name, arguments, config, call_id)
        return _text(asyncio.run_coroutine_threadsafe(work, loop).result())

    def run_on_loop(self, work: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        async def hop() -> None:
            loop = self._loop_for_async()
            if asyncio.get_running_loop() is loop:
                await work
            else:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))

        return hop()


def _text(outcome: Outcome) -> str:
    if outcome.is_error:  # what the model can act on: an error ToolMessage with this text
        raise ToolException(outcome.text)
    return outcome.text


class _ThreadTool(StructuredTool):
    """A StructuredTool whose function learns the config and tool-call id it runs under."""

    def run(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _INVOCATION.set((kwargs.get("config"), kwargs.get("tool_call_id")))
        try:
            return super().run(tool_input, *args, **kwargs)
        finally:
            _INVOCATION.reset(token)

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _INVOCATION.set((kwargs.get("config"), kwargs.get("tool_call_id")))
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _INVOCATION.reset(token)


def _thread_tools(core: _Core) -> list[BaseTool]:
    def bind(name: str) -> tuple[Callable[..., str], Callable[..., Coroutine[Any, Any, str]]]:
        def func(**arguments: Any) -> str:
            return core.call(name, arguments)

        async def coroutine(**arguments: Any) -> str:
            return await core.acall(name, arguments)

        return func, coroutine

    tools: list[BaseTool] = []
    for spec in core.tools.specs():
        func, coroutine = bind(spec.name)
        tools.append(
            _ThreadTool(
                name=spec.name,
                description=spec.description,
                args_schema=dict(spec.parameters),
                func=func,
                coroutine=coroutine,
                handle_tool_error=True,
            )
        )
    return tools


class MemsealToolNode(ToolNode):
    """A ``ToolNode`` whose memory tools record each call in its thread's run (module docstring)."""

    def __init__(
        self,
        memory: Memory | SyncMemory,
        scope: ToolScope,
        *,
        tools: Sequence[BaseTool | Callable[..., Any]] = (),
        **toolnode_kwargs: Any,
    ) -> None:
        core = _Core(memory, scope)
        super().__init__([*_thread_tools(core), *tools], **toolnode_kwargs)
        self._memseal = core

    def run_id(self, config: object) -> str:
        """The run this node records a call under ``config`` in (see :func:`run_id_for`)."""
        return run_id_for(config)

    def refusal_before_approval(self, name: str, arguments: object = None) -> Any:
        """The policy refusal a call meets whatever an approver answers, or None; records
        nothing. What an ``interrupt()`` approval gate asks before asking a human."""
        return self._memseal.tools.refusal_before_approval(name, arguments)

    async def arelease(self, thread_id: str) -> None:
        """Close the runs of ``thread_id`` (its own and its subgraphs') this process holds,
        giving their leases back, so another process may take the thread now."""
        memory = self._memseal.memory
        runs = _RUNS.get(memory, {})
        mine = [r for r in runs if r == thread_id or r.startswith(thread_id + NS_SEP)]

        async def close() -> None:
            for run_id in mine:
                held = runs.pop(run_id, None)
                if held is not None:
                    await held.run.close(check=False)

        await self._memseal.run_on_loop(close())


def tool_node(
    memory: Memory | SyncMemory, scope: ToolScope, **toolnode_kwargs: Any
) -> MemsealToolNode:
    """A LangGraph ``ToolNode`` over the memory tools of ``scope``, each call recorded in the
    run of the thread it runs in and keyed by its tool-call id (module docstring).

    ``toolnode_kwargs`` go to ``ToolNode`` as they are (``name``, ``handle_tool_errors``,
    ``wrap_tool_call``, ``awrap_tool_call``, ``messages_key``...); ``tools=[...]`` adds
    the host's own tools beside the memory tools (their calls are not recorded).
    ``memory`` is a :class:`~memseal.Memory` (async graphs on its loop) or a
    :class:`~memseal.SyncMemory` (sync and async graphs, from any thread but its loop's).
    """
    return MemsealToolNode(memory, scope, **toolnode_kwargs)
