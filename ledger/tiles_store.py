"""Tiles from a log store: one tile for a request, or a folder of them brought up to date.

Nothing here recomputes the tree. A hash tile is one read of its stored hashes (one
``IN`` query of at most 256 rows); an entry bundle and its signatures one range read
of at most 256 entries. Only signed entry bytes and signatures leave the store:
payloads (and whatever a forget left of one) are never read.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from .checkpoint import parse_checkpoint
from .errors import InvalidRequest, NotFound, StorageError
from .merkle import tree_hash
from .note import split_note
from .store import LogStore, Record
from .tiles import (
    ENTRIES,
    HASHES,
    MAX_CHECKPOINT_BYTES,
    SIGNATURES,
    TILE_WIDTH,
    TileRef,
    encode_bundle,
    encode_signatures,
    new_tiles,
    read_hash_tile,
    tile_path,
)

__all__ = ["CHECKPOINT_FILE", "export_tiles", "read_tile"]

CHECKPOINT_FILE = "checkpoint"
#: Hash tiles read on one snapshot per store call while exporting.
_BATCH = 64


async def _bundle_records(store: LogStore, ref: TileRef) -> list[Record]:
    first = ref.index * TILE_WIDTH
    records: list[Record] = []
    async for chunk in store.scan_chunks(first, first + ref.width, ref.width):
        records.extend(chunk)
    if len(records) != ref.width:
        raise StorageError(f"the store returned {len(records)} entries for {tile_path(ref)}")
    return records


def _bundle_bytes(ref: TileRef, records: list[Record]) -> bytes:
    if ref.kind == ENTRIES:
        return encode_bundle([r.leaf for r in records], ref.index * TILE_WIDTH)
    return encode_signatures([r.signature for r in records])


async def read_tile(store: LogStore, ref: TileRef, size: int) -> bytes:
    """The bytes of tile ``ref`` of the tree of ``size`` entries (a checkpoint's size);
    NotFound when that tree lacks some of its hashes or entries.

    A partial tile is served at any width the tree covers, not only the newest: its bytes
    are the first hashes of its full tile, so they never change, and a client still
    following an older checkpoint asks for that checkpoint's width.
    """
    if not ref.covered_by(size):
        raise NotFound(f"{tile_path(ref)} is not a tile of the tree of {size} entries")
    if ref.kind == HASHES:
        return await store.tree_read(lambda read: read_hash_tile(ref, read))
    return _bundle_bytes(ref, await _bundle_records(store, ref))


def _read_batch(batch: list[TileRef], read: Callable[[Sequence[int]], list[bytes]]) -> list[bytes]:
    return [read_hash_tile(ref, read) for ref in batch]


def _linked(folder: Path, name: str) -> InvalidRequest:
    return InvalidRequest(
        f"tiles folder {folder}: {name} is a symlink or not what memseal wrote there; "
        "memseal tiles follows no link inside its folder: remove it or export into an "
        "empty folder"
    )


def _open_dir(folder: Path, parts: Sequence[str], *, create: bool) -> int | None:
    """A descriptor of ``folder/<parts>``, each step opened without following a link (so
    nothing outside ``folder`` is ever written or removed); None if absent and not
    ``create``d."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for depth, name in enumerate(parts):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise
                os.close(fd)
                return None
            except OSError as exc:  # ELOOP on a link, ENOTDIR on a file
                raise _linked(folder, "/".join(parts[: depth + 1])) from exc
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write(folder: Path, name: str, data: bytes) -> None:
    """Replace ``folder/name`` atomically: a reader sees the old bytes or the new, whole."""
    *parents, leaf = name.split("/")
    at = _open_dir(folder, parents, create=True)
    assert at is not None
    scratch = f".{leaf}.{os.getpid()}.tmp"
    try:
        # A link planted under the scratch name is removed, never written through.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch, dir_fd=at)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with open(os.open(scratch, flags, 0o666, dir_fd=at), "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.replace(scratch, leaf, src_dir_fd=at, dst_dir_fd=at)
        except IsADirectoryError as exc:
            os.unlink(scratch, dir_fd=at)
            raise _linked(folder, name) from exc
    finally:
        os.close(at)


def _drop_partials(folder: Path, ref: TileRef) -> None:
    """Once a full tile is written its partial forms may go (the spec allows it)."""
    *parents, leaf = f"{tile_path(ref)}.p".split("/")
    at = _open_dir(folder, parents, create=False)
    if at is None:
        return
    try:
        partials = _open_dir(folder, [*parents, leaf], create=False)
        if partials is None:
            return
        try:
            for width in os.listdir(partials):
                try:
                    # unlink removes a link itself, never what it points to.
                    os.unlink(width, dir_fd=partials)
                except IsADirectoryError as exc:
                    raise _linked(folder, f"{tile_path(ref)}.p/{width}") from exc
        finally:
            os.close(partials)
        os.rmdir(leaf, dir_fd=at)
    finally:
        os.close(at)


def _read_checkpoint(folder: Path) -> str | None:
    """The folder's checkpoint note, read without following a link; None if absent."""
    at = _open_dir(folder, [], create=False)
    assert at is not None
    try:
        fd = os.open(CHECKPOINT_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=at)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _linked(folder, CHECKPOINT_FILE) from exc
    finally:
        os.close(at)
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _linked(folder, CHECKPOINT_FILE)
        data = file.read(MAX_CHECKPOINT_BYTES + 1)
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise InvalidRequest(
            f"tiles folder {folder}: its checkpoint holds more than {MAX_CHECKPOINT_BYTES} bytes"
        )
    return data.decode("utf-8")


async def _old_size(store: LogStore, folder: Path, origin: str, size: int) -> int:
    """The tree size the folder already holds, checked to be a prefix of this log."""
    try:
        note = _read_checkpoint(folder)
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"tiles folder {folder}: cannot read its checkpoint: {exc}") from exc
    if note is None:
        return 0
    try:
        old = parse_checkpoint(split_note(note)[0])
    except InvalidRequest as exc:
        raise InvalidRequest(f"tiles folder {folder}: its checkpoint: {exc}") from exc
    if old.origin != origin or old.size > size:
        raise InvalidRequest(
            f"tiles folder {folder} holds log {old.origin!r} at size {old.size}, not a prefix "
            f"of log {origin!r} at size {size}: export into an empty folder"
        )
    root = await store.tree_read(lambda read: tree_hash(old.size, read))
    if root != old.root:
        raise InvalidRequest(
            f"tiles folder {folder} holds a tree of {old.size} entries with another root "
            "than this log's: export into an empty folder"
        )
    return old.size


