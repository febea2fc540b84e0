"""``memseal migrate --from DIR --to postgresql://...``: a SQLite ledger moved to PostgreSQL.

The verb first marks the folder's ledger as moved (its writers refuse from
then on), then copies it (:mod:`memseal.cli.pgcopy` says what is copied and
why), then opens the target with the folder's keys (finding no projection,
the engine rebuilds it), compares its size, Merkle root and state hash with
the source's at the copied head, and verifies the whole target from the
ledger's first key, as ``memseal verify`` does. A migration that does not
finish gives the folder's file back to its writers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import sqlite3
import sys
import time
from pathlib import Path
from typing import Final

from memseal.cli.options import FAILED, OK, USAGE
from memseal.cli.pgcopy import Copied, Progress, check_target, migrate
from memseal.cli.progress import ProgressLine
from memseal.ledger.errors import MemsealError, VerificationError
from memseal.ledger.folder import DATABASE
from memseal.ledger.location import DatabaseUrl, hide_password, parse_database_url
from memseal.ledger.opening import Location, read_location, write_location
from memseal.ledger.store import WriteTxn
from memseal.memory import FOLDER_STORE, Memory, open, open_audit

__all__ = ["add_verbs"]

_LABELS: Final = {
    "tree": "tree hashes",
    "meta": "meta rows",
    "runs": "runs",
    "engine_vectors": "cached vectors",
}


def _verdict(same: bool) -> str:
    return "equal" if same else "DIFFERENT"


async def _compare(source: Memory, target: Memory, copied: Copied) -> bool:
    """Size, Merkle root and state hash of the target against the source's; prints each."""
    size = copied.size
    now = await source.ledger.size()
    there = await target.ledger.size()
    grown = now > size
    if grown:
        # A server kept appending to the folder: compare at the head the copy read.
        print(f"source: grew to {now:,} entries since the copy began; compared at {size:,}")
    print(f"size:       {there:,} entries ({_verdict(there == size)})")
    root = await target.ledger.root()
    expected_root = await source.ledger.root(size)
    print(f"root:       {root.hex()} ({_verdict(root == expected_root)})")
    state = await target.engine.state_hash()
    expected_state = copied.state_hash if grown else await source.engine.state_hash()
    print(f"state hash: {state} ({_verdict(state == expected_state)})")
    return there == size and root == expected_root and state == expected_state


async def _open_quietly(folder: Path, url: str | None, progress: Progress | None = None) -> Memory:
    # No embedder (the vectors were copied; none is made here), no timed checkpoints.
    return await open(
        folder,
        store=url,
        create=False,
        embedder=None,
        checkpoint_interval=None,
        progress=progress,
    )


def _mark_moved(display: str, txn: WriteTxn) -> None:
    """In the source's own write transaction: its writers refuse from now on (see
    ``LogTxn.adopt_current_key``); the copy's snapshot, taken after, is the final log."""
    txn.execute(
        "INSERT INTO meta (key, value) VALUES ('moved_to', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (display,),
    )


def _unmark_moved(db: Path) -> None:
    """A migration that did not finish gives the file back to its writers."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn, conn:
        conn.execute("DELETE FROM meta WHERE key = 'moved_to'")


def _stay_home(folder: Path) -> None:
    """A failed migration leaves the folder's ledger where it was (see memory.LOCATION)."""
    said = read_location(folder)
    genesis = None if said is None else said.genesis
    write_location(folder, Location(store="sqlite", genesis=genesis))


async def _migrate(args: argparse.Namespace) -> int:
    url: str = args.target
    try:
        return await _run(Path(args.source), url)
    except (MemsealError, OSError) as exc:
        print(f"memseal migrate: {hide_password(str(exc), url).rstrip()}", file=sys.stderr)
        return USAGE


async def _run(folder: Path, url: str) -> int:
    where = parse_database_url(url, "--to")
    if not folder.is_dir():
        print(f"memseal migrate: {folder} is not a memseal data folder", file=sys.stderr)
        return USAGE
    if not (folder / DATABASE).is_file():
        print(f"memseal migrate: {folder} has no ledger database", file=sys.stderr)
        return USAGE
    # A bad server, bad credentials or a filled target are refused before anything opens.
    await asyncio.to_thread(check_target, where)
    # The source is opened first, so a scrub or rebuild it had pending is done before the copy.
    # Named explicitly: whatever MEMSEAL_STORE says (it may name the target itself, and the
    # comparison would compare it with itself), the source is the folder's own file.
    source = await _open_quietly(folder, FOLDER_STORE)
    try:
        # From here no process appends to the folder's file: each refuses, naming the store.
        await source.ledger.store.run(functools.partial(_mark_moved, where.display))
    except BaseException:
        await source.close()
        raise
    done = False
    try:
        code = await _copy_and_check(folder, url, where, source)
        done = code == OK
        return code
    finally:
        if not done:
            await asyncio.to_thread(_unmark_moved, folder / DATABASE)
            _stay_home(folder)


async def _copy_and_check(folder: Path, url: str, where: DatabaseUrl, source: Memory) -> int:
    try:
        print(f"from: {source.location}")
        print(f"to:   {where.display}")
        progress = ProgressLine("copying")
        started = time.perf_counter()
        try:
            copied = await migrate(folder, url, progress)
        finally:
            progress.close()
        listed = ", ".join(f"{n:,} {_LABELS.get(table, table)}" for table, n in copied.rows.items())
        print(f"copied: {listed} ({time.perf_counter() - started:.2f} s)")
        started = time.perf_counter()
        # Opening the target finds no projection and rebuilds it from the copied log.
        rebuilding = ProgressLine("rebuilding")
        try:
            opened = await _open_quietly(folder, url, rebuilding)
            await asyncio.sleep(0)  # the last progress call (scheduled on the loop) draws
        finally:
            rebuilding.close()
        async with opened as target:
            rows = await target.ledger.store.rows("SELECT count(*) FROM engine_items")
            print(
                f"rebuilt: {int(rows[0][0]):,} items from {copied.size:,} entries "
                f"({time.perf_counter() - started:.2f} s)"
            )
            agree = await _compare(source, target, copied)
        trust = source.trust_root
    finally:
        await source.close()
    if not agree:
        print(
            "memseal migrate: FAILED: the copy disagrees with the source (committed; "
            "drop the target schema before trying again)",
            file=sys.stderr,
        )
        return FAILED
    progress = ProgressLine("verifying")
    async with open_audit(url) as ledger:
        try:
            summary = await ledger.verify(trust, progress=progress)
        except VerificationError as exc:
            progress.close()
            print(f"memseal migrate: FAILED: {exc}", file=sys.stderr)
            return FAILED
    progress.close()
    print(f"verified: {summary.line()}")
    return OK


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``migrate`` to the ``memseal`` verbs (``verbs`` is ``add_subparsers()``'s result)."""
    migrate_verb = verbs.add_parser(
        "migrate", help="copy a data folder's ledger to an empty PostgreSQL store"
    )
    migrate_verb.add_argument(
        "--from", dest="source", required=True, metavar="DIR", help="the data folder (SQLite)"
    )
    migrate_verb.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="URL",
        help="postgresql://user:password@host:port/db?schema=NAME (an empty schema)",
    )
    migrate_verb.set_defaults(run=_migrate)
