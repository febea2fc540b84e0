"""The HTTP service: FastAPI over one data folder (see docs/service.md).

Every route but ``/healthz``, ``/metrics`` and the OpenAPI pages takes a
bearer token (see :mod:`memseal.service.tokens`); the token's role decides
which routes answer and its scope which memory they touch. Every refusal is
a 4xx with ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar
from urllib.parse import quote

import msgspec
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memseal.engine import Embedder
from memseal.ledger.errors import (
    Conflict,
    InvalidRequest,
    MemsealError,
    NotFound,
    ReplayDivergence,
    StorageError,
    Unsupported,
    VerificationError,
)
from memseal.memory import Memory
from memseal.memory import open as open_memory
from memseal.replay.run import new_run_id
from memseal.tools import MAX_ARGUMENT_BYTES, TRAITS, ToolScope, refusal_before_approval
from memseal.tools.decode import MAX_DEPTH

from .ledger_view import MAX_ENTRIES, EntryView, projection_report
from .registry import RunRegistry
from .tokens import (
    ROLES,
    OutsideReach,
    Principal,
    TokenStore,
    check_mint,
    parse_reach,
    role_token,
)

__all__ = ["MAX_BODY_BYTES", "SMALL_BODY_BYTES", "ApiError", "Service", "body_limit", "create_app"]

log = logging.getLogger("memseal.service")

#: The default limit of a tool call's body: its arguments, 1 MiB (``create_app(max_body=)``,
#: ``memseal serve --max-body``); every other route takes a small body (see :func:`body_limit`).
MAX_BODY_BYTES: Final = MAX_ARGUMENT_BYTES

_encoder = msgspec.json.Encoder()


class ApiError(Exception):
    """A refusal with its HTTP status, error code and message (and extra top-level fields)."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


_STATUS: Final[list[tuple[type[MemsealError], int, str]]] = [
    (InvalidRequest, 400, "invalid_request"),
    (OutsideReach, 403, "forbidden"),
    (Unsupported, 403, "unsupported"),
    (NotFound, 404, "not_found"),
    (ReplayDivergence, 409, "replay_divergence"),
    (Conflict, 409, "conflict"),
    (VerificationError, 500, "verification_failed"),
    (StorageError, 503, "storage_unavailable"),
]


def _from_memseal(exc: MemsealError, **extra: Any) -> ApiError:
    for kind, status, code in _STATUS:
        if isinstance(exc, kind):
            return ApiError(status, code, str(exc), **extra)
    return ApiError(400, "invalid_request", str(exc), **extra)


def error_body(code: str, message: str, **extra: Any) -> bytes:
    return _encoder.encode({"error": {"code": code, "message": message[:2000]}, **extra})


def _json(value: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(value), status_code=status, media_type="application/json")


# -- documentation models (the routes encode with msgspec; these describe the shapes) ---------


class ErrorDetail(BaseModel):
    code: str = Field(description="a stable, lowercase code: invalid_request, unauthorized, ...")
    message: str = Field(description="what was wrong, naming the field")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class ToolSpecOut(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any] = Field(description="a closed JSON Schema object")


class ToolsOut(BaseModel):
    tools: list[ToolSpecOut]


class ToolResultOut(BaseModel):
    run_id: str = Field(description="the run the call was recorded in")
    step: int = Field(description="the call's step in that run")
    result: dict[str, Any] = Field(description="the tool's result object")


class RunStatusOut(BaseModel):
    run_id: str
    started_seq: int
    recorded_steps: int
    last_step: int | None
    held_here: bool
    steps_issued: int | None
    mode: str | None
    leased: bool


_Model = TypeVar("_Model", bound=BaseModel)


class TokenIn(BaseModel):
    role: Literal["agent", "auditor", "admin"]
    place: str = Field(max_length=1000, description="the namespace, e.g. team:acme/agent:writer")
    reach: str | None = Field(
        None, max_length=1000, description="of:NS, subtree:NS, exact:NS or all"
    )
    read_only: bool = False
    floor: Literal["stale", "unverified", "verified"] = "unverified"
    default_trust: Literal["stale", "unverified", "verified"] | None = None
    frozen: bool = False
    allow: list[str] | None = Field(None, max_length=16)
    label: str = Field("", max_length=200)


