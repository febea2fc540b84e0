"""The memory tools over MCP: streamable HTTP under the service, and stdio for one scope.

Under the service (``/mcp``), the bearer token (an agent token) fixes the
scope, exactly as on the HTTP routes; a session may only be used with the
token that opened it. Each MCP session is a durable run: named by the
``X-Memseal-Run`` header when the client sends one, else
``mcp-<session id>``. A new session that names a run replays it from step 0,
whatever this process holds: its first call closes the held run, so the call
opens it afresh from the ledger, and a session the run was taken from is told
so rather than let in between another session's steps. (The 2026-07-28
protocol has no sessions: each of its calls is the run's next step.) Tool
errors a model can act on come back as
``isError`` results, and so do the run's own refusals (a divergence, a
lease held elsewhere, a run that belongs to another scope: a token's calls
always run with its own scope), worded for the model.

``memseal mcp`` serves the same tools over stdio for a scope fixed on its
command line, one run per process (``--run`` to name it and resume it).

The memory as of a point is the host's to choose, never the model's: on HTTP
the endpoint's URL carries it (``/mcp?as_of=N``, or ``as_of_time``, or
``as_of_run`` with ``as_of_step``, as on the read routes), on stdio ``memseal
mcp --as-of N``. Such a server lists the read tools of the scope, with the
schemas the live ones have (no tool has a point among its arguments), answers
them over the memory as of the point, unrecorded (no run: a run header or a
key is an ``isError`` result), and refuses memory_store and memory_forget;
its brief and session-start prompt are those of the memory as of then.

On either transport, a ``tools/call`` whose ``_meta`` holds
``"memseal/key"`` (:data:`KEY_META`: the id the client's model gave the tool
call) is keyed by it in the run: a recorded key answers its memo in any
order, and a session replaying its run with keys need not repeat its calls
in order. A bad key, or a key with no run, is an ``isError`` result naming
``key``; nothing is written.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Final

import mcp.types as types
from mcp import MCPError
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memseal.apps.as_of import AsOfTools, AsOfView
from memseal.ledger.errors import InvalidRequest, MemsealError, NotFound
from memseal.replay.runs._sent import check_key
from memseal.tools import AsyncToolset, to_text

from .errors import ApiError
from .history import point_of
from .tokens import Principal, role_token

__all__ = ["KEY_META", "PastRun", "mcp_route", "stdio_server_for"]

#: The ``_meta`` field of a ``tools/call`` that carries the call's key.
KEY_META: Final = "memseal/key"

PRINCIPAL_KEY = "memseal.principal"
#: JSON-RPC codes (the implementation-defined range) for the endpoint's HTTP refusals.
_RPC_CODE: Final = {401: -32001, 403: -32003, 503: -32002}
#: Sessions at most (the session manager's limit); sessions beyond that are gone.
MAX_SESSIONS: Final = 1000
#: Seconds a session's first call waits for another client's calls of its run to finish.
TAKEOVER_WAIT: Final = 30.0


class _Sessions:
    """Which MCP session each named run belongs to, and each session's takeover."""

    def __init__(self) -> None:
        # (session, run) -> the takeover its first call started; run -> its session.
        self._joined: OrderedDict[tuple[str, str], asyncio.Future[None]] = OrderedDict()
        self._owner: OrderedDict[str, str] = OrderedDict()

    async def enter(self, service: Any, principal: Any, session: str, run_id: str) -> None:
        """Before a call of ``session`` in ``run_id``: take the run over on its first call."""
        key = (session, run_id)
        joined = self._joined.get(key)
        if joined is None:
            joined = asyncio.get_running_loop().create_future()
            self._joined[key] = joined
            # Enough room for every live session (each names one run): an entry
            # dropped here belongs to a session the manager has ended already.
            while len(self._joined) > 4 * MAX_SESSIONS:
                self._joined.popitem(last=False)
            try:
                await service.runs.close_run(run_id, principal.scope, wait=TAKEOVER_WAIT)
            except NotFound:
                pass  # never started (or not this scope's: the call itself says so)
            except MemsealError as exc:
                del self._joined[key]
                joined.set_exception(exc)
                joined.exception()  # retrieved here: this caller raises it
                raise
            self._owner[run_id] = session
            self._owner.move_to_end(run_id)
            while len(self._owner) > 4 * MAX_SESSIONS:
                self._owner.popitem(last=False)
            joined.set_result(None)
        else:
            await joined
        self._joined.move_to_end(key)
        if self._owner.get(run_id, session) != session:
            raise _TakenOver(
                f"run {run_id!r} was taken over by a newer MCP session naming it; "
                "a session that goes on with it would interleave steps with that one "
                "(use one run id per conversation)"
            )


