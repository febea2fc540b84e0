"""The console's Verify page from the log's tiles (C2SP tlog-tiles): this server's /tlog/
or a static mirror on another origin, checked in a real chromium.

The log holds 600 entries (two full tiles and a partial one) and a key rotation at seq
300, so the walk hands the key over and the checkpoint is signed by the second key. The
mirror is the folder ``memseal tiles DIR`` writes, served by a plain static HTTP server
that allows CORS; a byte changed in one of its files turns the page red naming the file.
"""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser.console_support import Server, in_thread, shoot, sign_in

import memseal
from memseal import cli
from memseal.ledger.note import NoteSigner, format_vkey

ENTRIES = 600
ROTATE_AT = 300


class Logged(Server):
    """The served log, its first key and an exported tiles folder of the same size."""

    first: str = ""
    mirror: Path = Path()


async def _log(folder: Path, count: int, rotate_at: int | None = None) -> str:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        for i in range(count):
            if i == rotate_at:
                await memory.rotate_key()  # itself an entry: key_rotated
            await memory.ledger.append("note", {"i": i}, {"text": f"tiles note {i}"})
        await memory.ledger.checkpoint()
        return memory.trust_root


def _export(data: Path, mirror: Path) -> None:
    code: list[int] = []
    thread = threading.Thread(
        target=lambda: code.append(cli.main(["tiles", str(mirror), "--data", str(data)]))
    )
    thread.start()
    thread.join()
    assert code == [0]


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logged]:
    top = tmp_path_factory.mktemp("tiles")
    first = in_thread(lambda: _log(top / "data", ENTRIES - 1, rotate_at=ROTATE_AT))
    _export(top / "data", top / "mirror")
    server = Logged(top / "data", tlog_public=True)
    server.first, server.mirror = first, top / "mirror"
    server.tokens = {
        "auditor": server.token("auditor", "team:acme"),
        "agent": server.token("agent", "team:acme/agent:writer"),
    }
    server.start()
    try:
        yield server
    finally:
        server.stop()


class _CorsFiles(http.server.SimpleHTTPRequestHandler):
    """A static host that lets any page read its files, as a public mirror would."""

    def end_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", "*")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def static_host() -> Iterator[Callable[[Path], str]]:
    started: list[http.server.ThreadingHTTPServer] = []

    def serve(folder: Path) -> str:
        handler = partial(_CorsFiles, directory=str(folder))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/"

    yield serve
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def verify_tiles(page: Any, keys: str, base: str | None = None) -> Any:
    page.get_by_label("Trusted vkeys (one a line)").fill(keys)
    if base is not None:
        page.get_by_label("Tiles base URL").fill(base)
    page.get_by_role("button", name="Verify from the tiles").click()
    verdict = page.locator("[data-verdict]").first
    verdict.wait_for(timeout=60_000)
    return verdict


def checks(page: Any) -> str:
    return str(page.get_by_role("list", name="Checks of the tiles").inner_text())