class TokenInfoOut(BaseModel):
    id: str
    role: str
    place: str
    reach: str
    writes: bool
    floor: str
    default_trust: str
    frozen: bool
    allowlist: list[str] | None
    label: str
    created_at: str
    revoked_at: str | None


class TokenMadeOut(BaseModel):
    token: str = Field(description="the bearer token, shown this once")
    info: TokenInfoOut


class TokensOut(BaseModel):
    tokens: list[TokenInfoOut]


class ReasonIn(BaseModel):
    reason: str = Field(min_length=1, max_length=2000)


class TrustChangeOut(BaseModel):
    id: str
    trust: str
    previous: str
    seq: int | None = Field(description="the signed trust_changed entry; null if unchanged")


class LedgerOut(BaseModel):
    size: int
    origin: str
    trust_root: str = Field(description="the first key (vkey): what `memseal verify` trusts")
    vkey: str = Field(description="the current signing key (vkey)")


class EntryOut(BaseModel):
    seq: int
    kind: str
    at: str
    entry: str = Field(description="the exact signed entry bytes, base64")
    leaf_hash: str
    signature: str = Field(description="Ed25519 signature, base64")
    header: dict[str, Any] = Field(description="the entry decoded")
    payload: str | None = Field(description="the payload bytes, base64, when within reach")
    salt: str | None
    redacted: bool | None = None
    payload_withheld: bool | None = None


class EntriesOut(BaseModel):
    size: int
    entries: list[EntryOut]
    next: int | None = Field(description="the start of the next page, or null")


ERRORS: Final[dict[int | str, dict[str, Any]]] = {
    status: {"model": ErrorResponse} for status in (400, 401, 403, 404, 409, 413, 422)
}
#: A route answering text/plain on success: declared with ``response_class=Response`` (no
#: media type of its own), FastAPI lists its errors as the JSON they are, not as text/plain.
TEXT_OK: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "description": "the signed text (C2SP formats)",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}

# -- the service ---------------------------------------------------------------------------