def _tools_of(service: Any, principal: Any, view: AsOfView | None = None) -> list[types.Tool]:
    # Definitions only: calls go through the service's runs, which record each once.
    if view is None:
        toolset = service.memory.tools(principal.scope).toolset()
    else:
        toolset = AsyncToolset.of(view.tools(principal.scope))
    return [types.Tool.model_validate(d) for d in toolset.mcp_tools()]


async def _view_of(service: Any, principal: Any, request: Any) -> AsOfView | None:
    """The point the endpoint's URL names (None: the live memory); InvalidRequest naming
    the parameter for a bad one, or for one given twice, as on the HTTP routes."""
    return await point_of(request.query_params).view(service.memory, principal)


class PastRun:
    """What ``memseal mcp --as-of`` serves in place of a run: the read tools of a view,
    unrecorded (a call with a key is refused: nothing records it)."""

    def __init__(self, tools: AsOfTools) -> None:
        self._tools = tools

    def toolset(self) -> AsyncToolset:
        """The view's read tools, for their definitions."""
        return AsyncToolset.of(self._tools)

    async def call(self, name: str, arguments: Any, *, key: str | None = None) -> Any:
        """Run a read tool over the past; a key is an InvalidRequest naming it."""
        if key is not None:
            raise InvalidRequest(_PAST_UNRECORDED)
        return await self._tools.call(name, arguments)


_PAST_UNRECORDED: Final = (
    "`as_of`: a read of the memory as of a point is not recorded, so it takes no run "
    f'(X-Memseal-Run) or key (_meta["{KEY_META}"])'
)


def _key_of(params: types.CallToolRequestParams) -> str | None:
    """The call's key from ``_meta["memseal/key"]``, or None; InvalidRequest naming it."""
    meta = params.meta
    if meta is None or KEY_META not in meta:
        return None
    key: Any = meta.get(KEY_META)
    try:
        return check_key(key)
    except InvalidRequest as exc:
        raise InvalidRequest(f'{exc} (_meta["{KEY_META}"])') from exc


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class _TakenOver(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Handlers:
    """The MCP server's handlers over the service ``get_service`` returns (None: not started)."""

    def __init__(self, get_service: Callable[[], Any]) -> None:
        self._get_service = get_service
        self._sessions = _Sessions()

    def who(self, ctx: Any) -> tuple[Any, Any, Any]:
        service = self._get_service()
        request = getattr(ctx, "request", None)
        principal = None if request is None else request.scope.get(PRINCIPAL_KEY)
        if service is None or principal is None:
            raise RuntimeError("no authenticated memseal principal on this MCP request")
        return service, principal, request

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        service, principal, request = self.who(ctx)
        try:
            view = await _view_of(service, principal, request)
        except MemsealError as exc:
            raise MCPError(code=-32602, message=str(exc)) from exc
        return types.ListToolsResult(tools=_tools_of(service, principal, view))

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        service, principal, request = self.who(ctx)
        past = await _call_past(service, principal, request, params)
        if past is not None:
            return past
        try:
            result = await self._call_live(service, principal, request, params)
        except MemsealError as exc:
            return _error(f"error: {exc}")
        except Exception as exc:  # a session's takeover refusal carries a message
            message = getattr(exc, "message", None)
            if message is None:
                raise
            return _error(f"error: {message}")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=to_text(result))], is_error=False
        )

    async def _call_live(
        self, service: Any, principal: Any, request: Any, params: types.CallToolRequestParams
    ) -> Any:
        arguments: Any = {} if params.arguments is None else params.arguments
        run_id = request.headers.get("x-memseal-run")
        session = request.headers.get("mcp-session-id")
        if not run_id:
            run_id = f"mcp-{session}" if session else None
        # Checked first: a bad key takes no run over and writes nothing.
        key = _key_of(params)
        if key is not None and run_id is None:
            raise InvalidRequest(
                f'`key` (_meta["{KEY_META}"]) needs a named run: send X-Memseal-Run'
            )
        if run_id is not None and session:
            await self._sessions.enter(service, principal, session, run_id)
        if run_id is None:
            _, _, result = await service.call_tool(
                principal, params.name, arguments, run_id=None, step=None, revalidate=False
            )
            return result
        _, result = await service.runs.call(
            run_id, principal.scope, params.name, arguments, key=key
        )
        return result

    def lifecycle_of(self, ctx: Any) -> tuple[Any, Any, Callable[[], Awaitable[AsOfView | None]]]:
        service, principal, request = self.who(ctx)
        return service.memory, principal, lambda: _view_of(service, principal, request)


