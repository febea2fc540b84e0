"""The engine's command-line verbs (``memseal rebuild``) and a data-folder opener.

:func:`add_engine_verbs` adds the verbs to the ``memseal`` parser;
:func:`open_engine` is ``memseal.open`` reduced to the engine (for the CLI and tests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from memseal.cli.options import OK, USAGE, store_options, store_url
from memseal.cli.progress import ProgressLine
from memseal.engine import Embedder, Engine, Keyring, ProjectionCheck, check_projections
from memseal.ledger.errors import MemsealError
from memseal.ledger.keys import load_keys
from memseal.ledger.store import SqlStore
from memseal.memory import DATABASE, open
from memseal.replay.runs._mentions import check_facet_mentions

__all__ = ["add_engine_verbs", "deep_check", "open_engine"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@contextlib.asynccontextmanager
async def open_engine(
    folder: str | Path,
    *,
    create: bool = False,
    clock: Callable[[], datetime] = _utcnow,
    embedder: Embedder | None = None,
    zone: tzinfo = UTC,
    store: str | None = None,
    currency: bool = True,
) -> AsyncIterator[Engine]:
    """The engine of the data folder at ``folder`` (no embedder unless one is given;
    no timed checkpoints; ``store`` and ``currency`` as for ``memseal.open``); the
    ledger closes on exit."""
    async with open(
        folder,
        store=store,
        create=create,
        clock=clock,
        embedder=embedder,
        zone=zone,
        checkpoint_interval=None,
        currency=currency,
    ) as memory:
        yield memory.engine


async def deep_check(store: SqlStore, folder: Path) -> ProjectionCheck:
    """``verify --deep`` on an open (audit) store: the projections against the log.

    The rebuild needs the folder's instance secret (items' ids and content
    hashes are keyed with it), so the deep check is for whoever holds the data
    folder; it only reads.
    """
    secret = (await asyncio.to_thread(load_keys, folder)).secret
    keyring = Keyring(secret)
    snapshots = store.snapshots(workers=1)
    try:
        check = await check_projections(snapshots, keyring, store.dialect)
    finally:
        await snapshots.close()
    # The keyed facet refs of mentions need the secret too: compared here, not in verify.
    await check_facet_mentions(store, (await store.head()).size, keyring.facet_ref)
    return check


async def _rebuild(args: argparse.Namespace) -> int:
    folder = Path(args.data)
    if not folder.is_dir():
        print(f"memseal rebuild: {folder} is not a memseal data folder", file=sys.stderr)
        return USAGE
    store = store_url(args)
    if store is None and not (folder / DATABASE).is_file():
        print(f"memseal rebuild: {folder} has no ledger database", file=sys.stderr)
        return USAGE
    progress = ProgressLine("rebuilding")
    try:
        # No embedder: rebuild keeps the vector cache as it is; a serving process fills gaps.
        async with open_engine(folder, store=store) as engine:
            report = await engine.rebuild(progress=progress)
            await asyncio.sleep(0)  # let the last progress call (scheduled on the loop) draw
    except MemsealError as exc:
        progress.close()
        print(f"memseal rebuild: {exc}", file=sys.stderr)
        return USAGE
    progress.close()
    verdict = "equal" if report.matches else "DIFFERENT (the projection had drifted; now rebuilt)"
    print(
        f"rebuilt {report.items:,} items from {report.events:,} events "
        f"({report.entries:,} entries) in {report.seconds:.2f} s"
    )
    if report.skipped:
        print(f"skipped {report.skipped:,} engine entries that do not decode")
    print(f"state hash:  {report.state_hash}")
    print(f"incremental: {report.previous_hash} ({verdict})")
    return OK


def add_engine_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rebuild`` to the ``memseal`` verbs (``verbs`` is ``add_subparsers()``'s result)."""
    rebuild = verbs.add_parser(
        "rebuild",
        parents=[store_options()],
        help="drop and rebuild the memory projections from the log",
    )
    rebuild.set_defaults(run=_rebuild)
