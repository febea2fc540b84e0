"""Files at rest: a data folder is 0700 and every database file in it 0600.

SQLite makes a database's ``-wal`` and ``-shm`` files itself, with the mode of
the database file (it copies it, whatever the umask): so the database is made
0600 before SQLite first opens it, and files an older memseal left wider are
tightened before the open. Tightening happens only on files and folders this
process owns; anything else that is open to group or others is refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import StorageError

__all__ = ["SIDE_FILES", "create_private", "private_database", "tighten", "tighten_folder"]

#: The files SQLite keeps beside a database in WAL mode.
SIDE_FILES = ("-wal", "-shm")
_OPEN_TO_OTHERS = stat.S_IRWXG | stat.S_IRWXO


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def tighten(path: Path, mode: int = 0o600) -> None:
    """Take group and world access off ``path`` (to ``mode``); a missing path is left alone."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(f"cannot inspect {path}: {exc.strerror}") from exc
    if not st.st_mode & _OPEN_TO_OTHERS:
        return
    if st.st_uid != os.geteuid():
        raise StorageError(
            f"{path} is open to group or others (mode {_mode(st)}) and is not this "
            f"process's own file to tighten; chmod {mode:o} it or run as its owner"
        )
    try:
        path.chmod(mode)
    except OSError as exc:
        raise StorageError(
            f"{path} is open to group or others (mode {_mode(st)}) and cannot be made "
            f"{mode:04o}: {exc.strerror}"
        ) from exc


def create_private(path: Path) -> None:
    """Make ``path`` an empty 0600 file if it is missing; tighten it to 0600 if wider."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        tighten(path)
        return
    except OSError as exc:
        raise StorageError(f"cannot create {path}: {exc.strerror}") from exc
    os.close(fd)


def private_database(path: Path) -> None:
    """Before SQLite opens ``path`` for writing: it and its side files are 0600."""
    create_private(path)
    for suffix in SIDE_FILES:
        tighten(path.with_name(path.name + suffix))


def tighten_folder(folder: Path) -> None:
    """A folder open to group or others becomes 0700, unless it is a shared one.

    A sticky folder (``/tmp``) is shared by design and never this one's to close,
    and a folder owned by someone else is not ours to change: both are refused.
    """
    try:
        st = folder.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(f"cannot inspect data folder {folder}: {exc.strerror}") from exc
    if not st.st_mode & _OPEN_TO_OTHERS:
        return
    if st.st_mode & stat.S_ISVTX:
        raise StorageError(
            f"data folder {folder} is a shared folder (mode {_mode(st)}, sticky); "
            "give memseal a folder of its own inside it"
        )
    if st.st_uid != os.geteuid():
        raise StorageError(
            f"data folder {folder} is open to group or others (mode {_mode(st)}) and is "
            "not this process's own to tighten; chmod 700 it or run as its owner"
        )
    try:
        folder.chmod(0o700)
    except OSError as exc:
        raise StorageError(
            f"data folder {folder} is open to group or others (mode {_mode(st)}) and "
            f"cannot be made 0700: {exc.strerror}"
        ) from exc
