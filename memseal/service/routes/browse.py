"""The routes the web console needs beyond the others: who the token is, and the runs.

The console (``/``, :mod:`memseal.service.console`) reads everything through
the public API, so what it shows is exactly what the token's role and reach
allow. Two of its pages had no route to read from:

* ``GET /v1/me``: the calling token's own role and scope (any role; nothing
  another token could not learn of itself), so the console shows only the
  pages the role may use instead of probing routes for 403s;
* ``GET /v1/ledger/runs``: the runs an auditor may see, newest first, paged by
  the seq of their ``run_started`` entry. A run is listed only when the place
  that started it is inside the caller's reach, so a tenant's run ids never
  reach an auditor of another tenant.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Final

import msgspec
from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from memseal.engine import Reach
from memseal.replay.runs.memo import hits_of

from ..deps import Auditor, MemoryDep, principal
from ..models import json_response
from ..tokens import Principal, reach_text

__all__ = ["MAX_RUNS", "me", "router", "runs"]

router = APIRouter(tags=["console"])

#: The most runs one page lists.
MAX_RUNS: Final = 100
#: How many ``runs`` rows one request reads at most while skipping runs outside the reach
#: (the page may come back short, with ``next`` saying where to go on).
_SCAN_RUNS: Final = 2000


@router.get("/v1/me", summary="The calling token's own role and scope (for the console)")
async def me(who: Annotated[Principal, Depends(principal)]) -> Response:
    """
    \f
    The role and scope the token was made with.
    """
    scope = who.scope
    return json_response(
        {
            "token_id": who.token_id,
            "label": who.label,
            "role": who.role,
            "place": scope.place or "/",
            "reach": reach_text(scope.reach),
            "writes": scope.writes,
            "floor": scope.floor,
            "default_trust": scope.default_trust,
            "frozen": scope.frozen,
            "allowlist": None if scope.allowlist is None else list(scope.allowlist),
        }
    )


def _admits(reach: Reach | None, place: object) -> bool:
    if reach is None or (reach.mode == "subtree" and reach.node == ""):
        return True
    if not isinstance(place, str):
        return False
    try:
        return reach.admits(place)
    except Exception:
        # A place the reach cannot even parse is not one it admits.
        return False


def _lifecycle(body: object) -> str | None:
    value = body.get("lifecycle") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None


@router.get(
    "/v1/ledger/runs",
    summary=f"Runs within the caller's reach, newest first (up to {MAX_RUNS} a page)",
)
async def runs(
    who: Auditor,
    memory: MemoryDep,
    before: Annotated[int | None, Query(ge=0, le=2**53)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 50,
    run: Annotated[
        str | None, Query(min_length=1, max_length=200, description="only this run")
    ] = None,
) -> Response:
    """
    \f
    One page of runs (started before seq ``before``), and where the next page starts.
    """
    store = memory.ledger.store
    bound = 2**53 + 1 if before is None else before
    if run is None:
        rows = await store.rows(
            "SELECT run_id, started_seq, holder, lease_until FROM runs WHERE started_seq < ?"
            " ORDER BY started_seq DESC LIMIT ?",
            (bound, _SCAN_RUNS),
        )
    else:
        rows = await store.rows(
            "SELECT run_id, started_seq, holder, lease_until FROM runs WHERE run_id = ?",
            (run,),
        )
    now = time.time()
    listed: list[dict[str, Any]] = []
    next_before: int | None = None
    for run_id, started_seq, holder, lease_until in rows:
        started = int(started_seq)
        if len(listed) == limit:
            next_before = int(listed[-1]["started_seq"])
            break
        entry = (await store.read(started)).entry()
        body = msgspec.json.decode(bytes(entry.body))
        place = body.get("place") if isinstance(body, dict) else None
        if not _admits(who.scope.reach, place):
            continue
        counted = await store.rows(
            "SELECT count(*), max(step), max(seq) FROM memos WHERE run_id = ?", (run_id,)
        )
        count, last, last_seq = counted[0]
        hits, last_hit = await hits_of(store, str(run_id))
        leased = float(lease_until) > now
        listed.append(
            {
                "run_id": str(run_id),
                "started_seq": started,
                "started_at": entry.at,
                "mode": body.get("mode") if isinstance(body, dict) else None,
                # What the run is to the lifecycle, as its signed run_started entry says
                # (None: a plain run, or one recorded before runs said so).
                "lifecycle": _lifecycle(body),
                "place": place,
                "recorded_steps": int(count),
                "last_step": None if last is None else int(last),
                # The seq of the run's newest recorded call: its timeline ends there (every
                # call it superseded, and every divergence that led to a call, is below).
                "last_seq": None if last_seq is None else int(last_seq),
                "leased": leased,
                "lease_until": float(lease_until) if leased else None,
                "holder": str(holder) if leased and holder is not None else None,
                # Memo hits in every process: an unsigned count (a hit writes no entry).
                "memo_hits": hits,
                "last_hit_at": last_hit,
            }
        )
    else:
        if len(rows) == _SCAN_RUNS:
            # Scanned as far as one request may: go on below the last row read.
            next_before = int(rows[-1][1])
    return json_response({"runs": listed, "next_before": next_before})