async def export_tiles(
    store: LogStore,
    note: str,
    folder: Path,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Bring ``folder`` up to the signed checkpoint ``note`` of ``store``'s log; return how
    many files were written.

    Only the tiles the folder lacks are written: the full tiles completed since its
    checkpoint and the partial tiles at the new size. The checkpoint goes last, so a
    reader never sees a checkpoint whose tiles are not all there.
    """
    checkpoint = parse_checkpoint(split_note(note)[0])
    size = checkpoint.size
    folder.mkdir(parents=True, exist_ok=True)
    old = await _old_size(store, folder, checkpoint.origin, size)
    refs = list(new_tiles(old, size))
    hashes = [r for r in refs if r.kind == HASHES]
    bundles = [r for r in refs if r.kind == ENTRIES]
    total, done = len(refs) + 1, 0

    def wrote(ref: TileRef, data: bytes) -> None:
        nonlocal done
        _write(folder, tile_path(ref), data)
        if ref.full:
            _drop_partials(folder, ref)
        done += 1
        if progress is not None:
            progress(done, total)

    for start in range(0, len(hashes), _BATCH):
        batch = hashes[start : start + _BATCH]
        tiles = await store.tree_read(functools.partial(_read_batch, batch))
        for ref, data in zip(batch, tiles, strict=True):
            wrote(ref, data)
    for ref in bundles:
        records = await _bundle_records(store, ref)
        signed = TileRef(kind=SIGNATURES, index=ref.index, width=ref.width)
        wrote(ref, _bundle_bytes(ref, records))
        wrote(signed, _bundle_bytes(signed, records))
    _write(folder, CHECKPOINT_FILE, note.encode("utf-8"))
    if progress is not None:
        progress(total, total)
    return total
