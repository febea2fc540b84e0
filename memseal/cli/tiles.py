"""``memseal tiles DIR``: the log as a folder of C2SP tlog-tiles; ``verify --tiles``: read back.

``tiles`` cuts a checkpoint (when the log grew) and brings the folder up to it: the
full tiles completed since the folder's checkpoint, the partial tiles at the new size,
then the checkpoint, each file replaced atomically. Sync the folder to any static
host. ``verify --tiles URL_OR_DIR --trust VKEY`` checks such a log from its files
alone (see :mod:`memseal.ledger.tiles_verify`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import stat
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memseal.cli.options import FAILED, OK, USAGE, open_data, store_options, store_url
from memseal.cli.progress import ProgressLine
from memseal.cli.trust import trust_text
from memseal.ledger.errors import InvalidRequest, NotFound, StorageError, VerificationError
from memseal.ledger.note import parse_vkey
from memseal.ledger.tiles import max_file_size
from memseal.ledger.tiles_verify import Fetch, verify_tiles

__all__ = ["add_verbs", "tiles_fetcher", "verify_tiles_command"]


async def _tiles(args: argparse.Namespace) -> int:
    from memseal.ledger.checkpoint import parse_checkpoint
    from memseal.ledger.note import split_note
    from memseal.ledger.tiles_store import export_tiles

    folder = Path(args.folder)
    progress = ProgressLine("tiles")
    async with open_data(args, store_url(args)) as memory:
        note = await memory.ledger.checkpoint()
        try:
            written = await export_tiles(memory.ledger.store, note, folder, progress)
        finally:
            progress.close()
    size = parse_checkpoint(split_note(note)[0]).size
    print(f"{folder}: the tiles of {size} entries ({written} files written)")
    return OK


def _too_large(where: str, path: str, limit: int) -> VerificationError:
    return VerificationError(
        f"{where}: {path} holds more than the {limit:,} bytes such a file can", step="tiles"
    )


def _url_fetcher(where: str, token: str | None) -> tuple[Fetch, Any]:
    import httpx

    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    client = httpx.Client(base_url=where.rstrip("/") + "/", headers=headers, timeout=60)

    def fetch_url(path: str) -> bytes:
        limit = max_file_size(path)
        try:
            with client.stream("GET", path) as response:
                if response.status_code == 404:
                    raise NotFound(f"{where} has no {path}")
                if response.status_code in (401, 403):
                    raise InvalidRequest(
                        f"{where} refused {path} ({response.status_code}): give an auditor's "
                        "token with --token-file, or ask for a public tlog"
                    )
                if response.status_code != 200:
                    raise StorageError(f"{where}/{path} answered {response.status_code}")
                # Streamed against the bound: an endless body is cut, not held.
                body = bytearray()
                for piece in response.iter_bytes():
                    body += piece
                    if len(body) > limit:
                        raise _too_large(where, path, limit)
                return bytes(body)
        except httpx.HTTPError as exc:
            raise StorageError(f"cannot fetch {path} from {where}: {exc}") from exc

    return fetch_url, client


def _read_file(folder: Path, path: str) -> bytes:
    limit = max_file_size(path)
    try:
        # A link to a device or a pipe is no tile: stat before opening, non-blocking
        # open (a FIFO would wait), and check the opened file again.
        if not stat.S_ISREG(os.stat(folder / path).st_mode):
            raise VerificationError(f"{folder}: {path} is not a regular file", step="tiles")
        fd = os.open(folder / path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise NotFound(f"{folder} has no {path}") from exc
    except OSError as exc:
        raise VerificationError(f"{folder}: cannot read {path}: {exc}", step="tiles") from exc
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise VerificationError(f"{folder}: {path} is not a regular file", step="tiles")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise _too_large(str(folder), path, limit)
    return data


def tiles_fetcher(where: str, token: str | None = None) -> tuple[Fetch, Any]:
    """A fetch over a tiled log at a URL (``http(s)://``) or in a folder, and what to close.

    Each read stops at the most its file can hold (:func:`~memseal.ledger.tiles.max_file_size`)
    and refuses more, naming the file.
    """
    if where.startswith(("http://", "https://")):
        return _url_fetcher(where, token)
    folder = Path(where)
    if not folder.is_dir():
        raise InvalidRequest(f"--tiles {where}: neither an http(s) URL nor a folder")
    return functools.partial(_read_file, folder), None


async def verify_tiles_command(args: argparse.Namespace) -> int:
    """``memseal verify --tiles URL_OR_DIR --trust VKEY [--since CHECKPOINT]``."""
    if args.path is not None or args.checkpoint or args.witness or args.deep:
        print(
            "memseal verify --tiles takes no PATH, --checkpoint, --witness or --deep "
            "(give a kept checkpoint with --since)",
            file=sys.stderr,
        )
        return USAGE
    trusted = [parse_vkey(trust_text(args.trust))]
    since = None if args.since is None else Path(args.since).read_text(encoding="utf-8")
    token = None
    if args.token_file is not None:
        token = Path(args.token_file).read_text(encoding="utf-8").strip()
    fetch, closing = tiles_fetcher(args.tiles, token)
    progress = ProgressLine("verifying")
    workers = min(2, os.cpu_count() or 1)
    # As verify on a folder: the per-entry checks on a pool, the ordered pass beside them.
    pool = ThreadPoolExecutor(workers, thread_name_prefix="memseal-verify")
    try:
        done = await asyncio.to_thread(
            verify_tiles,
            fetch,
            trusted,
            since=since,
            progress=progress,
            executor=pool if workers > 1 else None,
            workers=workers,
        )
    except VerificationError as exc:
        progress.close()
        print(f"FAILED: {exc}", file=sys.stderr)
        return FAILED
    finally:
        pool.shutdown()
        progress.close()
        if closing is not None:
            closing.close()
    print(done.line())
    return OK


def add_verbs(verbs: Any) -> None:
    """Add ``tiles`` to the CLI."""
    tiles = verbs.add_parser(
        "tiles",
        parents=[store_options()],
        help="write or update a folder of C2SP tlog-tiles (checkpoint, hash tiles, entry "
        "bundles) to serve from any static host",
    )
    tiles.add_argument("folder", metavar="DIR", help="the folder to write (created if missing)")
    tiles.set_defaults(run=_tiles)


def add_verify_options(verify: argparse.ArgumentParser) -> None:
    """``verify``'s options for a tiled log."""
    verify.add_argument(
        "--tiles",
        metavar="URL_OR_DIR",
        help="verify a C2SP tlog-tiles log from its files alone (a /tlog URL or a folder "
        "memseal tiles wrote) instead of PATH",
    )
    verify.add_argument(
        "--since",
        metavar="CHECKPOINT",
        help="with --tiles: a checkpoint file kept from before; the log must be consistent with it",
    )
    verify.add_argument(
        "--token-file",
        metavar="FILE",
        help="with --tiles URL: a file holding an auditor's bearer token",
    )
