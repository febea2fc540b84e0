"""The ASGI guard in front of every route: it counts requests and bounds request bodies.

A tool call's body may be up to ``max_body`` (default :data:`MAX_BODY_BYTES`,
the tools' own 1 MiB limit on arguments); every other route takes at most
:data:`SMALL_BODY_BYTES`. The guard reads the body before the app sees any of
it, so no request holds more than its route's limit in memory.

The limits import no web framework, so ``memseal serve --max-body`` checks
its argument without FastAPI.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, Final

from memseal.tools import MAX_ARGUMENT_BYTES

from .errors import error_body
from .state import Service

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "DRAIN_BYTES",
    "DRAIN_IDLE_SECONDS",
    "MAX_BODY_BYTES",
    "MAX_TOOL_BODY_BYTES",
    "MCP_ENVELOPE_BYTES",
    "MIN_TOOL_BODY_BYTES",
    "SMALL_BODY_BYTES",
    "Guard",
    "body_limit",
]

#: The default limit of a tool call's body: its arguments, 1 MiB (``create_app(max_body=)``,
#: ``memseal serve --max-body``); every other route takes a small body (see :func:`body_limit`).
MAX_BODY_BYTES: Final = MAX_ARGUMENT_BYTES

KIB: Final = 1024
MIB: Final = 1024 * KIB
#: The smallest tool-call limit ``max_body`` may set: room for any small call.
MIN_TOOL_BODY_BYTES: Final = 4 * KIB
#: The largest it may set (room for pretty-printed arguments; memory stays bounded by it).
MAX_TOOL_BODY_BYTES: Final = 16 * MIB
#: What the other routes take: a token's fields, a reason, a query (and nothing, mostly).
SMALL_BODY_BYTES: Final = 16 * KIB
#: What an MCP message adds around a tool call's arguments (the JSON-RPC envelope).
MCP_ENVELOPE_BYTES: Final = 64 * KIB
#: The most a refused body is read on (and thrown away) so its sender can read the 413;
#: past it the connection is closed unread.
DRAIN_BYTES: Final = 128 * MIB
#: How long a refused body's sender may pause before the connection is closed.
DRAIN_IDLE_SECONDS: Final = 5.0
_TOOL_ROUTE = re.compile(r"/v1/(?:runs/[^/]+/)?tools/[^/]+")


def body_limit(method: str, path: str, tool_limit: int = MAX_BODY_BYTES) -> int:
    """The largest body ``method path`` accepts: ``tool_limit`` for a tool call (and the
    MCP envelope around one), :data:`SMALL_BODY_BYTES` for every other route."""
    if method == "POST" and _TOOL_ROUTE.fullmatch(path):
        return tool_limit
    if path == "/mcp":
        return tool_limit + MCP_ENVELOPE_BYTES
    return SMALL_BODY_BYTES


class Guard:
    """Counts every request, and refuses a body over its route's limit with a 413.

    The body is read here, chunk by chunk, before the app sees any of it: a
    Content-Length over the limit is refused before a byte is read, and a
    chunked body as soon as its count passes the limit, so a request never
    holds more than its route's limit in memory, whatever it claims.
    """

    def __init__(self, app: ASGIApp, tool_limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.tool_limit = tool_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        service = getattr(scope["app"].state, "service", None) if "app" in scope else None
        metrics = service.metrics if isinstance(service, Service) else None
        if metrics is not None:
            metrics.in_flight += 1
        try:
            limit = body_limit(scope["method"], scope["path"], self.tool_limit)
            body = await _read_body(scope, receive, limit)
            if body is None:
                status = 413
                await _refuse_too_large(send, limit)
                return
            await self.app(scope, _replay(body, receive), send_wrapper)
        finally:
            if metrics is not None:
                metrics.in_flight -= 1
                route = scope.get("route")
                label = getattr(route, "path", None) or "unmatched"
                metrics.observe(label, scope["method"], status, time.perf_counter() - started)


async def _read_body(scope: Scope, receive: Receive, limit: int) -> list[Message] | None:
    """The request's body messages, or None when the body is over ``limit`` bytes.

    A refused body is read on and thrown away (up to :data:`DRAIN_BYTES`): a
    server that answers and closes while the client is still sending makes
    the client's kernel drop the answer on the reset, so it would never see
    the 413. A client that sent ``Expect: 100-continue`` has sent nothing yet.
    """
    length = _content_length(scope)
    if length is not None and length > limit:
        if not _expects_continue(scope):
            await _drain(receive, length)
        return None
    messages: list[Message] = []
    seen = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages  # the client left: the app sees the disconnect
        seen += len(message.get("body", b""))
        if seen > limit:
            if message.get("more_body", False):
                await _drain(receive, DRAIN_BYTES)
            return None
        if not message.get("more_body", False):
            break
    if len(messages) > 1:
        joined = b"".join(m.get("body", b"") for m in messages)
        return [{"type": "http.request", "body": joined, "more_body": False}]
    return messages


async def _drain(receive: Receive, budget: int) -> None:
    budget = min(budget, DRAIN_BYTES)
    while budget > 0:
        try:
            async with asyncio.timeout(DRAIN_IDLE_SECONDS):
                message = await receive()
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that hands out the body read already, then what the client sends next."""
    pending = list(reversed(messages))

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


async def _refuse_too_large(send: Send, limit: int) -> None:
    body = error_body("too_large", f"the request body is over this route's {limit:,} bytes")
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for key, value in scope["headers"]:
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _expects_continue(scope: Scope) -> bool:
    return any(
        key == b"expect" and value.lower() == b"100-continue" for key, value in scope["headers"]
    )
