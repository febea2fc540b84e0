"""The :class:`Replayer`: a host's agent run against a bundle's memoised results only.

Strict, like a ``strict`` run: no tool ever runs. Each call the agent makes
must be the call recorded at its step (same tool, same arguments); its
recorded result (or recorded error) is returned. A different call, a call
past the recorded end, or a recorded step the agent never made raises
:class:`ReplayDivergence`. The agent's final output is returned so a test
can assert on it::

    replayer = Replayer.load("tests/sessions/nightly.bundle", trust=VKEY)
    output = await replayer.run(my_agent)   # my_agent(run) calls run.call(...)

The bundle is verified (:func:`verify_bundle`) before anything in it is used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memseal.ledger.errors import InvalidRequest, MemsealError, ReplayDivergence
from memseal.tools.catalog import READ_TOOLS, TOOL_NAMES
from memseal.tools.specs import spec_for
from memseal.tools.toolset import AsyncToolset

from .bundle import BundleCall, VerifiedBundle, decode_bundle, verify_bundle
from .divergence import diverged
from .run import RECORDED_ERRORS, sent_form, withheld_digest

__all__ = ["ReplayRun", "Replayer"]

T = TypeVar("T")

_ERRORS: dict[str, type[MemsealError]] = {c.__name__: c for c in RECORDED_ERRORS}


class ReplayRun:
    """What the agent is handed: ``call(name, args)`` and ``toolset()``, served from memos."""

    def __init__(self, verified: VerifiedBundle) -> None:
        self.run_id = verified.run_id
        self.mode = "strict"
        self._calls: Sequence[BundleCall] = verified.calls
        self._next = 0
        self._consumed: set[int] = set()
        writes = verified.started.writes if verified.started is not None else True
        self._names = TOOL_NAMES if writes else READ_TOOLS

    @property
    def steps_issued(self) -> int:
        """How many steps the replayed program has called so far."""
        return self._next

    def specs(self) -> list[Any]:
        """The specs of the tools the replayed run offers (read tools only, unless it writes)."""
        return [spec_for(name) for name in self._names]

    def toolset(self) -> AsyncToolset:
        """The recorded tools for OpenAI, Anthropic, LangChain or MCP, answered from memos."""
        return AsyncToolset.of(self)

    def call(
        self, name: str, arguments: Mapping[str, Any] | str | bytes | None = None
    ) -> Awaitable[Any]:
        """Reserve the next step now; the awaitable gives the recorded result."""
        step = self._next
        self._next += 1
        return self._call(step, name, {} if arguments is None else arguments)

    async def _call(self, step: int, name: Any, arguments: Any) -> Any:
        sent = sent_form(name, arguments)
        plain = sent.arguments
        attempt = {"tool": sent.name, "arguments": plain}
        if step >= len(self._calls):
            raise diverged(self.run_id, step, None, attempt, "a call past the recorded end")
        recorded = self._calls[step]
        kept = recorded.withheld
        if recorded.arguments is None and kept is not None and len(kept) == 2:
            # A failed call keeps only a salted digest of its arguments: match on that.
            try:
                same = withheld_digest(bytes.fromhex(kept[0]), plain) == kept[1]
            except ValueError:
                same = False
            shown: dict[str, Any] | None = {
                "tool": recorded.call.tool,
                "arguments": "(not kept: a failed call keeps only a digest)",
            }
            matches = recorded.call.tool == sent.name and same
        else:
            shown = (
                None
                if recorded.arguments is None
                else {"tool": recorded.call.tool, "arguments": recorded.arguments}
            )
            matches = recorded.call.tool == sent.name and recorded.arguments == plain
        if not matches:
            raise diverged(self.run_id, step, shown, attempt)
        self._consumed.add(step)
        result = recorded.result
        if recorded.call.error:
            error = result.get("error", {}) if isinstance(result, dict) else {}
            kind = _ERRORS.get(str(error.get("type")), InvalidRequest)
            message = error.get("message")
            raise kind(message if isinstance(message, str) else "(forgotten)")
        return result

    def check_consumed(self) -> None:
        """Raise ReplayDivergence if any recorded step was never replayed."""
        unconsumed = [c.call.step for c in self._calls if c.call.step not in self._consumed]
        if unconsumed:
            raise ReplayDivergence(
                f"run {self.run_id!r}: recorded steps {unconsumed[:10]} were never replayed",
                run_id=self.run_id,
                step=unconsumed[0],
            )


class Replayer:
    """Runs a host's agent against a verified bundle's memoised results (strict)."""

    def __init__(self, verified: VerifiedBundle) -> None:
        self.verified = verified

    @classmethod
    def load(cls, source: str | Path | bytes, *, trust: str | None = None) -> Replayer:
        """Read and verify a bundle; ``trust`` is the vkey (default: the bundle's first key,
        which checks integrity but not who signed it)."""
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        bundle = decode_bundle(data)
        if trust is None:
            trust = bundle.keys[0] if bundle.keys else ""
        return cls(verify_bundle(bundle, trust))

    @property
    def run_id(self) -> str:
        """The id of the recorded run being replayed."""
        return self.verified.run_id

    async def run(self, agent: Callable[[ReplayRun], Awaitable[T]]) -> T:
        """Run ``agent(run)``; raise ReplayDivergence on any divergence or unconsumed step."""
        run = ReplayRun(self.verified)
        output = await agent(run)
        run.check_consumed()
        return output
