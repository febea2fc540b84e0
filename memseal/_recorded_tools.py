"""What ``memory.tools(scope)`` hands a host: the seven tools, every call recorded.

Each call is a signed ``memory_tool_call`` entry with its memo, as over HTTP:
reads, writes, errors the model can act on and refusals alike. How a call
names its run:

* ``memory.tools(scope)``: one fresh run per call (a one-shot run, as HTTP
  does without ``X-Memseal-Run``), so no lease is held between calls;
* ``memory.tools(scope, run_id="r")``: every call is the next step of run
  ``r`` (opened in ``mode``, default ``resume``), closed with the tools or
  with their memory.

Either way :attr:`RecordedTools.last_call` (and :meth:`RecordedTools.recorded_call`,
which hands the reference back with the result, for calls in flight together)
says which run and step recorded a call, so that it can be replayed:
``memory.run(ref.run_id, scope, mode="strict")`` answers it from its memo.

The unrecorded :class:`~memseal.tools.MemoryTools` is the tools layer's
building block (a recorder prepares calls on it); it is not handed to hosts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from memseal.ledger.errors import InvalidRequest, MemsealError
from memseal.replay.runs.run import RECORDED_ERRORS, Run
from memseal.tools import AsyncToolset, MemoryTools, Refusal, ToolScope, Toolset, ToolSpec

if TYPE_CHECKING:
    from memseal.engine import Engine
    from memseal.memory import Memory

__all__ = ["RecordedAsyncToolset", "RecordedCall", "RecordedTools", "RecordedToolset"]

Arguments = Mapping[str, Any] | str | bytes | None


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """Where one call was recorded, and what it gave: ``result``, or the ``error`` it raised."""

    run_id: str
    step: int
    tool: str
    result: Any = None
    error: MemsealError | None = None


class RecordedTools:
    """The seven memory tools for one host-fixed scope, every call recorded (module docstring)."""

    def __init__(
        self,
        memory: Memory,
        tools: MemoryTools,
        run: Run | None = None,
    ) -> None:
        self._memory = memory
        self._tools = tools
        self._run = run
        #: The most recent call that was recorded (or replayed), None before the first.
        self.last_call: RecordedCall | None = None

    def __repr__(self) -> str:
        bound = "" if self._run is None else f", run_id={self._run.run_id!r}"
        return f"RecordedTools({self._tools.scope!r}{bound})"

    # -- what the host sees -------------------------------------------------------------

    @property
    def scope(self) -> ToolScope:
        """The host-fixed scope every call of these tools runs in."""
        return self._tools.scope

    @property
    def engine(self) -> Engine:
        """The engine the tools read (context.md compiles its brief from it)."""
        return self._tools.engine

    @property
    def run_id(self) -> str | None:
        """The bound run's id; None when each call gets a fresh run."""
        return None if self._run is None else self._run.run_id

    def is_recorded_key(self, key: str) -> bool:
        """Whether call key ``key`` is recorded in the bound run (False without a run, or
        before the run's first call loaded its steps): a caller that must not redo what
        the key stands for (ask a model again) asks first, and replays the key instead."""
        return self._run is not None and self._run.step_of(key) is not None

    @property
    def modes(self) -> tuple[str, ...]:
        """The fetch modes memory_fetch offers (the engine's)."""
        return self._tools.modes

    def names(self) -> tuple[str, ...]:
        """The tools this scope offers, in spec order."""
        return self._tools.names()

    def specs(self) -> list[ToolSpec]:
        """The specs of the tools offered, to hand the model."""
        return self._tools.specs()

    def side_effects(self, name: str) -> bool:
        """Whether tool ``name`` writes; :class:`InvalidRequest` for an unknown name."""
        return self._tools.side_effects(name)

    def refusal_before_approval(self, name: str, arguments: object = None) -> Refusal | None:
        """The policy refusal a call meets before any approval or schema check, or None.

        Asking records nothing; the call itself, when made, is recorded, refusal and all.
        """
        return self._tools.refusal_before_approval(name, arguments)

    @property
    def answers_keys(self) -> bool:
        """Whether a call's key can answer its memo: only in a bound run (the adapters
        pass the SDK's tool-call ids only then)."""
        return self._run is not None

    def toolset(self) -> RecordedAsyncToolset:
        """These tools for OpenAI, Anthropic, LangChain or MCP: every call recorded."""
        # ``of`` builds ``cls``: the subclass, typed as its base.
        return cast(RecordedAsyncToolset, RecordedAsyncToolset.of(self))

    # -- calling ------------------------------------------------------------------------

    def call(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        revalidate: bool = False,
        key: str | None = None,
    ) -> Awaitable[Any]:
        """Run and record tool ``name``; an awaitable of the rendered result.

        Raises what :meth:`Run.call` raises; a recorded error (InvalidRequest,
        Unsupported, NotFound, a refusal among them) is in :attr:`last_call` too.
        A bound run's step is reserved now, so ``asyncio.gather`` keeps issue order.
        ``key`` is the model's tool-call id, as for :meth:`Run.call`: a key the
        bound run recorded returns its memo (its step is chosen when it runs).
        """
        return self._unwrap(self.recorded_call(name, arguments, revalidate=revalidate, key=key))

    @staticmethod
    async def _unwrap(pending: Awaitable[RecordedCall]) -> Any:
        done = await pending
        if done.error is not None:
            raise done.error
        return done.result

    def recorded_call(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        revalidate: bool = False,
        key: str | None = None,
    ) -> Awaitable[RecordedCall]:
        """Like :meth:`call`, handing back the :class:`RecordedCall` (result or recorded
        error, run id and step) instead of raising a recorded error."""
        if self._run is None:
            if key is not None:
                # As HTTP and MCP refuse a key with no run: a fresh run per call could
                # never answer the key again (the adapters leave it out, see answers_keys).
                raise InvalidRequest("`key` needs a bound run: memory.tools(scope, run_id=...)")
            if revalidate:
                raise InvalidRequest(
                    "`revalidate` replaces a recorded step: bind a run with "
                    "memory.tools(scope, run_id=...)"
                )
            run = self._memory._run(None, self._tools, mode="record", oneshot=True)
            return self._record(run, 0, run.call(name, arguments, key=key), name, close=True)
        run = self._run
        # The step the call reserves now; a keyed call's is chosen when it runs (its
        # recorded one, or the next free one), so it is looked up after.
        step = run.next_step if key is None else None
        pending = run.call(name, arguments, revalidate=revalidate, key=key)
        return self._record(run, step, pending, name, key=key)

    async def _record(
        self,
        run: Run,
        step: int | None,
        pending: Awaitable[Any],
        name: str,
        *,
        close: bool = False,
        key: str | None = None,
    ) -> RecordedCall:
        tool = name if isinstance(name, str) else repr(name)
        try:
            try:
                result = await pending
            except RECORDED_ERRORS as exc:
                step = _step(run, step, key)
                if step is None or not run.is_recorded(step):
                    raise
                done = RecordedCall(run_id=run.run_id, step=step, tool=tool, error=exc)
            else:
                found = _step(run, step, key)
                assert found is not None  # a call that returned was recorded at a step
                done = RecordedCall(run_id=run.run_id, step=found, tool=tool, result=result)
        finally:
            if close:
                await run.close(check=False)
        self.last_call = done
        return done

    # -- lifecycle ----------------------------------------------------------------------

    async def close(self, *, check: bool = True) -> None:
        """Close the bound run (release its lease; ``strict``: check every step replayed)."""
        if self._run is not None:
            await self._run.close(check=check)

    async def __aenter__(self) -> RecordedTools:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close(check=exc_type is None)


