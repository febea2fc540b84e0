"""The engine's command-line verbs (``memseal rebuild``) and a data-folder opener.

:func:`add_engine_verbs` adds the verbs to the ``memseal`` parser;
:func:`open_engine` opens a data folder's ledger and engine together (the
CLI uses it, and so do tests, until ``memseal.open`` carries the engine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from memseal._progress import ProgressLine
from memseal.engine import Embedder, Engine
from memseal.ledger.errors import MemsealError
from memseal.ledger.keys import key_history
from memseal.ledger.ledger import Ledger
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.transparency import CheckpointPolicy
from memseal.memory import DATABASE, _finish_rotation, _fix_origin, _prepare

__all__ = ["add_engine_verbs", "open_engine"]

OK, USAGE = 0, 2
DEFAULT_DATA = "memseal-data"


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
) -> AsyncIterator[Engine]:
    """The engine of the data folder at ``folder`` (its store closed on exit)."""
    path = Path(folder)
    keys = await asyncio.to_thread(_prepare, path, None, create)
    store = SqliteLogStore(path / DATABASE, keys.signer, clock=clock)
    Engine.register_schema(store)
    await store.open()
    try:
        # What memseal.open does for the ledger (key rotation, checkpoint origin), with the
        # engine's tables registered before the store opened.
        keys = await _finish_rotation(path, store, keys)
        origin = await _fix_origin(store, keys.signer.name)
        history = await asyncio.to_thread(key_history, path)
    except BaseException:
        await store.close()
        raise
    ledger = Ledger(store, history[0], CheckpointPolicy(origin=origin, every=None, interval=None))
    try:
        engine = await Engine.open(
            ledger, store, keys.secret, clock=clock, embedder=embedder, zone=zone
        )
        try:
            yield engine
        finally:
            await engine.close()
    finally:
        await ledger.close()


async def _rebuild(args: argparse.Namespace) -> int:
    folder = Path(args.data)
    if not folder.is_dir():
        print(f"memseal rebuild: {folder} is not a memseal data folder", file=sys.stderr)
        return USAGE
    if not (folder / DATABASE).is_file():
        print(f"memseal rebuild: {folder} has no ledger database", file=sys.stderr)
        return USAGE
    progress = ProgressLine("rebuilding")
    try:
        # No embedder: rebuild keeps the vector cache as it is; a serving process fills gaps.
        async with open_engine(folder) as engine:
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
        "rebuild", help="drop and rebuild the memory projections from the log"
    )
    rebuild.add_argument("--data", default=DEFAULT_DATA, help="the data folder")
    rebuild.set_defaults(run=_rebuild)
