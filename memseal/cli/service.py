"""Command-line verbs of the service: ``serve``, ``mcp`` and ``tokens add/list/revoke``."""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import signal
import sys
from pathlib import Path
from typing import Any, Literal

from memseal.cli.options import OK, USAGE, data_options, store_display, store_options
from memseal.cli.show import count_option
from memseal.engine import Embedder, HashingEmbedder
from memseal.ledger.errors import MemsealError
from memseal.tools import TOOL_NAMES

__all__ = ["add_verbs"]


def _scrub(text: str, store: str | None) -> str:
    """``text`` without the store's password: a driver's message may quote the URL it got."""
    if store is None:
        return text.rstrip()
    from memseal.ledger.location import hide_password

    return hide_password(text, store).rstrip()


class _StartupLock:
    """The data folder's start-up lock: one process at a time makes keys, tokens and tables.

    Several ``serve`` processes started at once on a fresh folder would otherwise race to
    create the signing key (the loser stops on the key files the winner made), each print
    an admin token, and create the store's tables side by side. flock on the folder itself
    adds no file to it, and the kernel drops the lock when its holder dies.
    """

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._fd: int | None = os.open(folder, os.O_RDONLY)

    def acquire(self) -> None:
        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _byte_count(text: str) -> int:
    """``--max-body``: a number of bytes, or of KiB or MiB with a K or M after it."""
    from memseal.service.guard import MAX_TOOL_BODY_BYTES, MIN_TOOL_BODY_BYTES

    value = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1024, "M": 1024 * 1024}.get(value[-1:], 1)
    digits = value[:-1] if scale > 1 else value
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 1048576, 512K or 2M")
    size = int(digits) * scale
    if not MIN_TOOL_BODY_BYTES <= size <= MAX_TOOL_BODY_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is outside {MIN_TOOL_BODY_BYTES:,} to {MAX_TOOL_BODY_BYTES:,} bytes"
        )
    return size


def _witness_option(text: str) -> str:
    """``--witness URL,VKEY``, checked before anything starts (the app parses it again)."""
    from memseal.witness.client import parse_witness_option

    try:
        parse_witness_option(text)
    except MemsealError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


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
    from memseal.service.tokens import scope_from

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
    made = _first_admin(folder)
    return None if made is None else made[0]


def _first_admin(folder: Path) -> tuple[str, str] | None:
    """(token, token id) of a new first admin, or None when the folder has one."""
    from memseal.service.tokens import TokenStore, scope_from

    store = TokenStore(folder)
    try:
        if store.has_admin():
            return None
        token, info = store.add("admin", scope_from(role="admin", place="/"), label="first admin")
        return token, info.id
    finally:
        store.close()


def _withdraw(folder: Path, token_id: str) -> None:
    """A start that failed gives back the admin token it printed: the next start makes one."""
    from memseal.service.tokens import TokenStore

    store = TokenStore(folder)
    try:
        store.revoke(token_id)
    finally:
        store.close()


def _banner(
    args: argparse.Namespace, url: str, made: tuple[str, str] | None, shown: str | None
) -> None:
    """What ``serve`` prints once it holds the start-up lock (``shown``: a store URL, if any)."""
    from memseal.service.workers import parse_worker

    folder = Path(args.data)
    if made is not None:
        print(f"admin token (shown once, stored hashed): {made[0]}", flush=True)
        print(
            f"make an agent token: memseal tokens add --data {folder} --role agent "
            "--place team:acme/agent:writer",
            flush=True,
        )
    if not shown:
        print(f"memseal serving {folder} at {url}", flush=True)
    else:
        print(f"memseal serving {shown} (keys and tokens in {folder}) at {url}", flush=True)
    print(f"  tools:   GET {url}/v1/tools  (Authorization: Bearer TOKEN)", flush=True)
    print(f"  MCP:     {url}/mcp  (streamable HTTP, same bearer token)", flush=True)
    print(f"  OpenAPI: {url}/docs", flush=True)
    opened = "public" if args.tlog_public else "auditor and admin tokens"
    print(f"  tlog:    {url}/tlog/checkpoint  (C2SP tlog-tiles; {opened})", flush=True)
    for witness in args.witness:
        print(f"  witness: {witness.partition(',')[0]}", flush=True)
    for worker in args.worker:
        print(f"  worker:  {parse_worker(worker).describe()}", flush=True)


