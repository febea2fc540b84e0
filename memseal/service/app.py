"""The HTTP service: FastAPI over one data folder (see docs/service.md).

Every route but ``/healthz``, ``/metrics`` and the OpenAPI pages takes a
bearer token (see :mod:`memseal.service.tokens`); the token's role decides
which routes answer and its scope which memory they touch. Every refusal is
a 4xx with ``{"error": {"code": ..., "message": ...}}`` (see
:mod:`memseal.service.errors`).

This module puts the app together: the lifespan that opens the memory, the
error handlers, the routers of :mod:`memseal.service.routes`, the doc pages,
the MCP endpoint and the :class:`~memseal.service.guard.Guard` in front.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from memseal.apps.lifecycle import JobQueue
from memseal.engine import Embedder
from memseal.ledger.errors import InvalidRequest, MemsealError
from memseal.memory import open as open_memory
from memseal.witness.client import WitnessRelay, parse_witness_option

from .errors import ApiError, error_body, from_memseal
from .guard import MAX_BODY_BYTES, MAX_TOOL_BODY_BYTES, MIN_TOOL_BODY_BYTES, Guard
from .history import refuse_undeclared_point
from .models import ERRORS
from .routes import ROUTERS, lifecycle
from .routes.tlog import TlogAccess
from .state import Service
from .tokens import TokenStore
from .workers import WorkerScope, parse_worker

__all__ = ["CONSOLE", "DOC_ASSETS", "create_app"]

log = logging.getLogger("memseal.service")


def create_app(
    folder: str | Path,
    *,
    store: str | None = None,
    embedder: Embedder | Literal["default"] | None = "default",
    tokens: TokenStore | None = None,
    mcp: bool = True,
    checkpoint_interval: float | None = 60.0,
    max_body: int = MAX_BODY_BYTES,
    witnesses: Sequence[str] = (),
    workers: Iterable[str] = (),
    worker_interval: float = 2.0,
    tlog_public: bool = False,
    tlog_public_entries: bool = False,
) -> FastAPI:
    """The service over the data folder ``folder`` (opened at start-up, drained at shutdown).

    ``store`` is a PostgreSQL URL holding the ledger and the memory (None: what
    :func:`memseal.open` picks, SQLite in the folder unless ``$MEMSEAL_STORE`` names one);
    the folder keeps the keys and the tokens either way. ``max_body`` is the largest body
    a tool call takes, in bytes (default :data:`MAX_BODY_BYTES`; whatever the body, the
    tools refuse arguments over 1 MiB of compact JSON); every other route takes at most
    :data:`SMALL_BODY_BYTES`. ``witnesses`` are ``URL,VKEY`` texts: each new checkpoint
    goes to those witnesses, and the checkpoint route serves it with their cosignatures.

    ``workers`` names agent nodes (``team:acme/agent:writer``) whose background jobs the
    service runs itself, every ``worker_interval`` seconds, as ``memseal worker`` would;
    each may state its scope (``PLACE,reach=...,trust=...,attempts=N``, see
    :mod:`memseal.service.workers`).

    The log is served as C2SP tlog-tiles under ``/tlog/`` (:mod:`.routes.tlog`) to
    auditors and admins; ``tlog_public`` opens its checkpoint and hash tiles to anyone
    (they disclose no content), ``tlog_public_entries`` its entry bundles too.
    """
    _check_limits(max_body, worker_interval)
    queues = _worker_layouts(workers)
    data = Path(folder)
    targets = [parse_witness_option(w) for w in witnesses]

    lifespan = _lifespan(
        data,
        tokens=tokens,
        store=store,
        embedder=embedder,
        checkpoint_interval=checkpoint_interval,
        targets=targets,
        queues=queues,
        worker_interval=worker_interval,
    )
    app = FastAPI(
        title="memseal",
        version="0.1.0",
        summary="Agent memory in which every tool call is an Ed25519-signed ledger entry.",
        lifespan=lifespan,
        responses=ERRORS,
        docs_url=None,
        redoc_url=None,
        # Every route refuses a point of the log unless it takes one (history.AsOf).
        dependencies=[Depends(refuse_undeclared_point)],
    )
    app.state.tlog = TlogAccess(public=tlog_public, public_entries=tlog_public_entries)
    app.state.mcp_manager = None
    _handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(lifecycle.router)
    _doc_pages(app)
    _console(app)
    if mcp:
        from .mcp import mcp_route

        route, app.state.mcp_manager = mcp_route(lambda: getattr(app.state, "service", None))
        app.router.routes.append(route)

    app.add_middleware(Guard, tool_limit=max_body)
    return app


def _lifespan(
    data: Path,
    *,
    tokens: TokenStore | None,
    store: str | None,
    embedder: Embedder | Literal["default"] | None,
    checkpoint_interval: float | None,
    targets: list[Any],
    queues: list[WorkerScope],
    worker_interval: float,
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The app's start-up and shutdown: the memory opened, witnesses and workers started."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        token_store = tokens if tokens is not None else TokenStore(data)
        memory = await open_memory(
            data, store=store, embedder=embedder, checkpoint_interval=checkpoint_interval
        )
        service = Service(memory, token_store)
        relay = WitnessRelay(memory.ledger, targets, folder=data) if targets else None
        app.state.witnesses = relay
        if relay is not None:
            relay.start()
        app.state.service = service
        worker = (
            asyncio.create_task(_work(memory, queues, worker_interval), name="memseal-worker")
            if queues
            else None
        )
        try:
            if app.state.mcp_manager is not None:
                async with app.state.mcp_manager.run():
                    yield
            else:
                yield
        finally:
            # Uvicorn lets in-flight requests finish before this runs; then the held runs
            # release their leases and the writer queue drains before the store closes.
            app.state.service = None
            if relay is not None:
                await relay.close()
            if worker is not None:
                # A job cut here resumes from its memos on the next start (jobs are runs).
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
            try:
                await service.runs.close()
            finally:
                await memory.close()
                if tokens is None:
                    token_store.close()

    return lifespan


def _check_limits(max_body: object, worker_interval: object) -> None:
    """Refuse a body limit or worker interval out of range, naming it, before anything opens."""
    if isinstance(max_body, bool) or not isinstance(max_body, int):
        raise InvalidRequest("`max_body` must be a number of bytes")
    if not MIN_TOOL_BODY_BYTES <= max_body <= MAX_TOOL_BODY_BYTES:
        raise InvalidRequest(
            f"`max_body` must be {MIN_TOOL_BODY_BYTES:,} to {MAX_TOOL_BODY_BYTES:,} bytes, "
            f"not {max_body:,}"
        )
    if isinstance(worker_interval, bool) or not isinstance(worker_interval, int | float):
        raise InvalidRequest("`worker_interval` must be a number of seconds")
    if not 0 < worker_interval <= 3_600:
        raise InvalidRequest("`worker_interval` must be more than 0 and at most 3600 seconds")


def _worker_layouts(workers: Iterable[str]) -> list[WorkerScope]:
    """The scope of each worker ``serve --worker`` names, checked now."""
    if isinstance(workers, str):
        raise InvalidRequest("`workers` must be a list of agent nodes, not one string")
    return [parse_worker(place) for place in workers]


async def _work(memory: Any, queues: list[WorkerScope], interval: float) -> None:
    """Run every named agent's due jobs, then wait ``interval`` seconds; until cancelled.

    A failing job is retried after its backoff, up to its worker's attempts, and one the
    loop cannot run at all is logged: the service keeps serving either way.
    """
    while True:
        for worker in queues:
            try:
                queue = JobQueue(memory, worker.scope, retry=worker.retry)
                outcomes = await queue.run_pending()
            except MemsealError as exc:
                log.warning("worker: the jobs of %s: %s", worker.place, exc)
                continue
            for outcome in outcomes:
                if outcome.state == "done":
                    log.info("worker: job %s done (run %s)", outcome.id, outcome.run_id)
                else:
                    log.warning("worker: job %s %s: %s", outcome.id, outcome.state, outcome.error)
        await asyncio.sleep(interval)


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
        return await api_error(request, from_memseal(exc))

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


def _allowed(request: Request) -> str:
    methods: set[str] = set()
    for route in _flat(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def _flat(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, those of the included routers too: FastAPI 0.165 and later keep an
    included router as one route of the app (its ``original_router`` holds the routes)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is None:
            yield route
        else:
            yield from _flat(inner.routes)


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


#: Where the web console's files are served from (``/`` serves its page too).
CONSOLE: Final = "/console"

#: The console's pages may load only this server's own files: no inline script, no other
#: origin's, so a text shown by the console can never run. They may also read a static
#: mirror of the log's tiles (Verify here), over HTTPS or on this machine; the console
#: sends its token only to this server.
_CONSOLE_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' https: http://127.0.0.1:* http://localhost:*; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def _console(app: FastAPI) -> None:
    """The web console (:mod:`memseal.service.console`) at ``/`` and under ``/console/``.

    Plain files: what it shows it reads from ``/v1`` with the tab's token, so these
    routes take none (the page itself holds nothing of the ledger).
    """
    from fastapi.responses import HTMLResponse, RedirectResponse
    from fastapi.staticfiles import StaticFiles
    from starlette.types import Receive, Scope, Send

    from .console import ASSETS

    page = (ASSETS / "index.html").read_text(encoding="utf-8")
    files = StaticFiles(directory=ASSETS, html=True)

    async def console_files(scope: Scope, receive: Receive, send: Send) -> None:
        async def with_policy(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", _CONSOLE_POLICY.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await files(scope, receive, with_policy)

    app.mount(CONSOLE, console_files, name="console")

    @app.get("/", include_in_schema=False)
    async def console_page(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        # The same page as /console/, its relative links resolved under /console/.
        shown = page.replace('<base href="./">', f'<base href="{root}{CONSOLE}/">', 1)
        return HTMLResponse(
            shown,
            headers={
                "Content-Security-Policy": _CONSOLE_POLICY,
                "X-Content-Type-Options": "nosniff",
            },
        )

    @app.get(CONSOLE, include_in_schema=False)
    async def console_slash(request: Request) -> RedirectResponse:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        return RedirectResponse(f"{root}{CONSOLE}/")
