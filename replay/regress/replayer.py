"""The :class:`Replayer`: a host's agent run against a bundle's memoised results only.

Strict, like a ``strict`` run: no tool ever runs. Each call the agent makes
must be the call recorded for it (same tool, same arguments); its recorded
result (or recorded error) is returned. A different call, a call past the
recorded end, or a recorded call the agent never made raises
:class:`ReplayDivergence`. The agent's final output is returned so a test
can assert on it::

    replayer = Replayer.load("tests/sessions/nightly.bundle", trust=VKEY)
    output = await replayer.run(my_agent)   # my_agent(run) calls run.call(...)

How calls are matched is set by the agent's first call, and kept for the run
(``ReplayRun.matched_by``):

``"key"``    the first call passed a key (the model's tool-call id, as a
    keyed run records it): every call must pass one, and is matched with
    the recorded call of that key, in any order. A key called again gets
    its memo again, as a live run's re-issue does.
``"order"``  the first call passed none: every call is matched with the
    recorded call at its position, as before keys, whatever keys the
    recording holds.

A run mixing the two is refused with :class:`ReplayDivergence`, and so is a
keyed replay of a bundle holding unkeyed calls (replay it by order): no call
is ever matched by a rule the agent did not choose.

The bundle is verified (:func:`verify_bundle`) before anything in it is used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from memseal.ledger.errors import InvalidRequest, MemsealError, ReplayDivergence
from memseal.replay.evidence.bundle import BundleCall, VerifiedBundle, decode_bundle, verify_bundle
from memseal.replay.evidence.source import default_trust
from memseal.replay.runs._sent import check_key
from memseal.replay.runs.divergence import diverged
from memseal.replay.runs.run import RECORDED_ERRORS, sent_form, withheld_digest
from memseal.tools.catalog import READ_TOOLS, TOOL_NAMES
from memseal.tools.specs import spec_for
from memseal.tools.toolset import AsyncToolset

__all__ = ["ReplayRun", "Replayer"]

T = TypeVar("T")

_ERRORS: dict[str, type[MemsealError]] = {c.__name__: c for c in RECORDED_ERRORS}

MatchedBy = Literal["key", "order"]


class ReplayRun:
    """What the agent is handed: ``call(name, args, key=None)`` and ``toolset()``, served
    from memos; matched by key or by order (the module docstring)."""

    def __init__(self, verified: VerifiedBundle) -> None:
        self.run_id = verified.run_id
        self.mode = "strict"
        self._calls: Sequence[BundleCall] = verified.calls
        self._next = 0
        self._consumed: set[int] = set()
        self._by_key: dict[str, int] = {
            c.call.key: i for i, c in enumerate(self._calls) if isinstance(c.call.key, str)
        }
        self._unkeyed = [c.call.step for c in self._calls if not isinstance(c.call.key, str)]
        #: How this run's calls are matched: set by its first call (None before it).
        self.matched_by: MatchedBy | None = None
        writes = verified.started.writes if verified.started is not None else True
        self._names = TOOL_NAMES if writes else READ_TOOLS

    @property
    def steps_issued(self) -> int:
        """How many calls the replayed program has made so far."""
        return self._next

    def specs(self) -> list[Any]:
        """The specs of the tools the replayed run offers (read tools only, unless it writes)."""
        return [spec_for(name) for name in self._names]

    def toolset(self) -> AsyncToolset:
        """The recorded tools for OpenAI, Anthropic, LangChain or MCP, answered from memos
        (keyed by each tool call's id, as a run's toolset is)."""
        return AsyncToolset.of(self)

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | bytes | None = None,
        *,
        key: str | None = None,
    ) -> Awaitable[Any]:
        """Match the call now (by key, or the next position); the awaitable gives the
        recorded result. A bad ``key`` raises :class:`InvalidRequest` naming it."""
        key = check_key(key)
        position = self._next
        self._next += 1
        args = {} if arguments is None else arguments
        matched: MatchedBy = "order" if key is None else "key"
        if self.matched_by is None:
            self.matched_by = matched
        if matched != self.matched_by:
            return self._refuse_mixed(position, key)
        if key is None:
            return self._call(position, name, args, None)
        step = self._by_key.get(key)
        if step is None:
            return self._unknown_key(position, name, args, key)
        if self._unkeyed:
            return self._refuse(
                step,
                f"run {self.run_id!r}: the bundle's steps {self._unkeyed[:10]} have no key, so "
                "a keyed replay cannot match them: replay this run by order (pass no keys)",
            )
        return self._call(step, name, args, key)

    async def _refuse_mixed(self, position: int, key: str | None) -> Any:
        first = "passed a key" if self.matched_by == "key" else "passed no key"
        this = "no key" if key is None else f"key {key!r}"
        await self._refuse(
            position,
            f"run {self.run_id!r}: call {position} passed {this}, but the run's first call "
            f"{first}: a replay matches every call by key or every call by order, never a mix",
        )

    async def _refuse(self, step: int, message: str) -> Any:
        raise ReplayDivergence(
            f"{message} (calls matched by {self.matched_by})", run_id=self.run_id, step=step
        )

    async def _unknown_key(self, position: int, name: Any, arguments: Any, key: str) -> Any:
        sent = sent_form(name, arguments)
        attempt = {"tool": sent.name, "arguments": sent.arguments, "key": key}
        reason = f"key {key!r} is not in the bundle"
        raise self._said(diverged(self.run_id, position, None, attempt, reason, past_end=True))

    def _said(self, error: ReplayDivergence) -> ReplayDivergence:
        """The divergence, its message saying how the replay matched calls."""
        return ReplayDivergence(
            f"{error} (calls matched by {self.matched_by})",
            run_id=error.run_id,
            step=error.step,
            recorded=error.recorded,
            attempted=error.attempted,
            diff=error.diff,
        )

    async def _call(self, step: int, name: Any, arguments: Any, key: str | None) -> Any:
        sent = sent_form(name, arguments)
        plain = sent.arguments
        attempt: dict[str, Any] = {"tool": sent.name, "arguments": plain}
        if key is not None:
            attempt["key"] = key
        if step >= len(self._calls):
            raise self._said(
                diverged(self.run_id, step, None, attempt, "a call past the recorded end")
            )
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
            if key is None:
                raise self._said(diverged(self.run_id, step, shown, attempt))
            # A key names one logical call: the same key with another call names both.
            shown = None if shown is None else {**shown, "key": key}
            raise self._said(
                diverged(
                    self.run_id, step, shown, attempt, f"key {key!r} was recorded with another call"
                )
            )
        self._consumed.add(step)
        result = recorded.result
        if recorded.call.error:
            error = result.get("error", {}) if isinstance(result, dict) else {}
            kind = _ERRORS.get(str(error.get("type")), InvalidRequest)
            message = error.get("message")
            raise kind(message if isinstance(message, str) else "(forgotten)")
        return result

    def check_consumed(self) -> None:
        """Raise ReplayDivergence if any recorded call was never replayed."""
        missing = [c for c in self._calls if c.call.step not in self._consumed]
        if not missing:
            return
        steps = [c.call.step for c in missing]
        keys = [c.call.key for c in missing if isinstance(c.call.key, str)]
        named = f" (keys {keys[:10]})" if self.matched_by == "key" and keys else ""
        raise ReplayDivergence(
            f"run {self.run_id!r}: recorded steps {steps[:10]}{named} were never replayed "
            f"(calls matched by {self.matched_by or 'order'})",
            run_id=self.run_id,
            step=steps[0],
        )

    def line(self) -> str:
        """One line on how the replay went: the calls made and how they were matched."""
        return (
            f"replayed run {self.run_id!r}: {self._next} call(s) for {len(self._calls)} "
            f"recorded, matched by {self.matched_by or 'order'}"
        )


class Replayer:
    """Runs a host's agent against a verified bundle's memoised results (strict)."""

    def __init__(self, verified: VerifiedBundle) -> None:
        self.verified = verified
        #: How the last :meth:`run` matched its calls: "key" or "order" (None before one).
        self.matched_by: MatchedBy | None = None

    @classmethod
    def load(cls, source: str | Path | bytes, *, trust: str | None = None) -> Replayer:
        """Read and verify a bundle; ``trust`` is the vkey (default: the bundle's first key,
        which checks integrity but not who signed it)."""
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        bundle = decode_bundle(data)
        return cls(verify_bundle(bundle, default_trust(bundle).vkey if trust is None else trust))

    @property
    def run_id(self) -> str:
        """The id of the recorded run being replayed."""
        return self.verified.run_id

    async def run(self, agent: Callable[[ReplayRun], Awaitable[T]]) -> T:
        """Run ``agent(run)``; raise ReplayDivergence on any divergence or unconsumed step."""
        run = ReplayRun(self.verified)
        try:
            output = await agent(run)
        finally:
            self.matched_by = run.matched_by
        run.check_consumed()
        return output
