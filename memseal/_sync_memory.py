"""The blocking facade over :class:`~memseal.memory.Memory`, for hosts without an event loop.

:class:`SyncMemory` runs the memory on a private event loop in a thread of its
own and hands each call to it, so synchronous agent code (OpenAI, Anthropic,
LangChain, MCP) records its tool calls as the async API does.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from memseal.apps.as_of import AsOfTools, AsOfView
from memseal.tools import Runner, ToolScope, Toolset, ToolSpec, runner_for

from ._options import OpenOptions
from ._recorded_tools import RecordedTools, RecordedToolset
from .memory import Memory, _open

__all__ = ["SyncAsOfTools", "SyncAsOfView", "SyncMemory", "open_sync"]

T = TypeVar("T")


class _SyncLedger:
    def __init__(self, owner: SyncMemory) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._owner._memory.ledger, name)
        if name == "scan" or name.startswith("_"):
            raise AttributeError(f"{name} is not offered by the blocking facade")
        if not inspect.iscoroutinefunction(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._owner._call(method(*args, **kwargs))

        return call


class SyncAsOfTools:
    """The read tools of a :class:`SyncAsOfView`, blocking (see :class:`AsOfTools`)."""

    def __init__(self, tools: AsOfTools, runner: Runner) -> None:
        self._tools = tools
        self._runner = runner
        self.size = tools.size
        self.scope = tools.scope

    def names(self) -> tuple[str, ...]:
        """The read tools offered."""
        return self._tools.names()

    def specs(self) -> list[ToolSpec]:
        """The specs of the read tools offered."""
        return self._tools.specs()

    def call(self, name: str, arguments: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """Run read tool ``name`` over the memory as of :attr:`size` (unrecorded); raises
        as :meth:`AsOfTools.call` does (memory_store and memory_forget: Unsupported)."""
        result: dict[str, Any] = self._runner(self._tools.call(name, arguments))
        return result

    def toolset(self) -> Toolset:
        """These read tools for synchronous agent code (OpenAI, Anthropic, LangChain, MCP)."""
        return Toolset.of(self._tools, self._runner)


class SyncAsOfView:
    """The memory as of tree size :attr:`size`, read-only, blocking (see :class:`AsOfView`)."""

    def __init__(self, view: AsOfView, runner: Runner) -> None:
        self._view = view
        self._runner = runner
        self.size = view.size

    def __repr__(self) -> str:
        return f"SyncAsOfView(size={self.size})"

    def tools(self, scope: ToolScope | None = None) -> SyncAsOfTools:
        """The read tools over this view, for one host-fixed scope (default: the root)."""
        return SyncAsOfTools(self._view.tools(scope), self._runner)


class SyncMemory:
    """The blocking facade for hosts without an event loop (a private loop thread)."""

    def __init__(self, path: str | Path, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memseal-sync", daemon=True
        )
        self._thread.start()
        try:
            self._memory: Memory = self._call(_open(path, OpenOptions(**options)))
        except BaseException:
            self._stop()
            raise
        self.ledger = _SyncLedger(self)
        self._bound: list[RecordedTools] = []

    @property
    def memory(self) -> Memory:
        """The :class:`Memory` this facade drives; use it only on :attr:`loop` (an adapter
        running its own calls there, as ``memseal.integrations.langgraph`` does)."""
        return self._memory

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The facade's private event loop, running in a thread of its own."""
        return self._loop

    @property
    def vkey(self) -> str:
        """The current signing key's public half (see :attr:`Memory.vkey`)."""
        return self._memory.vkey

    @property
    def trust_root(self) -> str:
        """The ledger's first key (see :attr:`Memory.trust_root`)."""
        return self._memory.trust_root

    @property
    def folder(self) -> Path:
        """The data folder."""
        return self._memory.folder

    def rotate_key(self, name: str | None = None) -> str:
        """Hand the ledger to a new signing key (see :meth:`Memory.rotate_key`)."""
        return self._call(self._memory.rotate_key(name))

    def prove_read(
        self, run_id: str, step: int, *, disclose: Literal["reach", "all"] = "reach"
    ) -> bytes:
        """The read proof of a run's step (see :meth:`Memory.prove_read`)."""
        return self._call(self._memory.prove_read(run_id, step, disclose=disclose))

    def toolset(
        self,
        scope: ToolScope | None = None,
        *,
        run_id: str | None = None,
        mode: str = "resume",
        fork: bool = False,
    ) -> RecordedToolset:
        """The memory tools for synchronous agent code (OpenAI, Anthropic, LangChain, MCP),
        every call recorded: in a fresh run each, or as the next step of ``run_id``
        (see :meth:`Memory.tools`). ``toolset.last_call`` names the run and step."""
        tools = self._memory.tools(scope, run_id=run_id, mode=mode, fork=fork)
        if run_id is not None:
            self._bound.append(tools)  # closed (strict: checked) with this facade
        return cast(RecordedToolset, RecordedToolset.of(tools, runner_for(self._loop)))

    def call(
        self, name: str, arguments: Any = None, *, scope: ToolScope | None = None
    ) -> tuple[str, Any]:
        """One recorded call in a fresh run: (the run id, the result)."""
        return self._call(self._memory.call(name, arguments, scope=scope))

    def as_of(
        self,
        size: int | None = None,
        *,
        at: str | datetime | None = None,
        run: str | None = None,
        step: int | None = None,
    ) -> SyncAsOfView:
        """A read-only view of the memory as it stood at tree ``size``, at time ``at``, or
        when run ``run`` made step ``step`` (see :meth:`Memory.as_of`: a later forget still
        applies; a bad point is an :class:`InvalidRequest` naming the field)."""
        view = self._call(self._memory.as_of(size, at=at, run=run, step=step))
        return SyncAsOfView(view, runner_for(self._loop))

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def close(self) -> None:
        """Close the runs bound to this facade (strictly), the memory, then the loop."""
        if self._loop.is_closed():
            return
        try:
            try:
                for tools in self._bound:
                    self._call(tools.close())
            finally:
                self._call(self._memory.close())
        finally:
            self._stop()

    def __enter__(self) -> SyncMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_sync(path: str | Path, **options: Any) -> SyncMemory:
    """Like :func:`open` (same options), for code without an event loop."""
    return SyncMemory(path, **options)
