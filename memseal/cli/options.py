"""The options several verbs share, and the one place the CLI reads the environment.

``--data`` names the data folder (the keys; the ledger too unless a store is
named) and ``--store`` the PostgreSQL store holding the log, whose default is
``$MEMSEAL_STORE``. Each verb that takes them is built with
``parents=[store_options()]`` (or ``data_options()``, for ``--data`` alone), and
reads the chosen store through :func:`store_url`, so every verb resolves it the
same way and names what gave a bad value (``--store`` or ``MEMSEAL_STORE``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
from collections.abc import AsyncIterator
from pathlib import Path

from memseal.ledger.location import parse_database_url
from memseal.memory import STORE_ENV, Memory, open

__all__ = [
    "DEFAULT_DATA",
    "FAILED",
    "OK",
    "USAGE",
    "data_options",
    "named_urls",
    "open_data",
    "store_display",
    "store_options",
    "store_url",
]

#: ``--data`` when not given: a folder of that name in the working directory.
DEFAULT_DATA = "memseal-data"

#: Exit codes (DESIGN.md's CLI table): success, verification failed, usage or I/O.
OK, FAILED, USAGE = 0, 1, 2


@functools.cache
def data_options() -> argparse.ArgumentParser:
    """The parent parser of ``--data`` (for ``parents=``; it adds no ``-h`` of its own)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--data",
        default=DEFAULT_DATA,
        help=f"the data folder: the keys, and the ledger unless a store holds it "
        f"(default ./{DEFAULT_DATA})",
    )
    return parent


@functools.cache
def store_options() -> argparse.ArgumentParser:
    """The parent parser of ``--data`` and ``--store`` (for ``parents=``)."""
    parent = argparse.ArgumentParser(add_help=False, parents=[data_options()])
    parent.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help="postgresql://USER:PASSWORD@HOST:PORT/DB?schema=NAME holds the ledger and the "
        f"memory (default: ${STORE_ENV}, else SQLite in the data folder); the keys stay in "
        "the data folder",
    )
    return parent


def _given(args: argparse.Namespace) -> tuple[str | None, str]:
    """The store text as given (``--store``, else ``$MEMSEAL_STORE``) and what gave it."""
    flag = getattr(args, "store", None)
    if flag:
        return flag, "--store"
    # The only read of the environment in the CLI: every verb comes through here.
    return os.environ.get(STORE_ENV) or None, STORE_ENV


def store_url(args: argparse.Namespace) -> str | None:
    """The store URL the verb works on: ``--store``, else ``$MEMSEAL_STORE``, else None
    (the data folder's SQLite file).

    Raises InvalidRequest, naming ``--store`` or ``MEMSEAL_STORE``, for a value that is
    not a usable PostgreSQL URL.
    """
    url, field = _given(args)
    if url is not None:
        parse_database_url(url, field)
    return url


def store_display(args: argparse.Namespace) -> tuple[str | None, str]:
    """:func:`store_url`, and how to name it to people: the URL without its password,
    or the data folder when there is no store."""
    url, field = _given(args)
    if url is None:
        return None, str(args.data)
    return url, parse_database_url(url, field).display


def named_urls(args: argparse.Namespace) -> list[str]:
    """Every store URL this command was given, whose passwords its messages must hide."""
    named = [_given(args)[0], getattr(args, "path", None), getattr(args, "target", None)]
    return [url for url in named if isinstance(url, str)]


@contextlib.asynccontextmanager
async def open_data(args: argparse.Namespace, store: str | None) -> AsyncIterator[Memory]:
    """The memory of the verb's ``--data`` folder on ``store``, as the ledger's verbs use
    it: never created, no embedder, no timed checkpoints."""
    async with open(
        Path(args.data), store=store, create=False, checkpoint_interval=None, embedder=None
    ) as memory:
        yield memory
