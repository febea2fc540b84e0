"""Helpers of the console's browser tests (no tests here): a real server, the seed, sign-in.

See conftest.py for how the browser is found and where screenshots go.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

import memseal
from memseal import ToolScope
from memseal.cli.service import first_admin
from memseal.service.app import create_app
from memseal.service.tokens import TokenStore, scope_from

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ACME = "team:acme/agent:writer"
CORP = "team:acme-corp/agent:spy"
ACME_TEXT = "the acme deploy key lives in vault path ops/deploy"
REJECT_TEXT = "the acme release is on friday"
CORP_TEXT = "acme-corp private roadmap: merge with globex"
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_in_thread(app: Any) -> tuple[str, Any, threading.Thread]:
    """``app`` under uvicorn on a free loopback port in a thread: (url, server, thread)."""
    port = _free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", ws="none", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}", server, thread


@dataclass
class Server:
    """``memseal serve`` in-process on a data folder: uvicorn on 127.0.0.1 in a thread."""

    folder: Path
    url: str = ""
    admin: str = ""
    tokens: dict[str, str] = field(default_factory=dict)
    #: ``URL,VKEY`` of the witnesses to send checkpoints to (``serve --witness``).
    witnesses: tuple[str, ...] = ()
    #: ``serve --tlog-public``: the tiles' checkpoint and hash tiles need no token.
    tlog_public: bool = False
    _server: Any = None
    _thread: Any = None

    def start(self) -> Server:
        self.admin = first_admin(self.folder) or ""
        app = create_app(
            self.folder,
            embedder=None,
            checkpoint_interval=None,
            witnesses=self.witnesses,
            tlog_public=self.tlog_public,
        )
        self.url, self._server, self._thread = serve_in_thread(app)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)

    def token(self, role: str, place: str, **fields: Any) -> str:
        store = TokenStore(self.folder)
        try:
            made, _ = store.add(role, scope_from(role=role, place=place, **fields), label=role)
        finally:
            store.close()
        return made

    def vkey(self) -> str:
        return (self.folder / "keys" / "ledger.vkey").read_text().strip()


async def _seed(folder: Path) -> None:
    """Two tenants' memory and one run with a revalidated step and a diverged (forked) one."""
    acme = ToolScope.placed_at(ACME)
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        async with memory.run("acme-nightly", acme) as run:
            await run.call("memory_store", {"learning": {"text": ACME_TEXT}})
            await run.call("memory_store", {"learning": {"text": REJECT_TEXT}})
            await run.call("memory_fetch", {"query": "deploy key"})
            await run.call("memory_list", {})
        # Resumed: steps 0 and 1 replay their memos, step 2 is revalidated (live, and a
        # new signed entry supersedes the old one).
        async with memory.run("acme-nightly", acme) as run:
            await run.call("memory_store", {"learning": {"text": ACME_TEXT}})
            await run.call("memory_store", {"learning": {"text": REJECT_TEXT}})
            await run.call("memory_fetch", {"query": "deploy key"}, revalidate=True)
        # Resumed with fork=True: step 3 asks something else, diverges, and goes live.
        async with memory.run("acme-nightly", acme, fork=True) as run:
            await run.call("memory_store", {"learning": {"text": ACME_TEXT}})
            await run.call("memory_store", {"learning": {"text": REJECT_TEXT}})
            await run.call("memory_fetch", {"query": "deploy key"})
            await run.call("memory_fetch", {"query": "vault"})
        async with memory.run("corp-secret", ToolScope.placed_at(CORP)) as run:
            await run.call("memory_store", {"learning": {"text": CORP_TEXT}})
        await memory.ledger.checkpoint()


def in_thread(work: Callable[[], Awaitable[Any]]) -> Any:
    """Run async ``work`` to the end on a loop of its own: Playwright's sync API keeps an
    event loop running in the test's thread, so asyncio.run() cannot start there."""
    out: list[Any] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            out.append(asyncio.run(work()))  # type: ignore[arg-type]
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out[0]


def seeded_server(folder: Path) -> Server:
    in_thread(lambda: _seed(folder))
    server = Server(folder)
    server.tokens = {
        "agent": server.token("agent", ACME),
        "corp_agent": server.token("agent", CORP),
        "auditor": server.token("auditor", "team:acme"),
    }
    return server.start()


def shoot(page: Any, artifacts: Path, name: str, doc: str | None = None) -> None:
    """A full-page screenshot as an artifact; ``doc`` also refreshes docs/img/DOC when
    ``MEMSEAL_DOC_SCREENSHOTS=1`` (so a test run never rewrites the repository)."""
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
    if doc is not None and os.environ.get("MEMSEAL_DOC_SCREENSHOTS") == "1":
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(REPO / "docs" / "img" / doc), full_page=False)


def sign_in(page: Any, server: Server, token: str, where: str = "") -> None:
    page.goto(f"{server.url}/{where}")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.locator("#who").get_by_role("button", name="Sign out").wait_for()


def responses(page: Any) -> list[str]:
    """Every response body the page receives from here on (what it could show or keep)."""
    bodies: list[str] = []

    def keep(response: Any) -> None:
        try:
            bodies.append(f"{response.url}\n{response.text()}")
        except Exception:  # a redirect or a download has no body to read
            bodies.append(response.url)

    page.on("response", keep)
    return bodies
