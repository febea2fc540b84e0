"""The scope condition: reach, trust floor and filter as one SQL condition.

Every query is confined the same way before anything is ranked: the reach
(namespaces), the trust floor (rejected never passes) and the filter all
become one SQL condition on ``engine_items AS i``, which the ranking query
then runs under. The filter's public type and its checks are in
:mod:`memseal.engine.filters`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .filters import EQUALITY_FACETS, Filter
from .namespaces import Reach, reach_sql
from .trust import Trust, trust_rank

__all__ = ["scope_sql"]


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
