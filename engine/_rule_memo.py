"""What the currency rule read of a text, kept for the next read: its cost, not its result.

A read weighs its first 32 candidates' words and sentences (:mod:`.currency`), and
marks each hit with what its text is about; an agent's reads meet the same memories
again and again, and reading them afresh each time was most of what the rule cost.
Each value here is a pure function of one text (or one window, below), so a kept
value is the value the read would compute: the rule's results do not depend on what
is kept.

Values are keyed by what a row already carries, the item's keyed content hash and
its text's length (the hash covers title and text together; with the length, one
key is one text), never by the text. The table is bounded, shared by the engines of
a process (equal keys mean equal texts, whoever asks), and emptied whenever a forget
in this process commits, so nothing read from a forgotten text stays here past its
forget (another process's forget leaves at most :data:`BOUND` entries to age out).
A read that began before such a forget (:func:`epoch`, taken before its snapshot
opens) keeps nothing it reads (:func:`reading_since`): it may have read the
forgotten text, and would put it back after the forget emptied the table.
What the rule made of a whole window (:func:`kept_window`) is kept here too, under
the identities of the candidates it was made from (objects this memo keeps, held by
the entry), so a question asked again weighs none of its window afresh.

The bound ages values out in two generations: what is kept or used goes into the
young one; once that holds half the bound it becomes the old one and the old one is
dropped, so what was not used since goes first. A read's lookups are then one plain
dict's, whose cost is most of what a read asks of the table (an ordered dict that
moves every entry it finds, as a strict least-recently-used order needs, cost a
read a few times more among its other work, caches cold).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Final, TypeVar

__all__ = [
    "BOUND",
    "count",
    "epoch",
    "forget_all",
    "forget_windows",
    "held",
    "hold",
    "kept",
    "kept_many",
    "kept_window",
    "reading_since",
]

#: The most texts whose readings are kept.
BOUND: Final = 4_096
#: The entries of the young generation that turn it into the old one.
_TURN: Final = BOUND // 2

_T = TypeVar("_T")
#: Not kept (a kept value may be None).
_MISSING: Final = object()
# Per slot, key -> value: the young generation and the old one, and the young's size.
_young: dict[str, dict[Hashable, object]] = {}
_old: dict[str, dict[Hashable, object]] = {}
_size = 0
# Reads rank in several reader threads at once.
_lock = threading.Lock()
# How many forgets emptied the memo, and the count a reading thread's read began at.
_forgets = 0
_reading = threading.local()


def _find(slot: str, key: Hashable) -> object:
    """The value kept for ``(slot, key)`` (found in the old generation: made young
    again), else :data:`_MISSING`; under the lock."""
    young = _young.get(slot)
    if young is not None:
        value = young.get(key, _MISSING)
        if value is not _MISSING:
            return value
    old = _old.get(slot)
    if old is None:
        return _MISSING
    value = old.pop(key, _MISSING)
    if value is not _MISSING:
        _put(slot, key, value)
    return value


def _found(slot: str, keys: Sequence[str | None]) -> list[Any]:
    """:func:`_find` of each key (None: :data:`_MISSING`); under the lock."""
    # Most are young: one plain lookup each, the rest looked for in the old generation.
    found: list[Any] = [_MISSING] * len(keys)
    young = _young.get(slot)
    if young is not None:
        found = [_MISSING if key is None else young.get(key, _MISSING) for key in keys]
    for i, value in enumerate(found):
        key = keys[i]
        if value is _MISSING and key is not None:
            found[i] = _find(slot, key)
    return found


def _put(slot: str, key: Hashable, value: object) -> None:
    """Keep ``value`` for ``(slot, key)`` in the young generation; under the lock."""
    global _old, _young, _size
    began = getattr(_reading, "since", None)
    if began is not None and began != _forgets:
        return  # this thread's read began before a forget: it may hold the forgotten
    young = _young.get(slot)
    if young is None:
        young = _young[slot] = {}
    if key not in young:
        _size += 1
    young[key] = value
    if _size >= _TURN:
        _old, _young, _size = _young, {}, 0


def kept(slot: str, key: str | None, read: Callable[[], _T]) -> _T:
    """``read()``, or what it gave before for ``(slot, key)``; ``key`` None: ``read()``."""
    if key is None:
        return read()
    with _lock:
        value = _find(slot, key)
    if value is not _MISSING:
        return value  # type: ignore[return-value]  # slot fixes the type
    fresh = read()
    with _lock:
        _put(slot, key, fresh)
    return fresh


def kept_many(slot: str, keys: Sequence[str | None], read: Callable[[int], _T]) -> list[_T]:
    """:func:`kept` for several keys at once: ``read(i)`` gives the ``i``-th's value."""
    with _lock:
        values = _found(slot, keys)
    missing = [i for i, value in enumerate(values) if value is _MISSING]
    if missing:
        for i in missing:
            values[i] = read(i)
        with _lock:
            for i in missing:
                key = keys[i]
                if key is not None:
                    _put(slot, key, values[i])
    return values


def held(slot: str, keys: Sequence[str]) -> list[Any]:
    """What :func:`hold` kept for each of ``keys`` (None where nothing is)."""
    with _lock:
        found = _found(slot, keys)
    return [None if value is _MISSING else value for value in found]


def hold(slot: str, values: Sequence[tuple[str, object]]) -> None:
    """Keep each ``(key, value)`` (never None) for :func:`held`."""
    with _lock:
        for key, value in values:
            _put(slot, key, value)


def kept_window(rule: Hashable, objects: Sequence[object], read: Callable[[], _T]) -> _T:
    """``read()``, or what it gave before for ``rule`` over these very objects
    (``objects``, in order): what the rule made of a read's window, for the next read whose
    window holds the same candidates (the ones this memo keeps) in the same order.

    Keyed by the objects' identities, which stay theirs while the entry lives: the
    entry holds them. Hashing what they hold (32 texts and vectors) cost a read more
    than most of what it saves."""
    key = (rule, *map(id, objects))
    with _lock:
        found = _find("window", key)
    if found is not _MISSING:
        return found[1]  # type: ignore[index,no-any-return]  # the slot fixes the type
    fresh = read()
    with _lock:
        _put("window", key, (tuple(objects), fresh))
    return fresh


def count() -> int:
    """How many readings are kept now."""
    with _lock:
        return sum(len(table) for table in _young.values()) + sum(
            len(table) for table in _old.values()
        )


def forget_all() -> None:
    """Drop every kept reading (a forget committed)."""
    global _old, _young, _size, _forgets
    with _lock:
        _young, _old, _size = {}, {}, 0
        _forgets += 1


def epoch() -> int:
    """How many times the memo was emptied: taken by a read before its snapshot opens."""
    return _forgets


@contextlib.contextmanager
def reading_since(began: int) -> Iterator[None]:
    """In this thread, keep nothing unless no forget emptied the memo since ``began``
    (:func:`epoch` when the read began)."""
    _reading.since = began
    try:
        yield
    finally:
        _reading.since = None


def forget_windows() -> None:
    """Drop what the rule made of whole windows, keeping each text's reading: the next
    read weighs its window as a question never asked before would."""
    global _size
    with _lock:
        _size -= len(_young.pop("window", {}))
        _old.pop("window", None)
