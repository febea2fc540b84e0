"""Command-line verbs of the service: ``serve``, ``mcp`` and ``tokens add/list/revoke``."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any, Literal

from memseal.engine import Embedder, HashingEmbedder
from memseal.tools import TOOL_NAMES

__all__ = ["add_verbs"]

DEFAULT_DATA = "memseal-data"
OK, USAGE = 0, 2


def _embedder(name: str) -> Embedder | Literal["default"] | None:
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder()
    return "default"


def _scope_options(parser: argparse.ArgumentParser, *, place_required: bool = True) -> None:
    parser.add_argument(
        "--place",
        required=place_required,
        help="the namespace the scope is placed at, e.g. team:acme/agent:writer ('/' for the root)",
    )
    parser.add_argument(
        "--reach",
        help="of:NS, subtree:NS, exact:NS or all (default: of:PLACE for agents, "
        "subtree:PLACE for auditors and admins)",
    )
    parser.add_argument("--read-only", action="store_true", help="no memory_store or forget")
    parser.add_argument(
        "--floor", default="unverified", choices=["stale", "unverified", "verified"]
    )
    parser.add_argument(
        "--default-trust", choices=["stale", "unverified", "verified"], help="default: the floor"
    )
    parser.add_argument("--frozen", action="store_true", help="writes offered but refused")
    parser.add_argument(
        "--allow", help=f"comma-separated tools, the only ones offered ({', '.join(TOOL_NAMES)})"
    )


def _scope(args: argparse.Namespace, role: str) -> Any:
    from ._service_app import scope_from

    return scope_from(
        role=role,
        place=args.place,
        reach=args.reach,
        read_only=args.read_only,
        floor=args.floor,
        default_trust=args.default_trust,
        frozen=args.frozen,
        allow=None if args.allow is None else [a.strip() for a in args.allow.split(",") if a],
    )


def first_admin(folder: Path) -> str | None:
    """On a data folder's first serve: make the admin token (returned, to print once)."""
    from ._service_app import scope_from
    from ._service_tokens import TokenStore

    store = TokenStore(folder)
    try:
        if store.has_admin():
            return None
        token, _ = store.add("admin", scope_from(role="admin", place="/"), label="first admin")
        return token
    finally:
        store.close()


async def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ._service_app import create_app

    folder = Path(args.data)
    admin = first_admin(folder)
    url = f"http://{args.host}:{args.port}"
    if admin is not None:
        print(f"admin token (shown once, stored hashed): {admin}", flush=True)
        print(
            f"make an agent token: memseal tokens add --data {folder} --role agent "
            "--place team:acme/agent:writer",
            flush=True,
        )
    print(f"memseal serving {folder} at {url}", flush=True)
    print(f"  tools:   GET {url}/v1/tools  (Authorization: Bearer TOKEN)", flush=True)
    print(f"  MCP:     {url}/mcp  (streamable HTTP, same bearer token)", flush=True)
    print(f"  OpenAPI: {url}/docs", flush=True)
    app = create_app(folder, embedder=_embedder(args.embedder))
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        ws="none",
        lifespan="on",
        timeout_graceful_shutdown=30,
        access_log=False,
    )
    server = uvicorn.Server(config)
    # uvicorn catches SIGTERM and SIGINT, finishes the requests in flight, runs the app's
    # shutdown (held runs released, the writer queue drained, the store closed), then raises
    # the signal again. A SIGTERM handled that way is a clean stop: exit 0, not -15.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        await server.serve()
    finally:
        signal.signal(signal.SIGTERM, previous)
    print("memseal serve: stopped; every acknowledged write is in the ledger", file=sys.stderr)
    return OK


async def _mcp(args: argparse.Namespace) -> int:
    from mcp.server.stdio import stdio_server

    from memseal.memory import open as open_memory
    from memseal.replay.run import new_run_id

    from ._service_mcp import stdio_server_for

    scope = _scope(args, "agent")
    run_id = args.run_id or new_run_id()
    print(f"memseal mcp: run {run_id}", file=sys.stderr, flush=True)
    async with open_memory(Path(args.data), embedder=_embedder(args.embedder)) as memory:
        run = memory.run(run_id, scope, mode="resume", fork=args.fork)
        try:
            server = stdio_server_for(run)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            await run.close(check=False)
    return OK


async def _tokens(args: argparse.Namespace) -> int:
    from ._service_tokens import TokenStore

    folder = Path(args.data)
    if args.action != "add" and not (folder / "tokens.db").exists():
        print(f"memseal tokens: no tokens in {folder} (run memseal serve once)", file=sys.stderr)
        return USAGE
    store = TokenStore(folder)
    try:
        if args.action == "add":
            if args.place is None:
                print("memseal tokens add: --place is required", file=sys.stderr)
                return USAGE
            token, info = store.add(args.role, _scope(args, args.role), label=args.label)
            print(token)
            print(
                f"{info.id}: {info.role} at {info.place or '/'} reach {info.reach}"
                f"{'' if info.writes else ' read-only'} (shown once; stored hashed)",
                file=sys.stderr,
            )
            return OK
        if args.action == "list":
            for t in store.listed():
                state = f"revoked {t.revoked_at}" if t.revoked_at else "live"
                allow = "" if t.allowlist is None else f" allow={','.join(t.allowlist)}"
                print(
                    f"{t.id}\t{t.role}\t{t.place or '/'}\treach={t.reach}\twrites={t.writes}"
                    f"\tfloor={t.floor}\tdefault={t.default_trust}\tfrozen={t.frozen}"
                    f"{allow}\t{state}\t{t.label}"
                )
            return OK
        if not args.id:
            print("memseal tokens revoke: give the token id (see tokens list)", file=sys.stderr)
            return USAGE
        info = store.revoke(args.id)
        print(f"{info.id} revoked {info.revoked_at}")
        return OK
    finally:
        store.close()


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``mcp`` and ``tokens`` to the ``memseal`` parser."""
    serve = verbs.add_parser("serve", help="the HTTP service (and MCP over streamable HTTP)")
    serve.add_argument("--data", default=DEFAULT_DATA, help="the data folder (made if missing)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8420)
    serve.add_argument(
        "--embedder",
        default="default",
        choices=["default", "hashing", "none"],
        help="semantic search: the offline MiniLM model, a hashing stand-in, or exact only",
    )
    serve.add_argument("--log-level", default="warning")
    serve.set_defaults(run=_serve)

    mcp = verbs.add_parser("mcp", help="the tools over MCP stdio, for one scope")
    mcp.add_argument("--data", default=DEFAULT_DATA, help="the data folder")
    _scope_options(mcp)
    mcp.add_argument("--run", dest="run_id", help="the run id (resume it by passing it again)")
    mcp.add_argument("--fork", action="store_true", help="a resumed run that diverges goes live")
    mcp.add_argument("--embedder", default="default", choices=["default", "hashing", "none"])
    mcp.set_defaults(run=_mcp)

    tokens = verbs.add_parser("tokens", help="service tokens: add, list, revoke")
    tokens.add_argument("action", choices=["add", "list", "revoke"])
    tokens.add_argument("id", nargs="?", help="the token id (revoke)")
    tokens.add_argument("--data", default=DEFAULT_DATA, help="the data folder")
    tokens.add_argument("--role", choices=["agent", "auditor", "admin"], default="agent")
    tokens.add_argument("--label", default="", help="a note shown by tokens list")
    _scope_options(tokens, place_required=False)
    tokens.set_defaults(run=_tokens)
