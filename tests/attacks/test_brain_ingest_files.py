"""Attacks on a brain ingest through the files of its folder, on SQLite and PostgreSQL.

A folder to ingest is often someone else's (a cloned repository, a shared drive). It
may hold a link to a secret outside it, a link to ``/dev/zero`` (its size is 0, so a
size check passes and the read never ends), a FIFO no one writes to (an open waits
forever), a device, or a folder link that loops. Ingest reads regular files inside the
folder only: every other entry is skipped and reported by name, its content never in
memory, and the ingest ends. The same through ``Brain`` and through ``memseal brain
ingest``; every ingest runs under a timeout and a memory bound, so a regression fails
the test instead of hanging it or exhausting the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.apps.lifecycle import Brain, IngestReport
from memseal.apps.lifecycle._files import read_inside
from memseal.memory import Memory
from memseal.tools import ToolScope

PLACE = "team:acme/brain:handbook"
SCOPE = ToolScope.placed_at(PLACE)
SECRET = "the launch code is 0000"
GOOD = "# Leave\n\nEveryone gets 25 days of paid leave.\n"
# Room for the ingest itself; a read of /dev/zero passes it within a second.
HEADROOM = 1 << 30
TIMEOUT = 60


def _address_space() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


@contextlib.contextmanager
def _bounded_memory() -> Iterator[None]:
    """The process may grow by HEADROOM at most: an unbounded read is a MemoryError."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + HEADROOM, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _unblock(fifo: Path) -> None:
    """Open the FIFO's other end, so a reader blocked on it gets its end of file."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def _ingest(memory: Memory, folder: Path, fifo: Path | None = None) -> IngestReport:
    brain = Brain(memory, SCOPE)
    with _bounded_memory():
        try:
            return await asyncio.wait_for(brain.ingest(folder), TIMEOUT)
        except TimeoutError:
            if fifo is not None:
                _unblock(fifo)  # lets the blocked reading thread end with the test
            raise AssertionError(f"the ingest of {folder} did not end in {TIMEOUT} s") from None


async def _texts(memory: Memory, scope: ToolScope = SCOPE) -> list[str]:
    page = await memory.tools(scope).call("memory_list", {"filter": {"tags_any": ["brain"]}})
    return [item["text"] for item in page["items"]]


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text(GOOD)
    return docs


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n")
    return secret


def _device(path: Path) -> bool:
    """A character device like /dev/zero at ``path``; False where none may be made."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except (PermissionError, AttributeError):
        return False
    return True


def _skipped(report: IngestReport) -> dict[str, str]:
    return dict(report.skipped)


async def test_a_link_to_a_file_outside_the_folder_is_skipped_and_never_read(
    memory: Memory, tmp_path: Path
) -> None:
    docs = _folder(tmp_path)
    (docs / "secret.md").symlink_to(_secret(tmp_path))
    (docs / "up.md").symlink_to(Path("..") / "outside" / "secret.md")
    report = await _ingest(memory, docs)
    skipped = _skipped(report)
    assert "outside the folder" in skipped["secret.md"]
    assert "outside the folder" in skipped["up.md"]
    assert report.documents == 1
    texts = await _texts(memory)
    assert texts and not any(SECRET in text for text in texts)
    await memory.verify(deep=True)


async def test_a_link_inside_the_folder_is_followed_as_its_own_document(
    memory: Memory, tmp_path: Path
) -> None:
    docs = _folder(tmp_path)
    (docs / "sub").mkdir()
    (docs / "sub" / "README.md").symlink_to(Path("..") / "leave.md")
    report = await _ingest(memory, docs)
    assert report.skipped == () and report.documents == 2
    assert await Brain(memory, SCOPE).chunks_of("sub/README.md")


async def test_a_link_to_dev_zero_is_skipped_and_the_ingest_ends(
    memory: Memory, tmp_path: Path
) -> None:
    docs = _folder(tmp_path)
    (docs / "zero.md").symlink_to("/dev/zero")
    report = await _ingest(memory, docs)
    assert "outside the folder" in _skipped(report)["zero.md"]
    assert report.documents == 1


async def test_a_fifo_is_skipped_by_name_and_the_ingest_does_not_wait_for_a_writer(
    memory: Memory, tmp_path: Path
) -> None:
    docs = _folder(tmp_path)
    fifo = docs / "pipe.md"
    os.mkfifo(fifo)
    report = await _ingest(memory, docs, fifo)
    assert "pipe.md is a FIFO" in _skipped(report)["pipe.md"]
    assert report.documents == 1


async def test_a_device_in_the_folder_is_skipped_and_never_read(
    memory: Memory, tmp_path: Path
) -> None:
    docs = _folder(tmp_path)
    if not _device(docs / "zero.md"):
        pytest.skip("this process may not make a device file (mknod)")
    report = await _ingest(memory, docs)
    assert "zero.md is a character device" in _skipped(report)["zero.md"]
    assert report.documents == 1