def _step(run: Run, step: int | None, key: str | None) -> int | None:
    """The step a call went to: the one reserved for it, or its key's (None: not recorded)."""
    if step is not None or key is None:
        return step
    return run.step_of(key)


class RecordedAsyncToolset(AsyncToolset):
    """An :class:`AsyncToolset` over :class:`RecordedTools`: says where its calls went."""

    @property
    def last_call(self) -> RecordedCall | None:
        """The most recent recorded call of these tools (see :class:`RecordedTools`)."""
        source = self._source
        return source.last_call if isinstance(source, RecordedTools) else None

    @property
    def run_id(self) -> str | None:
        """The bound run's id; None when each call gets a fresh run."""
        source = self._source
        return source.run_id if isinstance(source, RecordedTools) else None


class RecordedToolset(Toolset):
    """The blocking :class:`Toolset` the sync facade hands out: every call recorded."""

    @property
    def last_call(self) -> RecordedCall | None:
        """The most recent recorded call of these tools (see :class:`RecordedTools`)."""
        source = self._source
        return source.last_call if isinstance(source, RecordedTools) else None

    @property
    def run_id(self) -> str | None:
        """The bound run's id; None when each call gets a fresh run."""
        source = self._source
        return source.run_id if isinstance(source, RecordedTools) else None

    def close(self, *, check: bool = True) -> None:
        """Close the bound run now (the facade closes it otherwise, when it closes)."""
        source, runner = self._source, self._runner
        if isinstance(source, RecordedTools) and runner is not None:
            runner(source.close(check=check))
