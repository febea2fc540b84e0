"""The console's browser tests: a real uvicorn server on loopback, system chromium.

Playwright for Python drives Debian's ``chromium`` (``.ci/run`` installs it);
Playwright's own browser download is never used. Without a chromium binary the
tests skip, saying so. Screenshots go to ``$MEMSEAL_ARTIFACTS/console`` (default:
a temporary folder), never into the repository, except the two pictures the docs
show (docs/img), which ``MEMSEAL_DOC_SCREENSHOTS=1`` refreshes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser.console_support import CHROMIUM, Server, seeded_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = seeded_server(tmp_path_factory.mktemp("console") / "data")
    try:
        yield started
    finally:
        started.stop()


# Module-scoped, never session-scoped: Playwright's sync API keeps an event loop running
# in the test thread while it is open, and every asyncio test after it would fail.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("no chromium binary on PATH (apt-get install chromium; .ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, f"the page threw: {errors}"


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("MEMSEAL_ARTIFACTS")
    folder = Path(where) / "console" if where else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
