"""``explore``: how the items in scope spread over one facet.

The thirteen facets are the seed's: kind, source, source_id, workspace,
folder, file_path, language, repo, url, thread, agent, tool_call and tag.
There is deliberately no namespace facet: a model never learns which
namespaces exist.

An :class:`Exploration` lists the ``limit`` most common values (count
descending, then value ascending), ``total`` items counted, ``missing``
how many of them have no value for the facet, ``more_buckets`` whether
further values exist beyond those shown, and ``truncated`` whether the
count stopped at :data:`EXPLORE_CAP` items (the newest ones) rather than
covering the whole scope. An item with several tags counts once per tag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from memseal.ledger.errors import InvalidRequest
from memseal.ledger.store import Execute

from ._projection import FACETS

__all__ = [
    "CLOSED_FACETS",
    "EXPLORE_CAP",
    "FACETS",
    "Bucket",
    "Exploration",
    "check_facet",
    "explore",
]

EXPLORE_CAP: Final = 100_000
#: Facets whose values come from a fixed vocabulary (the item kinds): a bucket of one says
#: nothing about any memory, so a forget does not erase the explores that showed it.
CLOSED_FACETS: Final = frozenset({"kind"})


class Bucket(msgspec.Struct, frozen=True, kw_only=True):
    """One value of a facet and how many items in scope carry it."""

    value: str
    count: int


class Exploration(msgspec.Struct, frozen=True, kw_only=True):
    """The buckets of one facet over the items in scope, and how many were counted."""

    facet: str
    buckets: tuple[Bucket, ...]
    total: int
    missing: int
    more_buckets: bool
    truncated: bool


def check_facet(value: object, field: str = "facet") -> str:
    """``value`` if it is one of FACETS; otherwise InvalidRequest naming ``field``."""
    if not isinstance(value, str) or value not in FACETS:
        raise InvalidRequest(f"`{field}` is not a facet ({', '.join(FACETS)})")
    return value


def explore(
    execute: Execute,
    facet: str,
    where: str,
    params: Sequence[Any],
    limit: int,
    cap: int = EXPLORE_CAP,
) -> Exploration:
    """Count the items matching ``where`` per value of ``facet`` (capped at ``cap``)."""
    scope = f"SELECT i.seq FROM engine_items i WHERE {where} ORDER BY i.seq DESC LIMIT {cap + 1}"
    counted = execute(
        f"WITH scope AS ({scope}) SELECT count(*), "
        "(SELECT count(DISTINCT f.seq) FROM engine_facets f "
        " WHERE f.facet = ? AND f.seq IN (SELECT seq FROM scope)) FROM scope",
        [*params, facet],
    )
    total, with_value = counted[0]
    truncated = total > cap
    if truncated:
        # Count exactly the newest `cap` items: drop the one extra the scope fetched.
        scope = f"SELECT i.seq FROM engine_items i WHERE {where} ORDER BY i.seq DESC LIMIT {cap}"
        counted = execute(
            f"WITH scope AS ({scope}) SELECT count(*), "
            "(SELECT count(DISTINCT f.seq) FROM engine_facets f "
            " WHERE f.facet = ? AND f.seq IN (SELECT seq FROM scope)) FROM scope",
            [*params, facet],
        )
        total, with_value = counted[0]
    found = execute(
        f"WITH scope AS ({scope}) SELECT f.value, count(*) AS c FROM engine_facets f "
        "WHERE f.facet = ? AND f.seq IN (SELECT seq FROM scope) "
        "GROUP BY f.value ORDER BY c DESC, f.value LIMIT ?",
        [*params, facet, limit + 1],
    )
    return Exploration(
        facet=facet,
        buckets=tuple(Bucket(value=value, count=count) for value, count in found[:limit]),
        total=total,
        missing=total - with_value,
        more_buckets=len(found) > limit,
        truncated=truncated,
    )
