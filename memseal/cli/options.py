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

from memseal.ledger.choice import STORE_ENV, StoreChoice, choose_store, given_store
from memseal.memory import Memory, open

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


def _choice(args: argparse.Namespace) -> StoreChoice:
    """The store the verb works on: ``--store``, else ``$MEMSEAL_STORE``, else the
    ``--data`` folder's SQLite file (one chooser for the library and every verb)."""
    # The only read of the environment in the CLI: every verb comes through here.
    folder = Path(getattr(args, "data", DEFAULT_DATA))
    flag = getattr(args, "store", None) or None
    return choose_store(folder, flag, env=os.environ, field="--store", folder_word=None)


def store_url(args: argparse.Namespace) -> str | None:
    """The store URL the verb works on: ``--store``, else ``$MEMSEAL_STORE``, else None
    (the data folder's SQLite file).

    Raises InvalidRequest, naming ``--store`` or ``MEMSEAL_STORE``, for a value that is
    not a usable PostgreSQL URL.
    """
    return _choice(args).text


def store_display(args: argparse.Namespace) -> tuple[str | None, str]:
    """:func:`store_url`, and how to name it to people: the URL without its password,
    or the data folder when there is no store."""
    choice = _choice(args)
    if choice.url is None:
        return None, str(args.data)
    return choice.text, choice.url.display


def named_urls(args: argparse.Namespace) -> list[str]:
    """Every store URL this command was given, whose passwords its messages must hide."""
    flag = getattr(args, "store", None) or None
    given = given_store(flag, os.environ, field="--store")[0]
    named = [given, getattr(args, "path", None), getattr(args, "target", None)]
    return [url for url in named if isinstance(url, str)]


@contextlib.asynccontextmanager
async def open_data(args: argparse.Namespace, store: str | None) -> AsyncIterator[Memory]:
    """The memory of the verb's ``--data`` folder on ``store``, as the ledger's verbs use
    it: never created, no embedder, no timed checkpoints."""
    async with open(
        Path(args.data), store=store, create=False, checkpoint_interval=None, embedder=None
    ) as memory:
        yield memory
