"""Canonical JSON: the one encoding memseal hashes and signs.

Everything that reaches the ledger from outside (a body, a payload) goes
through :func:`canonical_json` exactly once, before the writer. The result
is msgspec's JSON with object keys sorted, and it is those bytes that are
stored, hashed and signed; nothing is ever verified by re-encoding a
decoded object.

Only plain JSON values pass. The walk refuses, naming the field, what JSON
would silently change or cannot carry: non-finite floats (msgspec would
write ``null``), integers beyond 64 bits, text that is not valid UTF-8 (lone
surrogates), non-text keys, bytes, and structures nested deeper than
:data:`MAX_DEPTH`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .errors import InvalidRequest

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "MAX_PAYLOAD_BYTES",
    "canonical_json",
    "check_json_value",
]

MAX_DEPTH = 32
MAX_BODY_BYTES = 64 * 1024
MAX_PAYLOAD_BYTES = 1024 * 1024

_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1

_encoder = msgspec.json.Encoder(order="deterministic")


def check_json_value(value: object, field: str, depth: int = 0) -> None:
    """Raise :class:`InvalidRequest` naming the first part of ``value`` JSON cannot carry."""
    if depth > MAX_DEPTH:
        raise InvalidRequest(f"`{field}` is nested deeper than {MAX_DEPTH} levels")
    # Exact types first: the abstract-class checks below cost far more, and almost
    # every value is one of these.
    kind = type(value)
    if kind is str:
        _check_text(value, field)  # type: ignore[arg-type]
        return
    if value is None or kind is bool:
        return
    if kind is int:
        _check_int(value, field)  # type: ignore[arg-type]
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise InvalidRequest(f"`{field}` is {value}, which JSON cannot carry")
        return
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise InvalidRequest(f"`{field}` has a key of type {type(key).__name__}, not text")
            _check_text(key, f"{field} key")
            check_json_value(item, f"{field}.{key}", depth + 1)
        return
    if kind is list or kind is tuple:
        for index, item in enumerate(value):  # type: ignore[arg-type]
            check_json_value(item, f"{field}[{index}]", depth + 1)
        return
    _check_other(value, field, depth)


def _check_int(value: int, field: str) -> None:
    if not _INT_MIN <= value <= _INT_MAX:
        # No value in the message: Python refuses to print integers of 4,300+ digits.
        raise InvalidRequest(
            f"`{field}` integer of {value.bit_length()} bits does not fit in 64 bits"
        )


def _check_other(value: object, field: str, depth: int) -> None:
    # Subclasses and other containers: the slow, general checks.
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        _check_int(value, field)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequest(f"`{field}` is {value}, which JSON cannot carry")
        return
    if isinstance(value, str):
        _check_text(value, field)
        return
    if isinstance(value, bytes | bytearray | memoryview):
        raise InvalidRequest(f"`{field}` is bytes; pass text (str) instead")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidRequest(f"`{field}` has a key of type {type(key).__name__}, not text")
            _check_text(key, f"{field} key")
            check_json_value(item, f"{field}.{key}", depth + 1)
        return
    if isinstance(value, Sequence):
        for index, item in enumerate(value):
            check_json_value(item, f"{field}[{index}]", depth + 1)
        return
    raise InvalidRequest(f"`{field}` is a {type(value).__name__}, which is not a JSON value")


def _check_text(text: str, field: str) -> None:
    if text.isascii():  # no surrogates possible; the common case costs no copy
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRequest(f"`{field}` is not valid UTF-8 text ({exc.reason})") from exc


def canonical_json(value: Any, *, field: str, limit: int, checked: bool = False) -> bytes:
    """Check ``value`` and encode it canonically; refuse encodings over ``limit`` bytes.

    ``checked=True`` skips the walk for values that are already plain JSON by
    construction (the output of a msgspec JSON decode): the walk is most of the cost.
    """
    if not checked:
        check_json_value(value, field)
    try:
        data = _encoder.encode(value)
    except (TypeError, ValueError, OverflowError) as exc:  # pragma: no cover - the walk
        raise InvalidRequest(f"`{field}` cannot be encoded: {exc}") from exc
    if len(data) > limit:
        raise InvalidRequest(f"`{field}` is {len(data)} bytes encoded; the limit is {limit}")
    return data
