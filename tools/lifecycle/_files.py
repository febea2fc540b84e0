"""Reading the files a brain ingests: regular files only, inside the folder, bounded.

A folder handed to :meth:`Brain.ingest` may hold what its author never wrote
as a document: a link to ``/etc/passwd`` or to ``/dev/zero``, a FIFO that no
one writes to, a device, a link to a folder that loops back. None of them is
read:

* a link to a file is followed only when its target is inside the folder
  (``README.md -> docs/index.md`` is a document of the folder); a link whose
  target is outside, broken, or loops is skipped and reported, never opened;
* a link to a folder is never walked (so no loop and no file twice), and is
  reported;
* a FIFO, socket or device is skipped with its name, and never opened: it is
  checked before the open (``lstat`` under the folder's descriptor) and again on
  the opened descriptor (``fstat``), so a file swapped for one in between is
  refused too;
* every path is opened from the folder's descriptor one component at a time
  with ``O_NOFOLLOW``: a folder swapped for a link after the check cannot lead
  the open outside;
* a read takes at most the limit and one byte more: a size the file system
  reports (0 for ``/proc`` files and devices) is never trusted.

A file named directly (not found in a folder) is the caller's choice, so a link
there is followed; it must still be a regular file, and its read is bounded.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from memseal.ledger.errors import InvalidRequest, StorageError

__all__ = ["read_inside", "read_named", "walk_folder"]

_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
# O_NONBLOCK: an open of a FIFO swapped in after the check returns at once (and fstat
# refuses it) instead of waiting for a writer forever. O_NOCTTY: a terminal never
# becomes the process's controlling one.
_FILE: Final = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | _CLOEXEC
_FOLDER: Final = os.O_RDONLY | _DIRECTORY | _CLOEXEC
_BLOCK: Final = 1 << 16


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _not_regular(name: str, mode: int) -> InvalidRequest:
    return InvalidRequest(f"{name} is {_kind(mode)}, not a regular file: not read")


def walk_folder(folder: Path) -> Iterator[tuple[str, str | None]]:
    """Every entry of ``folder`` a brain considers, in sorted order: ``(path, None)``
    for a file to read (its path under the folder, with ``/``), or ``(path, why)`` for
    one skipped. Names starting with a dot are left out, as a folder's own files."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        here = Path(root)
        kept: list[str] = []
        for name in sorted(dirs):
            if name.startswith("."):
                continue
            if (here / name).is_symlink():
                relative = (here / name).relative_to(folder).as_posix()
                yield relative, "a link to a folder: not followed"
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            if not name.startswith("."):
                yield (here / name).relative_to(folder).as_posix(), None


def _inside(root: str, relative: str) -> list[str]:
    """The components of the file ``relative`` names under ``root``, a link resolved:
    InvalidRequest for a link that leads outside the folder, is broken, or loops."""
    parts = relative.split("/")
    path = os.path.join(root, *parts)
    if not os.path.islink(path):
        return parts
    try:
        target = os.path.realpath(path, strict=True)
    except OSError:
        raise InvalidRequest(f"{relative} is a broken link or a link loop: not followed") from None
    inner = os.path.relpath(target, root)
    if os.path.isabs(inner) or inner == os.pardir or inner.startswith(os.pardir + os.sep):
        raise InvalidRequest(f"{relative} is a link to outside the folder: not followed")
    return inner.split(os.sep)


def read_inside(root: str, relative: str, limit: int) -> str:
    """The text of the regular file ``relative`` under the folder ``root`` (its real
    path), at most ``limit`` bytes; a link inside the folder is followed (see the module
    docstring). InvalidRequest, naming the file, for anything that is not read."""
    parts = _inside(root, relative)
    folder = os.open(root, _FOLDER)
    try:
        for part in parts[:-1]:
            step = os.open(part, _FOLDER | _NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = step
        before = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        if not stat.S_ISREG(before.st_mode):
            raise _not_regular(relative, before.st_mode)
        fd = os.open(parts[-1], _FILE | _NOFOLLOW, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            # A component became a link (or went) between the walk and the open.
            raise InvalidRequest(f"{relative} changed while it was read: not read") from None
        raise StorageError(f"cannot read {relative}: {exc.strerror or exc}") from exc
    finally:
        os.close(folder)
    return _read(fd, relative, limit)


def read_named(path: Path, limit: int) -> str:
    """The text of the file ``path`` names (a link followed: the caller named it), which
    must be a regular file of at most ``limit`` bytes."""
    try:
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode):
            raise _not_regular(path.name, before.st_mode)
        fd = os.open(path, _FILE)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return _read(fd, path.name, limit)


def _read(fd: int, name: str, limit: int) -> str:
    """Read the opened ``fd`` (closed here): at most ``limit`` bytes of UTF-8 text, its
    line ends read as text mode reads them (``\\r\\n`` and ``\\r`` as ``\\n``)."""
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise _not_regular(name, opened.st_mode)
        blocks: list[bytes] = []
        size = 0
        while size <= limit:
            block = os.read(fd, min(_BLOCK, limit + 1 - size))
            if not block:
                break
            blocks.append(block)
            size += len(block)
    except OSError as exc:
        raise StorageError(f"cannot read {name}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if size > limit:
        raise InvalidRequest(f"{name} is over {limit:,} bytes; a document is at most {limit:,}")
    try:
        text = b"".join(blocks).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(f"{name} is not UTF-8 text") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")
