"""What every read shares: the scope condition, limits, ids and opaque cursors.

Every query is confined the same way before anything is ranked: the reach
(namespaces), the trust floor (rejected never passes) and the filter all
become one SQL condition on ``engine_items AS i``, which the ranking query
then runs under.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from memseal.ledger.errors import InvalidRequest

from .filters import EQUALITY_FACETS, Filter
from .namespaces import Reach, reach_sql
from .trust import Trust, trust_rank

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_IDS",
    "MAX_LIMIT",
    "Cursor",
    "check_ids",
    "check_limit",
    "decode_cursor",
    "encode_cursor",
    "scope_sql",
]

DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
MAX_IDS: Final = 200
_ID = re.compile(r"[\x21-\x7e]{1,128}")
_CURSOR = re.compile(r"[A-Za-z0-9_-]{1,400}")


def check_limit(value: object, field: str = "limit", high: int = MAX_LIMIT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidRequest(f"`{field}` must be an integer from 1 to {high}, not {value!r}")
    return value


def check_ids(value: object, field: str = "ids") -> list[str]:
    """1 to 200 ids, duplicates dropped (first kept); each printable ASCII, at most 128."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidRequest(f"`{field}` must be a list of item ids")
    if not 1 <= len(value) <= MAX_IDS:
        raise InvalidRequest(f"`{field}` must list 1 to {MAX_IDS} ids, not {len(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not _ID.fullmatch(item):
            raise InvalidRequest(f"`{field}[{i}]` is not an item id")
    return list(dict.fromkeys(value))


def scope_sql(
    reach: Reach | None, min_trust: Trust | None, filter: Filter
) -> tuple[str, list[Any]]:
    """The condition on ``engine_items AS i`` for reach, trust floor and filter.

    ``min_trust`` None is for forget alone, which acts whatever the trust.
    """
    clauses: list[str] = []
    params: list[Any] = []
    where, args = reach_sql(reach, "i.namespace")
    clauses.append(where)
    params.extend(args)
    if min_trust is not None:
        # max(...,1): rejected (rank 0) is never returned, whatever a caller passes in.
        clauses.append("i.trust_rank >= ?")
        params.append(max(trust_rank(min_trust), 1))
    if filter.kinds is not None:
        clauses.append(f"i.kind IN ({','.join('?' * len(filter.kinds))})")
        params.extend(filter.kinds)

    def facet(name: str, values: Sequence[str]) -> None:
        clauses.append(
            "EXISTS (SELECT 1 FROM engine_facets f WHERE f.seq = i.seq AND f.facet = ? "
            f"AND f.value IN ({','.join('?' * len(values))}))"
        )
        params.append(name)
        params.extend(values)

    if filter.sources is not None:
        facet("source", filter.sources)
    if filter.tags_any is not None:
        facet("tag", filter.tags_any)
    for field, name in EQUALITY_FACETS:
        value = getattr(filter, field)
        if value is not None:
            facet(name, [value])
    if filter.observed_after is not None:
        clauses.append("i.observed_at >= ?")
        params.append(filter.observed_after)
    if filter.observed_before is not None:
        clauses.append("i.observed_at < ?")
        params.append(filter.observed_before)
    return " AND ".join(clauses), params


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
    return base64.urlsafe_b64encode(_encoder.encode(cursor)).rstrip(b"=").decode()


def decode_cursor(value: object, op: Operation, query: str, field: str = "cursor") -> Cursor:
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
