"""Pages of a read: the page-size limits and the opaque cursor to the next page.

A cursor is the JSON of a :class:`Cursor`, base64url without padding. It
names the request it belongs to (its ``query`` field), so it cannot be
passed to another question.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final, Literal

import msgspec

from memseal.ledger.errors import InvalidRequest

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Cursor",
    "check_limit",
    "decode_cursor",
    "encode_cursor",
]

DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
_CURSOR = re.compile(r"[A-Za-z0-9_-]{1,400}")


def check_limit(value: object, field: str = "limit", high: int = MAX_LIMIT) -> int:
    """``value`` if it is an integer from 1 to ``high``, else :class:`InvalidRequest`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidRequest(f"`{field}` must be an integer from 1 to {high}, not {value!r}")
    return value


Operation = Literal["list", "fetch"]


class Cursor(msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """Where the next page starts.

    ``list``: ``seq`` is the last item shown; the next page is older (lower
    seqs), so items stored meanwhile never shift it. ``fetch``: ``seq`` is
    the newest item the first page could see (later ones stay out) and
    ``offset`` how many ranked hits were shown. ``query`` is the request's keyed
    ref (``Keyring.query_ref``), so a cursor cannot be replayed against another
    question, nor confirm a guessed one.
    """

    v: Literal[1]
    op: Operation
    query: str
    seq: int
    offset: int = 0


_cursor_decoder = msgspec.json.Decoder(Cursor)
_encoder = msgspec.json.Encoder(order="deterministic")


def encode_cursor(cursor: Cursor) -> str:
    """The opaque text of ``cursor`` (base64url of its JSON, unpadded)."""
    return base64.urlsafe_b64encode(_encoder.encode(cursor)).rstrip(b"=").decode()


def decode_cursor(value: object, op: Operation, query: str, field: str = "cursor") -> Cursor:
    """The cursor ``value`` encodes, checked to belong to ``op`` and ``query``;
    :class:`InvalidRequest` naming ``field`` otherwise."""
    if not isinstance(value, str) or not _CURSOR.fullmatch(value):
        raise InvalidRequest(f"`{field}` is malformed; pass back a next_cursor unchanged")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        cursor = _cursor_decoder.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise InvalidRequest(f"`{field}` is malformed; pass back a next_cursor unchanged") from None
    # A seq or offset past SQLite's and PostgreSQL's 64-bit integers would fail in the
    # driver (OverflowError), not here: no cursor this engine made holds one.
    if not 0 <= cursor.seq < 2**63 or not 0 <= cursor.offset < 2**63:
        raise InvalidRequest(f"`{field}` is malformed; pass back a next_cursor unchanged")
    if cursor.op != op or cursor.query != query:
        raise InvalidRequest(f"`{field}` belongs to another request; start without a cursor")
    return cursor
