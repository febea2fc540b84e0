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
* the folder is opened once, and that one descriptor serves the whole ingest:
  the walk lists each folder through a descriptor opened from its parent's, and
  every file is opened from the folder's descriptor one component at a time
  with ``O_NOFOLLOW``. Whoever can write the folder's parent may swap it (or a
  folder inside) for a link mid-ingest: no walk or open follows the swap out;
* the walk is a loop, not a recursion, and goes :data:`MAX_FOLDER_DEPTH` folders
  down: a folder deeper is skipped and reported (1,100 levels once raised a
  ``RecursionError`` out of ``os.walk``);
* a read takes at most the limit and one byte more: a size the file system
  reports (0 for ``/proc`` files and devices) is never trusted.

A file named directly (not found in a folder) is the caller's choice, so a link
there is followed; it must still be a regular file, and its read is bounded. So
is a folder named directly: the one its name leads to when the ingest opens it
is the one walked, to the end (a name that stops leading there in between is
refused, naming ``path``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from memseal.ledger.errors import InvalidRequest, StorageError

__all__ = [
    "MAX_FOLDER_DEPTH",
    "HeldFolder",
    "held_folder",
    "read_inside",
    "read_named",
    "walk_folder",
]

_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
# O_NONBLOCK: an open of a FIFO swapped in after the check returns at once (and fstat
# refuses it) instead of waiting for a writer forever. O_NOCTTY: a terminal never
# becomes the process's controlling one.
_FILE: Final = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | _CLOEXEC
_FOLDER: Final = os.O_RDONLY | _DIRECTORY | _CLOEXEC
_BLOCK: Final = 1 << 16
#: How many folders down a walk goes; a folder deeper is skipped and reported.
MAX_FOLDER_DEPTH: Final = 64


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


@dataclass(frozen=True, slots=True)
class HeldFolder:
    """A folder opened once for an ingest: its descriptor, and its real path then (to
    judge where a link inside leads)."""

    fd: int
    real: str


@contextlib.contextmanager
def held_folder(folder: Path) -> Iterator[HeldFolder]:
    """``folder`` opened once (a link the caller named is followed: the caller chose it)
    for the whole ingest; InvalidRequest naming ``path`` if it changes while opened."""
    try:
        fd = os.open(folder, _FOLDER)
    except OSError as exc:
        raise StorageError(f"cannot open {folder}: {exc.strerror or exc}") from exc
    try:
        real = os.path.realpath(folder)
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(real))
        except OSError:
            same = False
        if not same:
            raise InvalidRequest(f"`path`: {folder} changed while it was opened: not read")
        yield HeldFolder(fd=fd, real=real)
    finally:
        os.close(fd)


def walk_folder(folder: HeldFolder) -> Iterator[tuple[str, str | None]]:
    """Every entry of the held folder a brain considers, in sorted order, each folder's
    files before its subfolders: ``(path, None)`` for a file to read (its path under the
    folder, with ``/``), or ``(path, why)`` for one skipped. Names starting with a dot are
    left out, as a folder's own files."""
    # The descriptors of the folders from the top down to the one being walked, each with
    # its path prefix and the subfolders still to walk (last first): a loop, not a stack
    # of calls, and at most MAX_FOLDER_DEPTH + 1 descriptors open, each closed once.
    stack: list[tuple[str, int, list[str]]] = [("", os.dup(folder.fd), [])]
    try:
        stack[0][2].extend(reversed((yield from _listed(stack[0][1], ""))))
        while stack:
            prefix, fd, left = stack[-1]
            if not left:
                os.close(stack.pop()[1])
                continue
            name = left.pop()
            relative = prefix + name
            if len(stack) > MAX_FOLDER_DEPTH:
                why = f"a folder nested deeper than {MAX_FOLDER_DEPTH} levels: not walked"
                yield relative, why
                continue
            try:
                child = os.open(name, _FOLDER | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                yield relative, f"a folder that cannot be opened ({exc.strerror}): not walked"
                continue
            stack.append((relative + "/", child, []))
            stack[-1][2].extend(reversed((yield from _listed(child, relative + "/"))))
    finally:
        for _, fd, _ in stack:
            os.close(fd)


def _listed(fd: int, prefix: str) -> Generator[tuple[str, str | None], None, list[str]]:
    """Yield the files of the folder ``fd`` and its links to folders (skipped); return its
    subfolders to walk, sorted. As ``os.walk``: an entry is a folder if it leads to one."""
    try:
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        yield prefix.rstrip("/") or ".", f"a folder that cannot be listed ({exc.strerror})"
        return []
    folders: list[str] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            is_folder = entry.is_dir()
        except OSError:
            is_folder = False
        if not is_folder:
            yield prefix + entry.name, None
        elif entry.is_symlink():
            yield prefix + entry.name, "a link to a folder: not followed"
        else:
            folders.append(entry.name)
    return folders


def _opened_folder(top: int, parts: Sequence[str]) -> int:
    """A new descriptor of the folder ``parts`` names below ``top``, each component
    opened from the one above with ``O_NOFOLLOW``."""
    folder = os.dup(top)
    try:
        for part in parts:
            step = os.open(part, _FOLDER | _NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = step
    except BaseException:
        os.close(folder)
        raise
    return folder


def _inside(folder: HeldFolder, relative: str) -> list[str]:
    """The components of the file ``relative`` names under the held folder, a link
    resolved: InvalidRequest for a link that leads outside the folder, is broken, or
    loops. Whatever the path resolves to is opened from the held descriptor."""
    parts = relative.split("/")
    parent = _opened_folder(folder.fd, parts[:-1])
    try:
        mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
    finally:
        os.close(parent)
    if not stat.S_ISLNK(mode):
        return parts
    try:
        target = os.path.realpath(os.path.join(folder.real, *parts), strict=True)
    except OSError:
        raise InvalidRequest(f"{relative} is a broken link or a link loop: not followed") from None
    inner = os.path.relpath(target, folder.real)
    if os.path.isabs(inner) or inner == os.pardir or inner.startswith(os.pardir + os.sep):
        raise InvalidRequest(f"{relative} is a link to outside the folder: not followed")
    return inner.split(os.sep)


def read_inside(folder: HeldFolder, relative: str, limit: int) -> str:
    """The text of the regular file ``relative`` under the held folder, at most ``limit``
    bytes; a link inside the folder is followed (see the module docstring).
    InvalidRequest, naming the file, for anything that is not read."""
    try:
        parts = _inside(folder, relative)
        parent = _opened_folder(folder.fd, parts[:-1])
        try:
            before = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISREG(before.st_mode):
                raise _not_regular(relative, before.st_mode)
            fd = os.open(parts[-1], _FILE | _NOFOLLOW, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            # A component became a link (or went) between the walk and the open.
            raise InvalidRequest(f"{relative} changed while it was read: not read") from None
        raise StorageError(f"cannot read {relative}: {exc.strerror or exc}") from exc
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
