"""The auditor's ledger routes: size and keys, entries, checkpoints, proofs, the deep check.

Every entry's signed bytes are shown to any auditor (the chain and the tree
are over all of them); payloads only within the caller's reach (see
:mod:`memseal.service.ledger_view`).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec
from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import PlainTextResponse, Response

from memseal.ledger.entry import Entry
from memseal.ledger.errors import InvalidRequest, NotFound

from ..deps import Auditor, MemoryDep
from ..ledger_view import MAX_ENTRIES, EntryView, projection_report
from ..models import TEXT_OK, EntriesOut, EntryOut, LedgerOut, json_response

__all__ = [
    "SCAN_WINDOW",
    "Seq",
    "checkpoint",
    "consistency",
    "entries",
    "entry",
    "inclusion",
    "ledger_info",
    "projections",
    "router",
]

router = APIRouter(tags=["ledger"])

#: A sequence number or a tree size: JSON's exact integers at most.
Seq = Annotated[int, Query(ge=0, le=2**53)]


@router.get("/v1/ledger", summary="The ledger's size, origin and keys", response_model=LedgerOut)
async def ledger_info(who: Auditor, memory: MemoryDep) -> Response:
    """
    \f
    The ledger's size, origin, trust root and current key.
    """
    return json_response(
        {
            "size": await memory.ledger.size(),
            "origin": memory.ledger.origin,
            "trust_root": memory.trust_root,
            "vkey": memory.vkey,
        }
    )


@router.get(
    "/v1/ledger/entries",
    summary=f"Entries [start, start+limit) (limit up to {MAX_ENTRIES}); payloads within reach",
    response_model=EntriesOut,
)
async def entries(
    who: Auditor,
    memory: MemoryDep,
    start: Seq = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_ENTRIES)] = 100,
    kind: Annotated[
        str | None, Query(max_length=64, description="only entries of this kind")
    ] = None,
    run: Annotated[
        str | None, Query(max_length=200, description="only entries whose body names this run")
    ] = None,
    item: Annotated[
        str | None,
        Query(max_length=200, description="only the memory entries naming this item id"),
    ] = None,
    end: Annotated[
        int | None,
        Query(ge=1, le=2**53, description="scan no further than this seq (exclusive)"),
    ] = None,
) -> Response:
    """
    \f
    One page of entries, and where the next page starts.

    With ``kind``, ``run`` or ``item``, the page holds the matching entries among at most
    :data:`SCAN_WINDOW` entries from ``start`` (so no request reads the whole log), and
    ``next`` is where that scan stopped: a short or empty page with a ``next`` is not the end.
    ``end`` bounds the scan (a run's timeline stops at its last recorded call): ``next`` is
    None once the page reaches it.
    """
    if end is not None and end <= start:
        raise InvalidRequest(f"`end` must be above `start` ({start}), not {end}")
    size = await memory.ledger.size()
    bound = size if end is None else min(size, end)
    view = EntryView(memory.ledger.store, who.scope.reach)
    if kind is None and run is None and item is None:
        stop = min(bound, start + limit)
        records = [r async for r in memory.ledger.scan(start, stop)] if start < stop else []
    else:
        stop = min(bound, start + SCAN_WINDOW)
        records = []
        # Read in chunks, each to its end (no scan is left suspended), until the page fills.
        for chunk in range(start, stop, _CHUNK):
            for record in [r async for r in memory.ledger.scan(chunk, min(stop, chunk + _CHUNK))]:
                if len(records) < limit and _matches(record.entry(), kind, run, item):
                    records.append(record)
                    if len(records) == limit:
                        stop = record.seq + 1
            if len(records) == limit:
                break
    return json_response(
        {
            "size": size,
            "entries": await view.render(records),
            "next": stop if stop < bound else None,
        }
    )


@router.get(
    "/v1/ledger/entries/{seq}",
    summary="One entry; its payload only within the caller's reach",
    response_model=EntryOut,
)
async def entry(
    who: Auditor,
    memory: MemoryDep,
    seq: Annotated[int, PathParam(ge=0, le=2**53)],
) -> Response:
    """
    \f
    Entry ``seq`` as the caller may see it.
    """
    record = await memory.ledger.read(seq)
    view = EntryView(memory.ledger.store, who.scope.reach)
    return json_response((await view.render([record]))[0])


@router.get(
    "/v1/ledger/checkpoint",
    summary="The latest signed checkpoint (C2SP signed note; one is cut if none exists), "
    "with its witnesses' cosignatures",
    response_class=Response,
    responses=TEXT_OK,
)
async def checkpoint(who: Auditor, memory: MemoryDep, request: Request) -> Response:
    """
    \f
    The latest checkpoint's signed note (cutting the first one), with the
    cosignatures of the witnesses ``serve --witness`` names.
    """
    latest = await memory.ledger.latest_checkpoint()
    note = latest.note if latest is not None else await memory.ledger.checkpoint()
    relay = getattr(request.app.state, "witnesses", None)
    if relay is not None:
        note = await relay.witnessed(note)
    return PlainTextResponse(note)


@router.get(
    "/v1/ledger/projections",
    summary="verify --deep: the projections rebuilt from the log and compared (slow)",
)
async def projections(who: Auditor, memory: MemoryDep) -> Response:
    """
    \f
    The deep check, as much of it as the caller's reach may see.
    """
    return json_response(await projection_report(memory.engine, who.scope.reach))


@router.get(
    "/v1/ledger/proofs/inclusion",
    summary="C2SP tlog-proof of entry `seq` (against checkpoint `size`, default the newest)",
    response_class=Response,
    responses=TEXT_OK,
)
async def inclusion(
    who: Auditor,
    memory: MemoryDep,
    seq: Seq,
    size: Annotated[int | None, Query(ge=1, le=2**53)] = None,
) -> Response:
    """
    \f
    The inclusion proof of entry ``seq``.
    """
    if seq >= await memory.ledger.size():
        raise NotFound(f"no entry {seq}")
    return PlainTextResponse(await memory.ledger.tlog_proof(seq, size))


@router.get(
    "/v1/ledger/proofs/consistency",
    summary="Consistency proof from tree size `old` to `new` (default: the current size)",
    response_class=Response,
    responses=TEXT_OK,
)
async def consistency(
    who: Auditor,
    memory: MemoryDep,
    old: Annotated[int, Query(ge=1, le=2**53)],
    new: Annotated[int | None, Query(ge=1, le=2**53)] = None,
) -> Response:
    """
    \f
    The consistency proof between tree sizes ``old`` and ``new``.
    """
    size = await memory.ledger.size()
    if old > size or (new is not None and not old <= new <= size):
        raise InvalidRequest(f"sizes must satisfy 1 <= old <= new <= {size}")
    proof = await memory.ledger.consistency_proof(old, new)
    return PlainTextResponse(proof.text())


#: How many entries a filtered page scans at most.
SCAN_WINDOW: Final = 5000
_CHUNK: Final = 500


def _matches(entry: Entry, kind: str | None, run: str | None, item: str | None) -> bool:
    if kind is not None and entry.kind != kind:
        return False
    if run is None and item is None:
        return True
    # Only run entries name a run, and only memory entries an item (headers are what every
    # auditor sees anyway: a filter tells it nothing the unfiltered page does not).
    wanted = _RUN_KINDS if run is not None else _ITEM_KINDS
    if entry.kind not in wanted:
        return False
    body = msgspec.json.decode(bytes(entry.body))
    if not isinstance(body, dict):
        return False
    if run is not None and body.get("run_id") != run:
        return False
    if item is not None:
        items = body.get("items")
        named = items if isinstance(items, list) else [body.get("item")]
        return item in named
    return True


_RUN_KINDS: Final = frozenset({"run_started", "memory_tool_call", "run_forked"})
_ITEM_KINDS: Final = frozenset({"memory_stored", "trust_changed", "memory_forgotten"})