@dataclass
class Metrics:
    """Counters for ``/metrics`` (Prometheus text format 0.0.4)."""

    requests: dict[tuple[str, str, int], int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    tool_calls: dict[tuple[str, str], int] = field(default_factory=dict)

    def observe(self, route: str, method: str, status: int, took: float) -> None:
        key = (route, method, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        self.seconds[route] = self.seconds.get(route, 0.0) + took
        self.counts[route] = self.counts.get(route, 0) + 1

    def tool(self, name: str, outcome: str) -> None:
        key = (name, outcome)
        self.tool_calls[key] = self.tool_calls.get(key, 0) + 1

    def text(self, open_runs: int) -> str:
        lines = [
            "# HELP memseal_http_requests_total HTTP requests by route, method and status.",
            "# TYPE memseal_http_requests_total counter",
        ]
        for (route, method, status), n in sorted(self.requests.items()):
            lines.append(
                f'memseal_http_requests_total{{route="{route}",method="{method}",'
                f'status="{status}"}} {n}'
            )
        lines += [
            "# HELP memseal_http_request_seconds Time spent answering requests, by route.",
            "# TYPE memseal_http_request_seconds summary",
        ]
        for route, total in sorted(self.seconds.items()):
            lines.append(f'memseal_http_request_seconds_sum{{route="{route}"}} {total:.6f}')
            lines.append(
                f'memseal_http_request_seconds_count{{route="{route}"}} {self.counts[route]}'
            )
        lines += [
            "# HELP memseal_tool_calls_total Tool calls by tool and outcome (ok or an error code).",
            "# TYPE memseal_tool_calls_total counter",
        ]
        for (name, outcome), n in sorted(self.tool_calls.items()):
            lines.append(f'memseal_tool_calls_total{{tool="{name}",outcome="{outcome}"}} {n}')
        lines += [
            "# HELP memseal_http_in_flight Requests being answered now.",
            "# TYPE memseal_http_in_flight gauge",
            f"memseal_http_in_flight {self.in_flight}",
            "# HELP memseal_runs_open Durable runs this process holds open.",
            "# TYPE memseal_runs_open gauge",
            f"memseal_runs_open {open_runs}",
        ]
        return "\n".join(lines) + "\n"


class Service:
    """What the routes share: the open memory, the tokens, the held runs, the metrics."""

    def __init__(self, memory: Memory, tokens: TokenStore) -> None:
        self.memory = memory
        self.tokens = tokens
        self.runs = RunRegistry(memory)
        self.metrics = Metrics()

    def authenticate(self, authorization: str | None) -> Principal:
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
    ) -> tuple[str, int, Any]:
        """One tool call, in ``run_id`` or in a fresh run; returns (run id, step, result)."""
        scope = principal.scope
        if run_id is None:
            if step not in (None, 0):
                raise ApiError(400, "invalid_request", "`step` needs a named run")
            fresh = new_run_id()
            run = self.memory.run(fresh, scope, mode="record", oneshot=True)
            try:
                try:
                    result = await run.call(name, arguments)
                except MemsealError as exc:
                    self.metrics.tool(_tool_label(name), _from_memseal(exc).code)
                    raise _from_memseal(exc, run_id=fresh, step=0) from exc
            finally:
                await run.close(check=False)
            self.metrics.tool(_tool_label(name), "ok")
            return fresh, 0, result
        taken = step
        try:
            taken, result = await self.runs.call(
                run_id, scope, name, arguments, step=step, revalidate=revalidate
            )
        except MemsealError as exc:
            self.metrics.tool(_tool_label(name), _from_memseal(exc).code)
            raise _from_memseal(exc, run_id=run_id, step=taken) from exc
        self.metrics.tool(_tool_label(name), "ok")
        return run_id, taken, result


def _tool_label(name: object) -> str:
    from memseal.tools import TOOL_NAMES

    return name if isinstance(name, str) and name in TOOL_NAMES else "other"


# -- ASGI middleware: metrics and the body limits ------------------------------------------

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


# -- the app ---------------------------------------------------------------------------------

bearer = HTTPBearer(auto_error=False, description="a memseal token (`memseal tokens add`)")


def _service(request: Request) -> Service:
    service: Service | None = getattr(request.app.state, "service", None)
    if service is None:
        raise ApiError(503, "starting", "the service is starting")
    return service


def _principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    return _service(request).authenticate(request.headers.get("authorization"))


def _role(*allowed: str) -> Callable[[Principal], Principal]:
    def check(who: Annotated[Principal, Depends(_principal)]) -> Principal:
        if who.role not in allowed:
            routes = "/".join(allowed)
            raise ApiError(
                403, "forbidden", f"{role_token(who.role)} cannot use this route ({routes})"
            )
        return who

    return check


Agent = Annotated[Principal, Depends(_role("agent"))]
Auditor = Annotated[Principal, Depends(_role("auditor", "admin"))]
Admin = Annotated[Principal, Depends(_role("admin"))]
RunHeader = Annotated[
    str | None,
    Header(
        alias="X-Memseal-Run",
        max_length=200,
        description="the run to record the call in (a fresh run when absent)",
    ),
]
StepHeader = Annotated[
    int | None,
    Header(
        alias="X-Memseal-Step",
        ge=0,
        le=1_000_000,
        description="the call's step in the run (default: the next, in arrival order)",
    ),
]
Revalidate = Annotated[
    bool,
    Query(description="run live even if the step is recorded, and record the replacement"),
]
ARGUMENTS_BODY: Final[dict[str, Any]] = {
    "requestBody": {
        "required": False,
        "description": "the tool's arguments: a JSON object (see GET /v1/tools); empty means {}",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


async def _arguments(request: Request, what: str = "arguments") -> dict[str, Any]:
    """The request body as a JSON object, whatever the content type said."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ApiError(400, "invalid_request", f"the body is not JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, "invalid_request", f"the body is not UTF-8 JSON: a string holds {exc.reason}"
        ) from exc
    except RecursionError as exc:
        raise ApiError(
            400,
            "invalid_request",
            f"the body nests deeper than the arguments may ({MAX_DEPTH} levels)",
        ) from exc
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_request", f"the body must be a JSON object of {what}")
    return value


def _fields(model: type[_Model]) -> Any:
    """A dependency giving the body as ``model``, read as the tool routes read theirs.

    FastAPI parses a body as JSON only when its Content-Type says JSON, so ``curl -d``
    (form-encoded by default) reached an admin route as bytes, "not a valid dictionary",
    while the same form worked on the tool routes. Pair with :func:`_fields_doc`.
    """

    async def read(request: Request) -> _Model:
        value = await _arguments(request, what="fields")
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False)) from exc

    return Depends(read)


def _fields_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route taking :func:`_fields` (FastAPI sees none)."""
    return {
        "requestBody": {
            "required": True,
            "description": "a JSON object (any Content-Type, as on the tool routes)",
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


def create_app(
    folder: str | Path,
    *,
    store: str | None = None,
    embedder: Embedder | Literal["default"] | None = "default",
    tokens: TokenStore | None = None,
    mcp: bool = True,
    checkpoint_interval: float | None = 60.0,
    max_body: int = MAX_BODY_BYTES,
) -> FastAPI:
    """The service over the data folder ``folder`` (opened at start-up, drained at shutdown).

    ``store`` is a PostgreSQL URL holding the ledger and the memory (None: what
    :func:`memseal.open` picks, SQLite in the folder unless ``$MEMSEAL_STORE`` names one);
    the folder keeps the keys and the tokens either way. ``max_body`` is the largest body
    a tool call takes, in bytes (default :data:`MAX_BODY_BYTES`; whatever the body, the
    tools refuse arguments over 1 MiB of compact JSON); every other route takes at most
    :data:`SMALL_BODY_BYTES`.
    """
    if isinstance(max_body, bool) or not isinstance(max_body, int):
        raise InvalidRequest("`max_body` must be a number of bytes")
    if not MIN_TOOL_BODY_BYTES <= max_body <= MAX_TOOL_BODY_BYTES:
        raise InvalidRequest(
            f"`max_body` must be {MIN_TOOL_BODY_BYTES:,} to {MAX_TOOL_BODY_BYTES:,} bytes, "
            f"not {max_body:,}"
        )
    data = Path(folder)
    mcp_manager: Any = None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        token_store = tokens if tokens is not None else TokenStore(data)
        memory = await open_memory(
            data, store=store, embedder=embedder, checkpoint_interval=checkpoint_interval
        )
        service = Service(memory, token_store)
        app.state.service = service
        try:
            if mcp_manager is not None:
                async with mcp_manager.run():
                    yield
            else:
                yield
        finally:
            # Uvicorn lets in-flight requests finish before this runs; then the held runs
            # release their leases and the writer queue drains before the store closes.
            app.state.service = None
            try:
                await service.runs.close()
            finally:
                await memory.close()
                if tokens is None:
                    token_store.close()

    app = FastAPI(
        title="memseal",
        version="0.1.0",
        summary="Agent memory in which every tool call is an Ed25519-signed ledger entry.",
        lifespan=lifespan,
        responses=ERRORS,
        docs_url=None,
        redoc_url=None,
    )
    _handlers(app)
    _routes(app)
    _doc_pages(app)
    if mcp:
        from .mcp import mcp_route

        route, mcp_manager = mcp_route(lambda: getattr(app.state, "service", None))
        app.router.routes.append(route)

    app.add_middleware(Guard, tool_limit=max_body)
    return app


def _handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return Response(
            error_body(exc.code, exc.message, **exc.extra),
            status_code=exc.status,
            media_type="application/json",
            headers=headers,
        )

    async def memseal_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, MemsealError)
        return await api_error(request, _from_memseal(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        codes = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Every route at this path, not only the first one the router tried (RFC 9110
            # 15.5.6: a 405 names the methods the resource has).
            headers["Allow"] = _allowed(request)
        return Response(
            error_body(codes.get(exc.status_code, "http_error"), str(exc.detail)),
            status_code=exc.status_code,
            media_type="application/json",
            headers=headers,
        )

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            parts.append(f"`{where}`: {err.get('msg', 'invalid')}")
        return Response(
            error_body("invalid_request", "; ".join(parts) or "invalid request"),
            status_code=400,
            media_type="application/json",
        )

    async def internal(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return Response(
            error_body("internal", "internal error (logged)"),
            status_code=500,
            media_type="application/json",
        )

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(MemsealError, memseal_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, internal)


def _attachment(run_id: str) -> str:
    """A Content-Disposition for ``run_id``'s bundle: header values are latin-1, and a run
    id may hold any printable character, quotes and U+FFFD included (RFC 6266 filename*)."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)
    encoded = quote(run_id, safe="")
    return f"attachment; filename=\"{plain}.bundle\"; filename*=UTF-8''{encoded}.bundle"


def _allowed(request: Request) -> str:
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def _routes(app: FastAPI) -> None:
    # -- open routes ------------------------------------------------------------------------

    @app.get("/healthz", tags=["ops"], summary="Liveness: 200 once the data folder is open")
    async def healthz(request: Request) -> Response:
        _service(request)
        return _json({"status": "ok"})

    @app.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus text: requests, latency, tool calls, open runs",
        response_class=Response,
        responses={200: {**TEXT_OK[200], "description": "Prometheus text format 0.0.4"}},
    )
    async def metrics(request: Request) -> Response:
        service = _service(request)
        return PlainTextResponse(
            service.metrics.text(service.runs.open_runs),
            media_type="text/plain; version=0.0.4",
        )

    # -- agent routes -----------------------------------------------------------------------

    @app.get(
        "/v1/tools",
        tags=["tools"],
        summary="The tool specs of the caller's scope",
        response_model=ToolsOut,
    )
    async def list_tools(request: Request, who: Agent) -> Response:
        service = _service(request)
        specs = service.memory.tools(who.scope).specs()
        return _json({"tools": [msgspec.to_builtins(s) for s in specs]})

    async def _call(
        request: Request,
        who: Principal,
        name: str,
        run_id: str | None,
        step: int | None,
        revalidate: bool,
    ) -> Response:
        service = _service(request)
        arguments = await _arguments(request)
        rid, taken, result = await service.call_tool(
            who,
            name,
            arguments,
            run_id=run_id,
            step=step,
            revalidate=revalidate,
        )
        return _json({"run_id": rid, "step": taken, "result": result})

    @app.post(
        "/v1/tools/{name}",
        tags=["tools"],
        summary="Call a tool (in the run named by X-Memseal-Run, or in a fresh run)",
        response_model=ToolResultOut,
        openapi_extra=ARGUMENTS_BODY,
    )
    async def call_tool(
        request: Request,
        who: Agent,
        name: Annotated[str, PathParam(max_length=64)],
        revalidate: Revalidate = False,
        run_id: RunHeader = None,
        step: StepHeader = None,
    ) -> Response:
        return await _call(request, who, name, run_id, step, revalidate)

    @app.post(
        "/v1/tools/{name}/check",
        tags=["tools"],
        summary="Dry run for an approval gate: the policy refusal a call would meet, or 204",
        status_code=200,
        responses={
            200: {"description": "The call would be refused: its tool, rule code and message"},
            204: {"description": "No policy refuses the call (its arguments are still unchecked)"},
        },
    )
    async def check_tool(
        who: Agent,
        name: Annotated[str, PathParam(max_length=64)],
    ) -> Response:
        # Asked before approval, so it records nothing and reads no arguments: the policy
        # looks only at the token's scope and the tool (the call itself checks the rest).
        if name not in TRAITS:
            raise InvalidRequest(f"unknown tool {name!r}; the tools are {', '.join(TRAITS)}")
        refusal = refusal_before_approval(who.scope, name)
        if refusal is None:
            return Response(status_code=204)
        return _json({"tool": refusal.tool, "code": refusal.code, "message": str(refusal)})

    @app.post(
        "/v1/runs/{run_id}/tools/{name}",
        tags=["runs"],
        summary="Call a tool as the next step (or X-Memseal-Step) of a named run",
        response_model=ToolResultOut,
        openapi_extra=ARGUMENTS_BODY,
    )
    async def call_in_run(
        request: Request,
        who: Agent,
        run_id: Annotated[str, PathParam(min_length=1, max_length=200)],
        name: Annotated[str, PathParam(max_length=64)],
        revalidate: Revalidate = False,
        step: StepHeader = None,
    ) -> Response:
        return await _call(request, who, name, run_id, step, revalidate)

    @app.get(
        "/v1/runs/{run_id}",
        tags=["runs"],
        summary="A run's status: recorded steps, lease, whether this process holds it",
        response_model=RunStatusOut,
    )
    async def run_status(
        request: Request,
        who: Agent,
        run_id: Annotated[str, PathParam(min_length=1, max_length=200)],
    ) -> Response:
        return _json(await _service(request).runs.status(run_id, who.scope))

    @app.get(
        "/v1/runs/{run_id}/export",
        tags=["runs"],
        summary="The run as a session bundle (offline-verifiable; `memseal verify FILE`)",
        response_class=Response,
        responses={200: {"content": {"application/json": {}}}},
    )
    async def export_run(
        request: Request,
        who: Agent,
        run_id: Annotated[str, PathParam(min_length=1, max_length=200)],
    ) -> Response:
        from memseal.replay.bundle import encode_bundle, export_bundle

        service = _service(request)
        if not await service.runs.check_owner(run_id, who.scope):
            raise NotFound(f"no run {run_id!r} in this scope")
        memory = service.memory
        rows = await memory.ledger.store.rows("SELECT DISTINCT embedder FROM engine_vectors")
        keys = await memory.key_history()
        bundle = await export_bundle(
            memory.ledger, keys, run_id, embedders=sorted(str(r[0]) for r in rows)
        )
        return Response(
            encode_bundle(bundle),
            media_type="application/json",
            headers={"Content-Disposition": _attachment(run_id)},
        )

    @app.delete(
        "/v1/runs/{run_id}",
        tags=["runs"],
        summary="Close a held run (release its lease); its record stays and can be resumed",
    )
    async def close_run(
        request: Request,
        who: Agent,
        run_id: Annotated[str, PathParam(min_length=1, max_length=200)],
    ) -> Response:
        closed = await _service(request).runs.close_run(run_id, who.scope)
        return _json({"run_id": run_id, "closed": closed})

    # -- ledger routes ---------------------------------------------------------------------

    @app.get(
        "/v1/ledger",
        tags=["ledger"],
        summary="The ledger's size, origin and keys",
        response_model=LedgerOut,
    )
    async def ledger_info(request: Request, who: Auditor) -> Response:
        memory = _service(request).memory
        return _json(
            {
                "size": await memory.ledger.size(),
                "origin": memory.ledger.origin,
                "trust_root": memory.trust_root,
                "vkey": memory.vkey,
            }
        )

    @app.get(
        "/v1/ledger/entries",
        tags=["ledger"],
        summary=f"Entries [start, start+limit) (limit up to {MAX_ENTRIES}); payloads within reach",
        response_model=EntriesOut,
    )
    async def entries(
        request: Request,
        who: Auditor,
        start: Annotated[int, Query(ge=0, le=2**53)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_ENTRIES)] = 100,
    ) -> Response:
        memory = _service(request).memory
        size = await memory.ledger.size()
        stop = min(size, start + limit)
        records = [r async for r in memory.ledger.scan(start, stop)] if start < stop else []
        view = EntryView(memory.ledger.store, who.scope.reach)
        return _json(
            {
                "size": size,
                "entries": await view.render(records),
                "next": stop if stop < size else None,
            }
        )

    @app.get(
        "/v1/ledger/entries/{seq}",
        tags=["ledger"],
        summary="One entry; its payload only within the caller's reach",
        response_model=EntryOut,
    )
    async def entry(
        request: Request,
        who: Auditor,
        seq: Annotated[int, PathParam(ge=0, le=2**53)],
    ) -> Response:
        memory = _service(request).memory
        record = await memory.ledger.read(seq)
        view = EntryView(memory.ledger.store, who.scope.reach)
        return _json((await view.render([record]))[0])

    @app.get(
        "/v1/ledger/checkpoint",
        tags=["ledger"],
        summary="The latest signed checkpoint (C2SP signed note; one is cut if none exists)",
        response_class=Response,
        responses=TEXT_OK,
    )
    async def checkpoint(request: Request, who: Auditor) -> Response:
        memory = _service(request).memory
        latest = await memory.ledger.latest_checkpoint()
        note = latest.note if latest is not None else await memory.ledger.checkpoint()
        return PlainTextResponse(note)

    @app.get(
        "/v1/ledger/projections",
        tags=["ledger"],
        summary="verify --deep: the projections rebuilt from the log and compared (slow)",
    )
    async def projections(request: Request, who: Auditor) -> Response:
        memory = _service(request).memory
        return _json(await projection_report(memory.engine, who.scope.reach))

    @app.get(
        "/v1/ledger/proofs/inclusion",
        tags=["ledger"],
        summary="C2SP tlog-proof of entry `seq` (against checkpoint `size`, default the newest)",
        response_class=Response,
        responses=TEXT_OK,
    )
    async def inclusion(
        request: Request,
        who: Auditor,
        seq: Annotated[int, Query(ge=0, le=2**53)],
        size: Annotated[int | None, Query(ge=1, le=2**53)] = None,
    ) -> Response:
        memory = _service(request).memory
        if seq >= await memory.ledger.size():
            raise NotFound(f"no entry {seq}")
        return PlainTextResponse(await memory.ledger.tlog_proof(seq, size))

    @app.get(
        "/v1/ledger/proofs/consistency",
        tags=["ledger"],
        summary="Consistency proof from tree size `old` to `new` (default: the current size)",
        response_class=Response,
        responses=TEXT_OK,
    )
    async def consistency(
        request: Request,
        who: Auditor,
        old: Annotated[int, Query(ge=1, le=2**53)],
        new: Annotated[int | None, Query(ge=1, le=2**53)] = None,
    ) -> Response:
        memory = _service(request).memory
        size = await memory.ledger.size()
        if old > size or (new is not None and not old <= new <= size):
            raise InvalidRequest(f"sizes must satisfy 1 <= old <= new <= {size}")
        proof = await memory.ledger.consistency_proof(old, new)
        return PlainTextResponse(proof.text())

    # -- admin routes ------------------------------------------------------------------------

    @app.post(
        "/v1/admin/tokens",
        tags=["admin"],
        summary="Make a token (shown once in the answer)",
        status_code=201,
        response_model=TokenMadeOut,
        openapi_extra=_fields_doc(TokenIn),
    )
    async def add_token(
        request: Request, who: Admin, body: Annotated[TokenIn, _fields(TokenIn)]
    ) -> Response:
        service = _service(request)
        scope = scope_from(
            role=body.role,
            place=body.place,
            reach=body.reach,
            read_only=body.read_only,
            floor=body.floor,
            default_trust=body.default_trust,
            frozen=body.frozen,
            allow=body.allow,
        )
        check_mint(who.scope, body.role, scope)
        token, info = service.tokens.add(body.role, scope, label=body.label)
        return _json({"token": token, "info": info.as_dict()}, status=201)

    @app.get(
        "/v1/admin/tokens",
        tags=["admin"],
        summary="Every token within the admin's reach",
        response_model=TokensOut,
    )
    async def list_tokens(request: Request, who: Admin) -> Response:
        listed = _service(request).tokens.listed(within=who.scope)
        return _json({"tokens": [t.as_dict() for t in listed]})

    @app.delete(
        "/v1/admin/tokens/{token_id}",
        tags=["admin"],
        summary="Revoke a token (refused from the next request on)",
        response_model=TokenInfoOut,
    )
    async def revoke_token(
        request: Request,
        who: Admin,
        token_id: Annotated[str, PathParam(max_length=64)],
    ) -> Response:
        return _json(_service(request).tokens.revoke(token_id, within=who.scope).as_dict())

    async def _trust(
        request: Request, who: Principal, item_id: str, action: str, reason: str
    ) -> Response:
        engine = _service(request).memory.engine
        method: Callable[..., Awaitable[Any]] = {
            "promote": engine.promote,
            "reject": engine.reject,
            "stale": engine.mark_stale,
        }[action]
        change = await method(
            item_id,
            actor=f"{who.token_id} {who.label}".strip(),
            reason=reason,
            reach=who.scope.reach,
        )
        return _json(msgspec.to_builtins(change))

    for action, summary in (
        ("promote", "Mark an item verified (a signed trust_changed entry with the reason)"),
        ("reject", "Mark an item rejected: no read returns it any more"),
        ("stale", "Mark an item stale"),
    ):

        def make(action: str) -> Callable[..., Awaitable[Response]]:
            async def trust_route(
                request: Request,
                who: Admin,
                item_id: Annotated[str, PathParam(max_length=200)],
                body: Annotated[ReasonIn, _fields(ReasonIn)],
            ) -> Response:
                return await _trust(request, who, item_id, action, body.reason)

            trust_route.__name__ = f"trust_{action}"
            return trust_route

        app.post(
            f"/v1/admin/items/{{item_id}}/{action}",
            tags=["admin"],
            summary=summary,
            response_model=TrustChangeOut,
            openapi_extra=_fields_doc(ReasonIn),
        )(make(action))


#: Where the doc pages' scripts and styles are served from (the package's own files).
DOC_ASSETS: Final = "/docs/assets"


def _doc_pages(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their assets served from installed files.

    FastAPI's pages load their scripts from a CDN, so offline (or behind a proxy that
    allows only this host) they were blank. fastapi-offline ships Swagger UI 5 (which
    reads OpenAPI 3.1), ReDoc and the favicon as package data; nothing else is used.
    """
    from importlib.resources import files

    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    assets = Path(str(files("fastapi_offline").joinpath("static")))
    app.mount(DOC_ASSETS, StaticFiles(directory=assets), name="doc_assets")

    def prefix(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = prefix(request)
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{DOC_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOC_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOC_ASSETS}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = prefix(request)
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{DOC_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{DOC_ASSETS}/favicon.png",
            with_google_fonts=False,
        )


def scope_from(
    *,
    role: str,
    place: str,
    reach: str | None = None,
    read_only: bool = False,
    floor: str = "unverified",
    default_trust: str | None = None,
    frozen: bool = False,
    allow: list[str] | None = None,
) -> ToolScope:
    """A token's scope from the options of ``memseal tokens add`` (or POST /v1/admin/tokens)."""
    if role not in ROLES:
        raise InvalidRequest(f"`role` {role!r} is not one of {', '.join(ROLES)}")
    place = "" if place in ("/", "root") else place
    scope = ToolScope.placed_at(place) if place else ToolScope()
    return scope.replace(
        reach=parse_reach(reach, scope.place, role),
        writes=not read_only,
        floor=floor,
        default_trust=default_trust if default_trust is not None else floor,
        frozen=frozen,
        allowlist=None if allow is None else tuple(allow),
    )