async def _call_past(
    service: Any, principal: Any, request: Any, params: types.CallToolRequestParams
) -> types.CallToolResult | None:
    """The call over the URL's point (None: no point, a live call)."""
    try:
        view = await _view_of(service, principal, request)
        if view is None:
            return None
        if request.headers.get("x-memseal-run") or _key_of(params) is not None:
            raise InvalidRequest(_PAST_UNRECORDED)
        arguments: Any = {} if params.arguments is None else params.arguments
        result = await view.tools(principal.scope).call(params.name, arguments)
    except MemsealError as exc:
        return _error(f"error: {exc}")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=to_text(result))], is_error=False
    )


def _http_server(get_service: Callable[[], Any]) -> Server[Any]:
    handlers = _Handlers(get_service)
    return Server(
        "memseal",
        version="0.1.0",
        instructions="Memory tools; every call is a signed ledger entry.",
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        **_lifecycle_handlers(handlers.lifecycle_of),
    )


#: The brief of the token's own scope, as an MCP resource.
CONTEXT_URI = "memory://context"
#: The session-start brief of a thread (the lifecycle's start moment), as an MCP prompt.
START_PROMPT = "session_start"
_CONTEXT_RESOURCE = types.Resource(
    name="context",
    uri=CONTEXT_URI,
    description="What your memory holds, the tools offered and the trust floor",
    mime_type="text/markdown",
)
_START_PROMPT = types.Prompt(
    name=START_PROMPT,
    description="The session-start brief of a thread: its summary, recent turns, learnings",
    arguments=[types.PromptArgument(name="thread", description="the thread", required=True)],
)


#: ``lookup(ctx)``: the memory, the principal, and the point its reads are as of (None: now).
Lookup = Callable[[Any], tuple[Any, Any, Callable[[], Awaitable[AsOfView | None]]]]


