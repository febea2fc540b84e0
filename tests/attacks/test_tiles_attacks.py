"""Hostile logs, mirrors and agents against the tlog-tiles export and ``verify --tiles``.

An agent cannot sign an entry too large for an entry bundle (which would stop every later
export); a forged checkpoint size costs a verifier nothing before its signature is checked;
``memseal tiles`` writes and removes nothing outside its folder through a planted link; and
no tile, checkpoint or HTTP body is read past the most its file can hold. Each runs on each
store where a store is involved.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memseal.ledger.entry import MAX_ENTRY_BYTES
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.note import NoteSigner, sign_note, split_note
from memseal.ledger.tiles_store import export_tiles
from memseal.memory import Memory

# The verifier runs in a child with this much address space: reading without a bound
# fails there (MemoryError, or it never ends) instead of taking the test runner down.
_CHILD_MEMORY = 1536 * 1024 * 1024
_CHILD_RUN = f"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({_CHILD_MEMORY}, {_CHILD_MEMORY}))
from memseal import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def _verify_in_child(where: str, vkey: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-c", _CHILD_RUN, "verify", "--tiles", where, "--trust", vkey],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"verify --tiles {where} ran for a minute: unbounded work")


async def _last_leaf(memory: Memory) -> int:
    size = await memory.ledger.size()
    async for chunk in memory.ledger.store.scan_chunks(size - 1, size, 1):
        return len(chunk[-1].leaf)
    raise AssertionError("empty log")


def _tags(total: int) -> list[str]:
    """``total`` characters of tags, as the most tags of at most 64 characters a store takes."""
    out: list[str] = []
    while total > 0 and len(out) < 32:
        k = min(64, total)
        out.append(f"{len(out):02d}" + "t" * (k - 2) if k > 2 else "t" * k)
        total -= k
    return out


async def test_an_agent_cannot_sign_an_entry_a_bundle_cannot_frame(
    memory: Memory, tmp_path: Path
) -> None:
    # memory_list records the page it returned: fill a page to just under the body limit,
    # then search the last item's tags for a body whose entry passes 65,535 bytes.
    tools = memory.tools()
    count = 0

    async def store(total: int) -> str:
        nonlocal count
        count += 1
        args = {"learning": {"text": f"f{count}"}, "tags": _tags(total)}
        return str((await tools.call("memory_store", args))["id"])

    async def page() -> int | None:
        before = await memory.ledger.size()
        try:
            await tools.call("memory_list", {"limit": 50})
        except InvalidRequest as exc:
            assert "`body`" in str(exc) and "limit" in str(exc), exc
            assert await memory.ledger.size() == before  # nothing half-written
            return None
        leaf = await _last_leaf(memory)
        assert leaf <= MAX_ENTRY_BYTES, f"an agent signed an entry of {leaf} bytes"
        return leaf

    ids = []
    while True:
        ids.append(await store(2048))
        if await page() is None:
            break
    await tools.call("memory_forget", {"ids": [ids.pop()]})
    low, high = 0, 2048
    while low < high:
        mid = (low + high + 1) // 2
        item = await store(mid)
        if await page() is None:
            high = mid - 1
        else:
            low = mid
        await tools.call("memory_forget", {"ids": [item]})
    async for record in memory.ledger.store.scan(0):
        assert len(record.leaf) <= MAX_ENTRY_BYTES, record.seq
    note = await memory.ledger.checkpoint()
    assert await export_tiles(memory.ledger.store, note, tmp_path / "tiles") > 0


async def _mirror(memory: Memory, folder: Path, count: int) -> str:
    for i in range(count):
        await memory.ledger.append("note", {"i": i}, {"text": f"tiles attack {i}"})
    note = await memory.ledger.checkpoint()
    await export_tiles(memory.ledger.store, note, folder)
    return note


async def test_a_forged_checkpoint_size_is_refused_before_any_walk(
    memory: Memory, tmp_path: Path
) -> None:
    mirror = tmp_path / "mirror"
    note = await _mirror(memory, mirror, 3)
    text, _ = split_note(note)
    lines = text.split("\n")
    lines[1] = str(2**40)
    forged = "\n".join(lines)
    # The log's signature kept under a size it never signed.
    (mirror / "checkpoint").write_text(note.replace(text, forged))
    done = _verify_in_child(str(mirror), memory.trust_root)
    assert done.returncode == 1 and "checkpoint" in done.stderr, done.stderr
    # Signed by a key the auditor does not know (as a rotated key would be): the walk
    # stops at the first bundle the mirror lacks.
    stranger = NoteSigner.generate(lines[0])
    (mirror / "checkpoint").write_text(sign_note(forged, [stranger]))
    done = _verify_in_child(str(mirror), memory.trust_root)
    assert done.returncode == 1 and "tile/entries/000 is missing" in done.stderr, done.stderr


@pytest.mark.parametrize("planted", ["tile/entries/000.p", "tile", "tile/entries/.000.{pid}.tmp"])
async def test_tiles_never_writes_or_removes_through_a_planted_link(
    memory: Memory, tmp_path: Path, planted: str
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    mirror = tmp_path / "mirror"
    await _mirror(memory, mirror, 10)
    link = mirror / planted.format(pid=os.getpid())
    if link.is_dir():
        for child in sorted(link.rglob("*"), reverse=True):
            child.unlink() if not child.is_dir() else child.rmdir()
        link.rmdir()
    else:
        link.unlink(missing_ok=True)
    # A link to a folder to empty or fill, or (the scratch name) to a file to overwrite.
    link.symlink_to(victim / "precious.txt" if planted.endswith(".tmp") else victim)
    for i in range(300):  # tile/entries/000 becomes full: its partials are dropped
        await memory.ledger.append("note", {"i": i}, {"text": f"more {i}"})
    note = await memory.ledger.checkpoint()
    if planted.endswith(".tmp"):
        # A link under the scratch name is replaced, never written through.
        await export_tiles(memory.ledger.store, note, mirror)
    else:
        with pytest.raises(InvalidRequest, match=planted):
            await export_tiles(memory.ledger.store, note, mirror)
    assert sorted(os.listdir(victim)) == ["precious.txt"]
    assert (victim / "precious.txt").read_text() == "keep me"


async def test_verify_tiles_reads_no_file_past_its_bound(memory: Memory, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    await _mirror(memory, mirror, 3)
    endless = mirror / "tile/entries/000.p/3"
    bundle = endless.read_bytes()
    endless.unlink()
    endless.symlink_to("/dev/zero")
    done = _verify_in_child(str(mirror), memory.trust_root)
    assert done.returncode == 1 and "tile/entries/000.p/3" in done.stderr, done.stderr
    endless.unlink()
    endless.write_bytes(b"")
    os.truncate(endless, 256 * (65_535 + 2) + 1)  # sparse: one byte past an entry bundle
    done = _verify_in_child(str(mirror), memory.trust_root)
    assert done.returncode == 1 and "tile/entries/000.p/3" in done.stderr, done.stderr
    endless.write_bytes(bundle)
    (mirror / "tile/0/000.p/3").write_bytes(b"\0" * (3 * 32 + 1))
    done = _verify_in_child(str(mirror), memory.trust_root)
    assert done.returncode == 1 and "tile/0/000.p/3" in done.stderr, done.stderr


@pytest.fixture
def endless_server(tmp_path: Path) -> Iterator[str]:
    """A loopback static host whose every file is an endless stream of zeros."""

    class Endless(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                return

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tlog"
    finally:
        server.shutdown()
        server.server_close()


def test_verify_tiles_cuts_an_endless_http_body(endless_server: str) -> None:
    vkey = NoteSigner.generate("memseal-test").verifier.text
    done = _verify_in_child(endless_server, vkey)
    assert done.returncode == 1 and "checkpoint" in done.stderr, done.stderr
    assert "65,536 bytes" in done.stderr