async def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from memseal.service.app import create_app

    folder = Path(args.data)
    store, shown = store_display(args)
    url = f"http://{args.host}:{args.port}"
    lock = _StartupLock(folder)
    limits = {} if args.max_body is None else {"max_body": args.max_body}
    # Built first (it touches nothing on disk): a bad option is refused before a token is made.
    made_app = create_app(
        folder,
        store=store,
        embedder=_embedder(args.embedder),
        workers=args.worker,
        worker_interval=args.worker_interval,
        witnesses=args.witness,
        tlog_public=args.tlog_public,
        tlog_public_entries=args.tlog_public_entries,
        **limits,
    )
    try:
        # On a thread: another process may hold the lock for as long as its start-up takes.
        await asyncio.to_thread(lock.acquire)
        made = _first_admin(folder)
        _banner(args, url, made, None if store is None else shown)
        app = _Startup(made_app, lock)
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
        # shutdown (held runs released, the writer queue drained, the store closed), then
        # raises the signal again. A SIGTERM handled that way is a clean stop: exit 0, not -15.
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
        try:
            await server.serve()
        except SystemExit:
            # uvicorn exits when the app's start-up fails (or the port is taken).
            if made is not None:
                _withdraw(folder, made[1])
            if isinstance(app.error, MemsealError):
                print(f"memseal serve: {_scrub(str(app.error), store)}", file=sys.stderr)
                if made is not None:
                    print(
                        "memseal serve: the admin token above is withdrawn; "
                        "the next start makes a new one",
                        file=sys.stderr,
                    )
                return USAGE
            if app.traceback:
                print(_scrub(app.traceback, store), file=sys.stderr)
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        lock.release()
    print("memseal serve: stopped; every acknowledged write is in the ledger", file=sys.stderr)
    return OK


class _Startup:
    """The app, wrapped: releases the start-up lock once its start-up (store opened, tables
    made) is over, and keeps a failed start-up's error for ``_serve`` to report."""

    def __init__(self, app: Any, lock: _StartupLock) -> None:
        self.app = app
        self.lock = lock
        self.error: BaseException | None = None
        self.traceback = ""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            return await self.app(scope, receive, send)  # type: ignore[no-any-return]

        async def relay(message: Any) -> None:
            if message["type"].startswith("lifespan.startup."):
                self.lock.release()
            if message["type"] == "lifespan.startup.failed":
                # uvicorn would log the traceback; for a refusal such as an unreachable store
                # one line says it better, so _serve decides once the error is known.
                self.traceback = message.get("message", "")
                message = {"type": message["type"]}
            await send(message)

        try:
            return await self.app(scope, receive, relay)  # type: ignore[no-any-return]
        except BaseException as exc:
            self.error = exc
            raise


async def _mcp(args: argparse.Namespace) -> int:
    from memseal.cli.mcp_stdio import stdio_wire
    from memseal.cli.show import CLI_NAMES
    from memseal.memory import open as open_memory
    from memseal.replay.runs.run import new_run_id
    from memseal.service.mcp import PastRun, stdio_server_for

    store, shown = store_display(args)
    scope = _scope(args, "agent")
    if args.as_of is not None and (args.run_id or args.fork):
        print(
            "memseal mcp: --as-of serves the past unrecorded: no --run or --fork", file=sys.stderr
        )
        return USAGE
    run_id = args.run_id or new_run_id()
    folder = Path(args.data)
    if args.as_of is None:
        print(f"memseal mcp: run {run_id} on {shown}", file=sys.stderr, flush=True)
    lock = _StartupLock(folder)
    try:
        await asyncio.to_thread(lock.acquire)
        memory = await open_memory(folder, store=store, embedder=_embedder(args.embedder))
    except MemsealError as exc:
        print(f"memseal mcp: {_scrub(str(exc), store)}", file=sys.stderr)
        return USAGE
    finally:
        lock.release()
    try:
        if args.as_of is not None:
            try:
                view = await memory.as_of(args.as_of, names=CLI_NAMES)
            except MemsealError as exc:
                print(f"memseal mcp: {exc}", file=sys.stderr)
                return USAGE
            print(f"memseal mcp: as of tree size {view.size} on {shown}", file=sys.stderr)
            server = stdio_server_for(
                PastRun(view.tools(scope)), memory=memory, scope=scope, view=view
            )
            async with stdio_wire() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return OK
        run = memory.run(run_id, scope, mode="resume", fork=args.fork)
        try:
            server = stdio_server_for(run, memory=memory, scope=scope)
            async with stdio_wire() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            await run.close(check=False)
    finally:
        await memory.close()
    return OK


