"""The one door for values from outside: msgspec conversion with errors that name the field."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from memseal.ledger.errors import InvalidRequest

__all__ = ["convert"]

T = TypeVar("T")

_AT = re.compile(r" - at `\$(.*)`$")


def _message(exc: msgspec.ValidationError, field: str) -> str:
    text = str(exc)
    match = _AT.search(text)
    where = field
    if match is not None:
        where = f"{field}{match.group(1)}"
        text = text[: match.start()]
    text = text[:1].lower() + text[1:]
    return f"`{where}`: {text}"


def convert(value: object, kind: type[T], field: str) -> T:
    """``value`` (plain JSON-like objects, or already a ``kind``) as ``kind``; strict types."""
    if isinstance(value, kind):
        return value
    try:
        result: Any = msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(_message(exc, field)) from None
    return result  # type: ignore[no-any-return]
