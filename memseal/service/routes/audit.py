"""The auditor's reads for the console: the items inside its reach, listed or searched, and
a run's memo (which signed entry each recorded step replays on resume).

An agent reads memory through its own tools, each read a signed tool call
(``/v1/tools/memory_list``...). An auditor has no tools: it audits. It
already sees every header and the payloads within its reach through the
ledger routes (:mod:`memseal.service.ledger_view`), item texts included, so
this route shows it nothing new, only in the shape the console's Memory
page needs: the current items with their trust, newest first or ranked by a
search. The reach is the token's, applied by the engine's own scoped reads;
a rejected item is never listed (as no read returns one), the lowest trust
shown by default is ``stale``. With a point of the log (``?as_of=N``, or
``as_of_time``, or ``as_of_run`` with ``as_of_step``, as on the agent's read
routes), the items as they stood then, later forgets applied, answered with
``"as_of": N``.

A memo hit (a step answered from its record on resume) writes no entry, so
the ledger cannot say when one happened; what it holds is the memo itself:
each recorded step maps to the signed call a resume replays. The memo route
lists that map for a run whose starting place is inside the caller's reach,
with each step's memo hits in every process (``hits``: the unsigned count of
:mod:`memseal.replay.memo`, a figure, not a proof) and, for a run this process
holds, how many calls of each step it answered from the memo and how many live
(see :mod:`memseal.service.registry`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any, Final, Literal

import msgspec
from fastapi import APIRouter, Query
from fastapi.responses import Response

from memseal.apps.as_of import AsOfView
from memseal.engine import Engine
from memseal.ledger.errors import NotFound

from ..deps import Auditor, MemoryDep, ServiceDep
from ..history import AsOf
from ..models import json_response
from .runs import in_reach

__all__ = ["MAX_ITEMS", "MAX_MEMOS", "items", "memos", "router"]

router = APIRouter(tags=["audit"])

#: The most items one page lists.
MAX_ITEMS: Final = 100
#: The most memo rows one page lists.
MAX_MEMOS: Final = 1000


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
    *,
    who: Auditor,
    memory: MemoryDep,
    query: Annotated[
        str | None, Query(min_length=1, max_length=2000, description="search for this")
    ] = None,
    mode: Annotated[Literal["exact", "semantic", "hybrid"] | None, Query()] = None,
    min_trust: Annotated[Literal["stale", "unverified", "verified"], Query()] = "stale",
    limit: Annotated[int, Query(ge=1, le=MAX_ITEMS)] = 50,
    cursor: Annotated[str | None, Query(min_length=1, max_length=2000)] = None,
    point: AsOf,
) -> Response:
    """
    \f
    One page of the items in reach (``query``: ranked hits), and the cursor of the next;
    with a point (``as_of``...), of the memory as of it.
    """
    view = await point.view(memory, who)
    reach = who.scope.reach
    out: dict[str, Any]
    async with _engine(memory.engine, view) as engine:
        if query is None:
            page = await engine.list(reach=reach, min_trust=min_trust, limit=limit, cursor=cursor)
            out = {"items": [_item(i) for i in page.items], "next_cursor": page.next_cursor}
        else:
            found = await engine.fetch(
                query, mode=mode, reach=reach, min_trust=min_trust, limit=limit, cursor=cursor
            )
            out = {
                "items": [_item(h.item, h.score) for h in found.hits],
                "mode": found.mode,
                "next_cursor": found.next_cursor,
            }
    if view is not None:
        out["as_of"] = view.size
    return json_response(out)


@contextlib.asynccontextmanager
async def _engine(live: Engine, view: AsOfView | None) -> AsyncIterator[Engine]:
    """The live engine, or the view's, held for the one read."""
    if view is None:
        yield live
        return
    async with view.engine() as engine:
        yield engine


@router.get(
    "/v1/ledger/memos",
    summary="A run's memo: the signed call each recorded step replays on resume",
)
async def memos(
    who: Auditor,
    memory: MemoryDep,
    service: ServiceDep,
    # A query parameter, not a path segment: a run id may hold "/" (a lifecycle session's
    # runs are SESSION/REACH), which no single path segment carries.
    run: Annotated[str, Query(min_length=1, max_length=200, description="the run")],
    after: Annotated[int, Query(ge=-1, le=2**53)] = -1,
    limit: Annotated[int, Query(ge=1, le=MAX_MEMOS)] = MAX_MEMOS,
) -> Response:
    """
    \f
    The memo rows of ``run`` from step ``after + 1``, and where the next page starts.
    """
    if not await in_reach(memory, who, run):
        raise NotFound(f"no run {run!r} in your reach")
    # Each step's memo hits in every process, for the signed call the memo names now (an
    # unsigned count a run adds on its lease renewals and close: see replay/memo.py).
    rows = await memory.ledger.store.rows(
        "SELECT m.step, m.seq, h.hits, h.last_at FROM memos m LEFT JOIN memo_hits h"
        " ON h.run_id = m.run_id AND h.seq = m.seq"
        " WHERE m.run_id = ? AND m.step > ? ORDER BY m.step LIMIT ?",
        (run, after, limit + 1),
    )
    # What this process answered in the run while it holds it (memo hits leave no entry).
    here = service.runs.answered_here(run)
    shown = []
    for step, seq, hits, last_hit in rows[:limit]:
        counted = None if here is None else here.get(int(step), (0, 0))
        shown.append(
            {
                "step": int(step),
                "seq": int(seq),
                "hits": 0 if hits is None else int(hits),
                "last_hit_at": None if last_hit is None else float(last_hit),
                "replayed_here": None if counted is None else counted[0],
                "live_here": None if counted is None else counted[1],
            }
        )
    more = len(rows) > limit
    return json_response(
        {
            "run_id": run,
            "held_here": here is not None,
            "memos": shown,
            "next_after": shown[-1]["step"] if more else None,
        }
    )