def _is_data_folder(folder: Path) -> bool:
    """Whether ``memseal serve`` (or ``keys new``) made ``folder``: its keys, ledger or tokens.

    The keys are the mark where the ledger lives in PostgreSQL.
    """
    from memseal.ledger.folder import DATABASE
    from memseal.ledger.keys import key_files_exist
    from memseal.service.tokens import TOKENS_FILE

    return folder.is_dir() and (
        key_files_exist(folder) or (folder / DATABASE).exists() or (folder / TOKENS_FILE).exists()
    )


async def _tokens(args: argparse.Namespace) -> int:
    from memseal.service.tokens import TokenStore

    folder = Path(args.data)
    if args.action != "add" and not (folder / "tokens.db").exists():
        print(f"memseal tokens: no tokens in {folder} (run memseal serve once)", file=sys.stderr)
        return USAGE
    if args.action == "add" and not _is_data_folder(folder):
        # A token minted into a fresh folder is one the server (reading its own folder)
        # refuses; making that folder silently hid the mistyped or missing --data.
        print(
            f"memseal tokens add: {folder} is not a memseal data folder (no keys, no ledger); "
            "give the server's folder with --data",
            file=sys.stderr,
        )
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


def _serve_options(serve: argparse.ArgumentParser) -> None:
    """``serve``'s own options (the store's come from :func:`store_options`)."""
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8420)
    serve.add_argument(
        "--embedder",
        default="default",
        choices=["default", "hashing", "none"],
        help="semantic search: the offline MiniLM model, a hashing stand-in, or exact only",
    )
    serve.add_argument(
        "--max-body",
        type=_byte_count,
        metavar="BYTES",
        help="the largest body a tool call takes, e.g. 1048576, 512K or 2M (default 1M); "
        "a longer one gets 413 before it is read whole. Other routes take 16K",
    )
    serve.add_argument(
        "--witness",
        action="append",
        default=[],
        type=_witness_option,
        metavar="URL,VKEY",
        help="a tlog-witness to send each new checkpoint to (repeatable); the checkpoint "
        "route serves its cosignatures",
    )
    serve.add_argument(
        "--worker",
        action="append",
        default=[],
        metavar="PLACE[,reach=R][,trust=T][,attempts=N]",
        help="run the background jobs of this agent node (team:acme/agent:w) in the "
        "service's loop, reading subtree:PLACE (the only reach accepted) at trust T "
        "(default unverified), N attempts a failing job (default 5); repeat for more agents",
    )
    serve.add_argument(
        "--worker-interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="with --worker: seconds between looks at the queues (default 2)",
    )
    serve.add_argument(
        "--tlog-public",
        action="store_true",
        help="serve /tlog/checkpoint and the hash tiles without a token (they disclose no "
        "content; default: auditor and admin tokens only)",
    )
    serve.add_argument(
        "--tlog-public-entries",
        action="store_true",
        help="serve the tlog entry bundles and their signatures without a token too (the "
        "signed bodies: kinds, namespaces, item ids; never a payload)",
    )
    serve.add_argument("--log-level", default="warning")


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``mcp`` and ``tokens`` to the ``memseal`` parser."""
    serve = verbs.add_parser(
        "serve",
        parents=[store_options()],
        help="the HTTP service (and MCP over streamable HTTP); makes the data folder if missing",
    )
    _serve_options(serve)
    serve.set_defaults(run=_serve)

    mcp = verbs.add_parser(
        "mcp", parents=[store_options()], help="the tools over MCP stdio, for one scope"
    )
    _scope_options(mcp)
    mcp.add_argument("--run", dest="run_id", help="the run id (resume it by passing it again)")
    mcp.add_argument("--fork", action="store_true", help="a resumed run that diverges goes live")
    mcp.add_argument(
        "--as-of",
        dest="as_of",
        type=count_option("--as-of"),
        metavar="N",
        help="serve the read tools over the memory as of tree size N (unrecorded; no --run)",
    )
    mcp.add_argument("--embedder", default="default", choices=["default", "hashing", "none"])
    mcp.set_defaults(run=_mcp)

    tokens = verbs.add_parser(
        "tokens", parents=[data_options()], help="service tokens: add, list, revoke"
    )
    tokens.add_argument("action", choices=["add", "list", "revoke"])
    tokens.add_argument("id", nargs="?", help="the token id (revoke)")
    tokens.add_argument("--role", choices=["agent", "auditor", "admin"], default="agent")
    tokens.add_argument("--label", default="", help="a note shown by tokens list")
    _scope_options(tokens, place_required=False)
    tokens.set_defaults(run=_tokens)