def _lifecycle_handlers(lookup: Lookup) -> dict[str, Any]:
    """The brief as the resource ``memory://context`` and session start as the prompt
    ``session_start``, on either transport: ``lookup(ctx)`` gives the memory, the
    principal (the token's on HTTP; the command line's scope on stdio) and the point."""

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        lookup(ctx)
        return types.ListResourcesResult(resources=[_CONTEXT_RESOURCE])

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        memory, principal, point = lookup(ctx)
        if str(params.uri) != CONTEXT_URI:
            raise MCPError(code=-32002, message=f"no resource {str(params.uri)[:80]!r}")
        try:
            text = await _brief(memory, principal, await point())
        except MemsealError as exc:
            raise MCPError(code=-32603, message=f"{CONTEXT_URI}: {exc}") from exc
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=CONTEXT_URI, mime_type="text/markdown", text=text)
            ]
        )

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        lookup(ctx)
        return types.ListPromptsResult(prompts=[_START_PROMPT])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        memory, principal, point = lookup(ctx)
        if params.name != START_PROMPT:
            raise MCPError(code=-32602, message=f"no prompt {params.name[:80]!r}")
        thread = (params.arguments or {}).get("thread")
        if not isinstance(thread, str) or not thread:
            raise MCPError(code=-32602, message="session_start: `thread` is required")
        try:
            text = await _session_start(memory, principal, thread, await point())
        except MemsealError as exc:
            raise MCPError(code=-32602, message=f"session_start: {exc}") from exc
        except ApiError as exc:
            raise MCPError(code=-32602, message=f"session_start: {exc.message}") from exc
        return types.GetPromptResult(
            description="The session-start brief of the thread",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    return {
        "on_list_resources": list_resources,
        "on_read_resource": read_resource,
        "on_list_prompts": list_prompts,
        "on_get_prompt": get_prompt,
    }


async def _brief(memory: Any, principal: Any, view: AsOfView | None = None) -> str:
    """The briefing of the principal's scope; its one read recorded in a fresh run (with
    a view: read over it, unrecorded)."""
    from memseal.apps.lifecycle import PastReader, briefing

    if view is not None:
        past = PastReader(view.tools(principal.scope))
        return await briefing(past, principal.scope.replace(writes=False), key=None)
    tools = memory.tools(principal.scope)
    return await briefing(tools, principal.scope, key=None)


async def _session_start(
    memory: Any, principal: Any, thread: str, view: AsOfView | None = None
) -> str:
    """The start moment of ``thread`` (as ``POST /v1/sessions/{thread}/start``): the
    briefing with the session-start pack at its end (with a view: as of it)."""
    from .routes.lifecycle import session_for

    session = session_for(principal, memory, thread, writes=False)
    try:
        pack = await session.start(as_of=view)
        return await session.briefing(pack=pack, as_of=view)
    finally:
        await session.close(check=False)


def stdio_server_for(
    run: Any, *, memory: Any = None, scope: Any = None, view: AsOfView | None = None
) -> Server[Any]:
    """The MCP server ``memseal mcp`` runs over stdio: one run's tools, every call recorded.

    Like :func:`memseal.tools.mcp_server` over ``run.toolset()``, except that a
    run's own refusals (a divergence from the recorded run, a lease held by
    another process) also come back as ``isError`` results rather than
    protocol errors, as on the HTTP transport. Given the ``memory`` and the
    ``scope`` the run was opened with, it also serves the brief as the resource
    ``memory://context`` and session start as the prompt ``session_start``, as
    ``/mcp`` does for a token of that scope (each read recorded in a run of its
    own, never in the model's run; with ``view``, those of the memory as of it,
    unrecorded).
    """
    definitions = [types.Tool.model_validate(d) for d in run.toolset().mcp_tools()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(definitions))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments: Any = {} if params.arguments is None else params.arguments
        try:
            result = await run.call(params.name, arguments, key=_key_of(params))
        except MemsealError as exc:
            return _error(f"error: {exc}")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=to_text(result))], is_error=False
        )

    lifecycle: dict[str, Any] = {}
    if memory is not None and scope is not None:
        # The command line's scope stands in for a token's: same checks, same refusals.
        principal = Principal(token_id="stdio", role="agent", scope=scope)

        async def point() -> AsOfView | None:
            return view

        lifecycle = _lifecycle_handlers(lambda ctx: (memory, principal, point))
    return Server(
        "memseal",
        version="0.1.0",
        instructions="Memory tools; every call is a signed ledger entry.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **lifecycle,
    )


def mcp_route(get_service: Callable[[], Any]) -> tuple[Route, StreamableHTTPSessionManager]:
    """The ``/mcp`` route (bearer-authenticated) and its session manager (run it in lifespan)."""
    manager = StreamableHTTPSessionManager(
        app=_http_server(get_service),
        session_idle_timeout=1800,
        max_sessions=1000,
    )

    return Route("/mcp", endpoint=_Endpoint(get_service, manager), include_in_schema=False), manager


class _Endpoint:
    """An ASGI app (not a function, so Starlette hands it the raw scope): auth, then MCP."""

    def __init__(self, get_service: Callable[[], Any], manager: StreamableHTTPSessionManager):
        self._get_service = get_service
        self._manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        get_service, manager = self._get_service, self._manager

        service = get_service()
        status, code, message = 503, "starting", "the service is starting"
        if service is not None:
            authorization = None
            for key, value in scope["headers"]:
                if key == b"authorization":
                    authorization = value.decode("latin-1")
            try:
                principal = service.authenticate(authorization)
            except ApiError as exc:
                status, code, message = exc.status, exc.code, exc.message
            else:
                if principal.role == "agent":
                    scope[PRINCIPAL_KEY] = principal
                    scope["user"] = AuthenticatedUser(
                        AccessToken(
                            token=principal.token_id, client_id=principal.token_id, scopes=[]
                        )
                    )
                    await manager.handle_request(scope, receive, send)
                    return
                status, code = 403, "forbidden"
                message = f"{role_token(principal.role)} cannot use MCP (agent tokens only)"
        # The endpoint speaks JSON-RPC, so its refusal is a JSON-RPC error as well (with
        # the service's code and message as its data): the mcp SDK shows such a body to
        # its caller, where any other body became "Server returned an error response".
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": _RPC_CODE.get(status, -32000),
                    "message": f"{code}: {message}",
                    "data": {"status": status, "code": code, "message": message},
                },
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
