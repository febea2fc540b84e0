"""The auditor's read of memory: the items inside its reach, listed or searched.

An agent reads memory through its own tools, each read a signed tool call
(``/v1/tools/memory_list``...). An auditor has no tools: it audits. It
already sees every header and the payloads within its reach through the
ledger routes (:mod:`memseal.service.ledger_view`), item texts included, so
this route shows it nothing new, only in the shape the console's Memory
page needs: the current items with their trust, newest first or ranked by a
search. The reach is the token's, applied by the engine's own scoped reads;
a rejected item is never listed (as no read returns one), the lowest trust
shown by default is ``stale``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from fastapi import APIRouter, Query
from fastapi.responses import Response

from ..deps import Auditor, MemoryDep
from ..models import json_response

__all__ = ["MAX_ITEMS", "items", "router"]

router = APIRouter(tags=["audit"])

#: The most items one page lists.
MAX_ITEMS: Final = 100


def _item(value: Any, score: float | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = msgspec.to_builtins(value)
    if score is not None:
        shown["score"] = score
    return shown


@router.get(
    "/v1/ledger/items",
    summary=f"Items inside the caller's reach, newest first or by a search (up to {MAX_ITEMS})",
)
async def items(
    who: Auditor,
    memory: MemoryDep,
    query: Annotated[
        str | None, Query(min_length=1, max_length=2000, description="search for this")
    ] = None,
    mode: Annotated[Literal["exact", "semantic", "hybrid"] | None, Query()] = None,
    min_trust: Annotated[Literal["stale", "unverified", "verified"], Query()] = "stale",
    limit: Annotated[int, Query(ge=1, le=MAX_ITEMS)] = 50,
    cursor: Annotated[str | None, Query(min_length=1, max_length=2000)] = None,
) -> Response:
    """
    \f
    One page of the items in reach (``query``: ranked hits), and the cursor of the next.
    """
    engine = memory.engine
    reach = who.scope.reach
    if query is None:
        page = await engine.list(reach=reach, min_trust=min_trust, limit=limit, cursor=cursor)
        return json_response(
            {"items": [_item(i) for i in page.items], "next_cursor": page.next_cursor}
        )
    found = await engine.fetch(
        query, mode=mode, reach=reach, min_trust=min_trust, limit=limit, cursor=cursor
    )
    return json_response(
        {
            "items": [_item(h.item, h.score) for h in found.hits],
            "mode": found.mode,
            "next_cursor": found.next_cursor,
        }
    )