async def test_folder_links_that_loop_end_the_walk(memory: Memory, tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    (docs / "sub").mkdir()
    (docs / "sub" / "notes.txt").write_text("Badges come from reception.\n")
    (docs / "sub" / "again").symlink_to(Path(".."))
    (docs / "self.md").symlink_to("self.md")  # a link to itself: a loop, not a folder
    report = await _ingest(memory, docs)
    skipped = _skipped(report)
    assert "not followed" in skipped["sub/again"]
    assert "link loop" in skipped["self.md"]
    assert report.documents == 2  # leave.md and sub/notes.txt, each once


def _remove_nested(top: Path, name: str, depth: int) -> None:
    """Remove ``depth`` nested folders ``name`` under ``top``, deepest first, without
    recursion (shutil.rmtree recurses once per level)."""
    for level in range(depth, 0, -1):
        path = top.joinpath(*[name] * level)
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


async def test_a_folder_nested_deeper_than_a_walk_recurses_is_skipped_and_reported(
    memory: Memory, tmp_path: Path
) -> None:
    # os.walk recurses once per level: 1,100 levels were a RecursionError out of ingest.
    docs = _folder(tmp_path)
    depth = 1100
    for level in range(1, depth + 1):  # Path.mkdir(parents=True) recurses too
        docs.joinpath(*["a"] * level).mkdir()
    bottom = docs.joinpath(*["a"] * depth)
    (bottom / "deep.md").write_text(SECRET + "\n")
    (docs / "a" / "near.md").write_text("Badges come from reception.\n")
    try:
        report = await _ingest(memory, docs)
        skipped = _skipped(report)
        too_deep = [(path, why) for path, why in skipped.items() if "deeper than" in why]
        assert len(too_deep) == 1 and "not walked" in too_deep[0][1], skipped
        assert too_deep[0][0].startswith("a/a/") and len(too_deep[0][0].split("/")) < depth
        assert report.documents == 2  # leave.md and a/near.md
        assert not any(SECRET in text for text in await _texts(memory))
    finally:
        _remove_nested(docs, "a", depth)


async def test_a_folder_swapped_for_a_link_mid_ingest_leads_no_read_outside(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whoever can write the folder's parent swaps the folder for a link to a secret
    # folder once the walk has begun: the files read are still the folder's own.
    share = tmp_path / "share"
    share.mkdir()
    docs = share / "docs"
    docs.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("a.md", "b.md"):
        (docs / name).write_text(f"Harmless note {name}.\n")
        (outside / name).write_text(f"{SECRET} ({name})\n")
    reads: list[object] = []

    def swapping(*args: Any, **kwargs: Any) -> str:
        if not reads:
            docs.rename(share / "old")
            docs.symlink_to(outside)
        reads.append(args)
        return read_inside(*args, **kwargs)

    monkeypatch.setattr("memseal.apps.lifecycle.brain.read_inside", swapping)
    report = await _ingest(memory, docs)
    assert len(reads) == 2 and report.documents == 2
    texts = await _texts(memory)
    assert sorted(texts) == ["Harmless note a.md.", "Harmless note b.md."], texts
    await memory.verify(deep=True)


# The CLI's own entry point, in a child bounded to 2 GiB of address space.
_CHILD = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
    "from memseal.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _cli(folder: Path, data: Path, store_url: str | None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-c", _CHILD, "brain", "ingest", str(folder)]
    args += ["--source", "handbook", "--data", str(data), "--exact-only"]
    if store_url is not None:
        args += ["--store", store_url]
    try:
        return subprocess.run(
            args, capture_output=True, text=True, timeout=TIMEOUT * 2, check=False
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"memseal brain ingest did not end in {TIMEOUT * 2} s") from None


async def test_the_cli_skips_and_names_every_file_that_is_not_a_document_inside(
    tmp_path: Path, store_url: str | None
) -> None:
    docs = _folder(tmp_path)
    (docs / "secret.md").symlink_to(_secret(tmp_path))
    (docs / "zero.md").symlink_to("/dev/zero")
    fifo = docs / "pipe.md"
    os.mkfifo(fifo)
    device = _device(docs / "device.md")
    (docs / "loop").symlink_to(Path("."))
    (docs / "forged\nskipped leave.md: x.md").write_text(GOOD)  # a name that forges a line
    data = tmp_path / "d"
    try:
        done = await asyncio.to_thread(_cli, docs, data, store_url)
    finally:
        _unblock(fifo)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "1 document(s)" in lines[0]
    for name in ("secret.md", "zero.md", "pipe.md", "loop", *(("device.md",) if device else ())):
        assert any(line.startswith(f"skipped {name}: ") for line in lines), done.stdout
    assert "skipped forged\\nskipped leave.md: x.md: " in done.stdout
    assert not any(line.startswith("skipped leave.md") for line in lines)
    async with memseal.open(
        data, store=store_url, embedder=None, checkpoint_interval=None
    ) as memory:
        # Without --tenant, the source's node is brain:NAME.
        texts = await _texts(memory, ToolScope.placed_at("brain:handbook"))
        assert texts == [GOOD.strip()]
        await memory.verify(deep=True)
