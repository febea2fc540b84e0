"""What the routes share: the open memory, the tokens, the held runs and the metrics.

:meth:`Service.call_tool` is the one way a tool is called from outside (the
HTTP routes and the MCP endpoint): in a named run held by the
:class:`~memseal.service.registry.RunRegistry`, or in a fresh one-shot run.
"""

from __future__ import annotations

from typing import Any

from memseal.ledger.errors import MemsealError
from memseal.memory import Memory
from memseal.replay.runs.run import new_run_id

from .errors import ApiError, from_memseal
from .metrics import Metrics, tool_label
from .registry import RunRegistry
from .tokens import Principal, TokenStore

__all__ = ["Service"]


class Service:
    """What the routes share: the open memory, the tokens, the held runs, the metrics."""

    def __init__(self, memory: Memory, tokens: TokenStore) -> None:
        self.memory = memory
        self.tokens = tokens
        self.runs = RunRegistry(memory)
        self.metrics = Metrics()

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization: Bearer TOKEN`` header, or a 401."""
        if not authorization:
            raise ApiError(401, "unauthorized", "a bearer token is required")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "unauthorized", "the Authorization header must be `Bearer TOKEN`")
        principal = self.tokens.authenticate(token.strip())
        if principal is None:
            raise ApiError(401, "unauthorized", "unknown or revoked token")
        return principal

    async def call_tool(
        self,
        principal: Principal,
        name: str,
        arguments: Any,
        *,
        run_id: str | None,
        step: int | None,
        revalidate: bool,
        key: str | None = None,
    ) -> tuple[str, int, Any]:
        """One tool call, in ``run_id`` or in a fresh run; returns (run id, step, result).

        ``key`` (checked by the caller) is the model's tool-call id, as for
        :meth:`Run.call`: a key the run recorded answers its memo.
        """
        scope = principal.scope
        if run_id is None:
            if step not in (None, 0):
                raise ApiError(400, "invalid_request", "`step` needs a named run")
            if key is not None:
                # A fresh run per call could never answer the key again: the client
                # meant a run and left it out, so say so rather than record it once more.
                raise ApiError(400, "invalid_request", "`key` needs a named run (X-Memseal-Run)")
            fresh = new_run_id()
            run = self.memory.run(fresh, scope, mode="record", oneshot=True)
            try:
                try:
                    result = await run.call(name, arguments)
                except MemsealError as exc:
                    self.metrics.tool(tool_label(name), from_memseal(exc).code)
                    raise from_memseal(exc, run_id=fresh, step=0) from exc
            finally:
                await run.close(check=False)
            self.metrics.tool(tool_label(name), "ok")
            return fresh, 0, result
        taken = step
        try:
            taken, result = await self.runs.call(
                run_id, scope, name, arguments, step=step, revalidate=revalidate, key=key
            )
        except MemsealError as exc:
            self.metrics.tool(tool_label(name), from_memseal(exc).code)
            raise from_memseal(exc, run_id=run_id, step=taken) from exc
        self.metrics.tool(tool_label(name), "ok")
        return run_id, taken, result