def test_the_served_tiles_verify_green_and_later_only_grow(
    logged: Logged, page: Any, artifacts: Path
) -> None:
    sign_in(page, logged, logged.tokens["auditor"], "#/verify")
    verdict = verify_tiles(page, logged.first)
    assert verdict.get_attribute("data-verdict") == "pass", verdict.inner_text()
    assert f"all {ENTRIES} entries" in verdict.inner_text()
    done = checks(page)
    assert f"seq {ROTATE_AT}: key rotated" in done  # the walk followed the key history
    assert f"entries 0 to {ENTRIES - 1}" in done and "3 bundles" in done
    # Level 0: two full tiles and a partial one; level 1: a partial one of two hashes.
    assert "4 hash tiles hold what the entries make" in done
    assert "is the checkpoint's" in done
    shoot(page, artifacts, "verify-tiles-pass")

    # The log grows; the next run checks it only grew from the checkpoint kept here.
    with httpx.Client(base_url=logged.url, timeout=30) as client:
        call = client.post(
            "/v1/tools/memory_store",
            headers={"Authorization": f"Bearer {logged.tokens['agent']}"},
            json={"learning": {"text": "a later note"}},
        )
        assert call.status_code == 200, call.text
    in_thread(lambda: _log(logged.folder, 0))
    page.get_by_role("button", name="Verify from the tiles").click()
    page.get_by_text(f"consistent with the size {ENTRIES} kept before").wait_for(timeout=60_000)
    assert f"checkpoint of size {ENTRIES} verified here before" in checks(page)

    # A kept checkpoint the log does not extend (another root at that size): a fork.
    page.evaluate(
        """() => {
          const kept = JSON.parse(localStorage.getItem("memseal.tiles.kept"));
          const [origin] = Object.keys(kept);
          const lines = kept[origin].split("\\n");
          lines[1] = "5";
          kept[origin] = lines.join("\\n");
          localStorage.setItem("memseal.tiles.kept", JSON.stringify(kept));
        }"""
    )
    page.get_by_role("button", name="Verify from the tiles").click()
    verdict = page.locator("[data-verdict=fail]")
    verdict.wait_for(timeout=60_000)
    assert "consistency" in verdict.inner_text() and "a forked log" in verdict.inner_text()


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_entry(path: Path) -> None:
    """Change one digit of an entry's time, as a mirror forging history would."""
    data = path.read_bytes()
    at = data.index(b'"at":"20', 600) + len('"at":"2')
    _flip(path, at)


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (None, None),
        ("tile/0/000", "tile/0/000"),  # a full hash tile
        ("tile/1/000.p/2", "tile/1/000.p/2"),  # the level above it
        ("tile/entries/001", "tile/entries/001, seq 2"),  # a full entry bundle
        ("checkpoint", "checkpoint: the signature by"),
    ],
)
def test_a_static_mirror_verifies_and_a_changed_byte_is_named(
    logged: Logged,
    page: Any,
    static_host: Callable[[Path], str],
    tmp_path: Path,
    tamper: str | None,
    named: str | None,
) -> None:
    copy = tmp_path / "mirror"
    shutil.copytree(logged.mirror, copy)
    if tamper == "tile/entries/001":
        _edit_entry(copy / tamper)
    elif tamper == "checkpoint":
        note = (copy / tamper).read_text()
        (copy / tamper).write_text(note.replace(f"\n{ENTRIES}\n", f"\n{ENTRIES - 1}\n", 1))
    elif tamper is not None:
        _flip(copy / tamper, 40)
    base = static_host(copy)
    sign_in(page, logged, logged.tokens["auditor"], "#/verify")
    # The checkpoint is signed by the key handed over at seq 300: pin both.
    verdict = verify_tiles(page, f"{logged.first}\n{logged.vkey()}", base)
    text = verdict.inner_text()
    if named is None:
        assert verdict.get_attribute("data-verdict") == "pass", text
        assert "without a token" in checks(page)  # the token stays on its own server
        return
    assert verdict.get_attribute("data-verdict") == "fail", text
    assert named in text, text


def test_a_wrong_trust_key_fails_on_the_checkpoint(logged: Logged, page: Any) -> None:
    stranger = NoteSigner.generate("memseal.stranger")
    wrong = format_vkey(stranger.name, bytes(stranger.signing_key.verify_key))
    sign_in(page, logged, logged.tokens["auditor"], "#/verify")
    verdict = verify_tiles(page, wrong)
    text = verdict.inner_text()
    assert verdict.get_attribute("data-verdict") == "fail", text
    assert "checkpoint: no key pinned here signs the checkpoint" in text, text
    assert "not this log's" in text


def test_an_agent_is_told_the_bundles_are_refused_and_what_the_hash_tiles_prove(
    logged: Logged, page: Any, artifacts: Path
) -> None:
    sign_in(page, logged, logged.tokens["agent"], "#/verify")
    assert page.locator("#nav a").all_inner_texts() == ["Verify here", "Runs", "Memory"]
    verdict = verify_tiles(page, f"{logged.first}\n{logged.vkey()}")
    text = verdict.inner_text()
    assert verdict.get_attribute("data-verdict") == "partial", text
    assert "Entry bundles refused (403 on tile/entries/000)" in text
    assert "The entries themselves were NOT checked" in text
    assert "4 hash tiles hold what the leaf hashes make" in checks(page)
    # The ledger API's checks are not offered: this token reads no ledger route.
    assert page.get_by_role("button", name="Verify checkpoint and entries").count() == 0
    shoot(page, artifacts, "verify-tiles-agent")
    # Pinned the first key alone, the hash tiles cannot hand the key over: it says so.
    verdict = verify_tiles(page, logged.first)
    assert verdict.get_attribute("data-verdict") == "fail"
    assert "pin the log's current key" in verdict.inner_text()


def test_an_agent_of_a_private_tlog_is_told_the_checkpoint_is_refused(
    server: Server, page: Any
) -> None:
    sign_in(page, server, server.tokens["agent"], "#/verify")
    verdict = verify_tiles(page, server.vkey())
    text = verdict.inner_text()
    assert verdict.get_attribute("data-verdict") == "fail", text
    assert "checkpoint: refused" in text and "--tlog-public" in text, text
