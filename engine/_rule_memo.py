"""What the currency rule read of a text, kept for the next read: its cost, not its result.

A read weighs its first 32 candidates' words and sentences (:mod:`.currency`), and
marks each hit with what its text is about; an agent's reads meet the same memories
again and again, and reading them afresh each time was most of what the rule cost.
Each value here is a pure function of one text, so a kept value is the value the
read would compute: the rule's results do not depend on what is kept.

Values are keyed by what a row already carries, the item's keyed content hash and
its text's length (the hash covers title and text together; with the length, one
key is one text), never by the text. The table is bounded (least recently used goes
first), shared by the engines of a process (equal keys mean equal texts, whoever
asks), and emptied whenever a forget in this process commits, so nothing read from a
forgotten text stays here past its forget (another process's forget leaves at most
:data:`BOUND` entries to age out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

__all__ = ["BOUND", "count", "forget_all", "held", "hold", "kept", "kept_many"]

#: The most texts whose readings are kept.
BOUND: Final = 4_096

_T = TypeVar("_T")
#: Not kept (a kept value may be None).
_MISSING: Final = object()
_table: OrderedDict[tuple[str, str], object] = OrderedDict()
# Reads rank in several reader threads at once.
_lock = threading.Lock()


def kept(slot: str, key: str | None, read: Callable[[], _T]) -> _T:
    """``read()``, or what it gave before for ``(slot, key)``; ``key`` None: ``read()``."""
    if key is None:
        return read()
    entry = (slot, key)
    with _lock:
        if entry in _table:
            _table.move_to_end(entry)
            return _table[entry]  # type: ignore[return-value]  # slot fixes the type
    value = read()
    with _lock:
        _table[entry] = value
        while len(_table) > BOUND:
            _table.popitem(last=False)
    return value


def kept_many(slot: str, keys: Sequence[str | None], read: Callable[[int], _T]) -> list[_T]:
    """:func:`kept` for several keys at once: ``read(i)`` gives the ``i``-th's value."""
    values: list[Any] = []
    missing: list[int] = []
    with _lock:
        for i, key in enumerate(keys):
            value = _MISSING if key is None else _table.get((slot, key), _MISSING)
            if value is _MISSING:
                missing.append(i)
            elif key is not None:
                _table.move_to_end((slot, key))
            values.append(value)
    if missing:
        for i in missing:
            values[i] = read(i)
        with _lock:
            for i in missing:
                key = keys[i]
                if key is not None:
                    _table[slot, key] = values[i]
            while len(_table) > BOUND:
                _table.popitem(last=False)
    return values


def held(slot: str, keys: Sequence[str]) -> list[Any]:
    """What :func:`hold` kept for each of ``keys`` (None where nothing is)."""
    found: list[Any] = []
    with _lock:
        for key in keys:
            entry = (slot, key)
            if entry in _table:
                _table.move_to_end(entry)
                found.append(_table[entry])
            else:
                found.append(None)
    return found


def hold(slot: str, values: Sequence[tuple[str, object]]) -> None:
    """Keep each ``(key, value)`` (never None) for :func:`held`."""
    with _lock:
        for key, value in values:
            _table[slot, key] = value
        while len(_table) > BOUND:
            _table.popitem(last=False)


def count() -> int:
    """How many readings are kept now."""
    with _lock:
        return len(_table)


def forget_all() -> None:
    """Drop every kept reading (a forget committed)."""
    with _lock:
        _table.clear()
