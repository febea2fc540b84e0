"""Choosing a ledger's store: what the caller named, then the environment, decided once.

``memseal.open``, ``open_audit``, ``open_sync``, the service and every CLI verb
ask :func:`choose_store`, so they agree on the precedence and on the wording of
each refusal:

1. a PostgreSQL URL as ``path`` names the store itself; its keys live in the
   folder ``MEMSEAL_DATA`` names (an audit needs no keys, and no folder);
2. else the ``store`` the caller gave (``store=`` or ``--store``): a URL, or
   :data:`FOLDER_STORE`, the folder's own SQLite file whatever the environment says;
3. else ``MEMSEAL_STORE``;
4. else the data folder's SQLite file.

The environment comes in as a mapping: the edge hands over ``os.environ``, and
this layer never reads the process's own (tests/unit/ledger/test_opening.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal

import msgspec

from .errors import InvalidRequest
from .location import DatabaseUrl, is_database_url, parse_database_url
from .opening import LogLocation, choose_location

__all__ = [
    "DATA_ENV",
    "FOLDER_STORE",
    "STORE_ENV",
    "StoreChoice",
    "choose_store",
    "given_store",
]

#: The environment variable naming the store when none is given.
STORE_ENV: Final = "MEMSEAL_STORE"
#: The data folder (keys) for a URL given as ``path``, which names only the database.
DATA_ENV: Final = "MEMSEAL_DATA"
#: ``store=`` naming the data folder's own SQLite file, whatever ``MEMSEAL_STORE`` says.
FOLDER_STORE: Final = "sqlite"


class StoreChoice(msgspec.Struct, frozen=True, kw_only=True):
    """Where a ledger lives, as :func:`choose_store` decided it."""

    folder: Path
    """The data folder: the keys, and the SQLite file unless ``url`` is given (``.`` for
    an audit of a URL, which reads no keys)."""
    url: DatabaseUrl | None = None
    """The PostgreSQL store holding the log; None: the folder's SQLite file."""
    source: str | None = None
    """What named the store, as messages call it (``store``, ``--store``, ``path``,
    ``MEMSEAL_STORE``); None: nothing did, so the folder's file."""
    text: str | None = None
    """The URL as given, password and all, to hand on to ``memseal.open``; None for SQLite."""

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]:
        """Which store holds the log."""
        return "sqlite" if self.url is None else "postgresql"

    @property
    def location(self) -> LogLocation:
        """The choice as the opening code takes it."""
        return LogLocation(folder=self.folder, url=self.url)

    @property
    def display(self) -> str:
        """Where the log lives, fit to print (a URL's password hidden)."""
        return self.location.display


def given_store(
    store: object, env: Mapping[str, str], *, field: str = "store"
) -> tuple[object, str | None]:
    """The store as given (``store``, else ``MEMSEAL_STORE``; empty counts as unset) and
    the name of what gave it, unchecked: for hiding a password in any message."""
    if store is not None:
        return store, field
    from_env = env.get(STORE_ENV, "")
    return (from_env, STORE_ENV) if from_env else (None, None)


def choose_store(
    path: str | Path,
    store: object = None,
    *,
    env: Mapping[str, str],
    field: str = "store",
    folder_word: str | None = FOLDER_STORE,
    keys: bool = True,
) -> StoreChoice:
    """The store ``path`` (a data folder or a PostgreSQL URL), ``store`` and ``env`` name.

    ``field`` is how errors name ``store`` (``--store`` on the command line);
    ``folder_word`` is the ``store`` text meaning the folder's own file (None: no
    text does, as on the command line). ``keys=False`` is an audit: a URL as
    ``path`` is then the whole location, and ``MEMSEAL_DATA`` is not asked for.
    """
    if not keys and is_database_url(path):
        if store is not None:
            raise InvalidRequest("give the PostgreSQL URL once: as `path` or as `store`")
        url = parse_database_url(str(path), "path")
        return StoreChoice(folder=Path("."), url=url, source="path", text=str(path))
    source: str | None = field if store is not None else None
    if folder_word is not None and store == folder_word:
        store = None  # the migrate's source: the folder's file, whatever the variable says
    elif store is None and not is_database_url(path):
        store, source = given_store(None, env)
        if store is not None and not is_database_url(store):
            raise InvalidRequest(f"`{STORE_ENV}` must be a postgresql:// URL (or unset)")
    where = choose_location(
        path,
        store,
        data=env.get(DATA_ENV, ""),
        store_field=source or field,
        data_hint=f"set {DATA_ENV} to the folder",
    )
    if is_database_url(path):
        return StoreChoice(folder=where.folder, url=where.url, source="path", text=str(path))
    text = store if isinstance(store, str) else None
    return StoreChoice(folder=where.folder, url=where.url, source=source, text=text)
