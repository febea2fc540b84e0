"""The agent's run routes: call a tool as a run's step, a run's status, export, close.

A run id belongs to the scope that started it (see
:mod:`memseal.service.registry`): a caller placed elsewhere is told there is
no such run. The export is also an auditor's (and an admin's): of a run whose
starting place is inside its reach, and only when every payload the bundle
holds is one the ledger routes would show it (see
:mod:`memseal.service.ledger_view`), so a bundle never carries another
tenant's words to an auditor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import Response
from starlette.convertors import Convertor, register_url_convertor

from memseal.ledger.errors import Conflict, NotFound, VerificationError
from memseal.memory import Memory
from memseal.replay.evidence.read_proof import decode_read_proof, verify_read

from ..deps import Agent, KeyHeader, MemoryDep, Revalidate, ServiceDep, StepHeader, role
from ..errors import ApiError
from ..history import run_in_reach as in_reach
from ..ledger_view import EntryView
from ..models import ARGUMENTS_BODY, RunStatusOut, ToolResultOut, json_response
from ..tokens import Principal
from .tools import recorded_call

__all__ = [
    "RunId",
    "attachment",
    "call_in_run",
    "close_run",
    "export_run",
    "in_reach",
    "read_proof",
    "router",
    "run_status",
]


class _RunIdConvertor(Convertor[str]):
    """A run id in the path: any characters, '/' and control characters included (so a
    bad id reaches the route and is refused with 400 naming it, not a 404)."""

    regex = r"[\s\S]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("run_id", _RunIdConvertor())

router = APIRouter(tags=["runs"])

#: A run id in a path: 1 to 200 characters (the registry checks they are printable). The
#: routes take it with Starlette's ``path`` converter, because the server decodes ``%2F``
#: before routing: a run id such as ``job/nightly/7`` (sent as ``job%2Fnightly%2F7`` or
#: as is) reaches every run route. A run id ending in ``/export`` is the one ambiguity:
#: ``GET /v1/runs/X/export`` is the export of run X (``GET /v1/ledger/runs?run=ID`` lists
#: any run by id).
RunId = Annotated[str, PathParam(min_length=1, max_length=200)]


@router.post(
    "/v1/runs/{run_id:run_id}/tools/{name}",
    summary="Call a tool as the next step (or X-Memseal-Step) of a named run",
    response_model=ToolResultOut,
    openapi_extra=ARGUMENTS_BODY,
)
async def call_in_run(
    request: Request,
    who: Agent,
    run_id: RunId,
    name: Annotated[str, PathParam(max_length=64)],
    service: ServiceDep,
    revalidate: Revalidate = False,
    step: StepHeader = None,
    key: KeyHeader = None,
) -> Response:
    """
    \f
    A tool call as the next step of ``run_id`` (or as the step the header names).
    """
    return await recorded_call(request, service, who, name, run_id, step, revalidate, key)


@router.get(
    "/v1/runs/{run_id:run_id}/export",
    summary="The run as a session bundle (offline-verifiable; `memseal verify FILE`)",
    response_class=Response,
    responses={200: {"content": {"application/json": {}}}},
)
async def export_run(
    who: Annotated[Principal, Depends(role("agent", "auditor", "admin"))],
    run_id: RunId,
    service: ServiceDep,
    memory: MemoryDep,
    with_read_proofs: Annotated[
        bool,
        Query(
            description="add what `memseal prove-read BUNDLE` needs: every entry before the "
            "run's last read, the texts in its reach (the bundle grows with the log)"
        ),
    ] = False,
) -> Response:
    """
    \f
    The session bundle of ``run_id``, as a download.
    """
    from memseal.replay.evidence.bundle import encode_bundle, export_bundle

    if who.role == "agent":
        if not await service.runs.check_owner(run_id, who.scope):
            raise NotFound(f"no run {run_id!r} in this scope")
    elif not await in_reach(memory, who, run_id):
        # Told as an agent placed elsewhere is: the run's id is not learnt from the answer.
        raise NotFound(f"no run {run_id!r} in your reach")
    keys = await memory.key_history()
    for _ in range(_TRIES):
        bundle = await export_bundle(
            memory.ledger,
            keys,
            run_id,
            embedders=await memory.engine.embedders(),
            with_read_proofs=with_read_proofs,
        )
        # Every payload the bundle carries, its entries' and its reads section's, for every
        # role: the ledger routes would show each to this caller (an agent's run may read a
        # reach wider than its token's, and a bundle must never carry an admin's words to an
        # agent).
        carried = {e.seq: e.payload for e in bundle.entries if e.payload is not None}
        if bundle.reads is not None:
            carried |= {e.seq: e.payload for e in bundle.reads.prefix if e.payload is not None}
        if await _check_payloads(memory, who, run_id, carried):
            break
    else:
        raise _raced(run_id, "bundle")
    return Response(
        encode_bundle(bundle),
        media_type="application/json",
        headers={"Content-Disposition": attachment(run_id)},
    )


@router.get(
    "/v1/runs/{run_id:run_id}/steps/{step}/read-proof",
    summary="A self-contained proof of what one recorded read returned "
    "(offline-verifiable; `memseal verify-read FILE`)",
    response_class=Response,
    responses={200: {"content": {"application/json": {}}}},
)
async def read_proof(
    who: Agent,
    run_id: RunId,
    step: Annotated[int, PathParam(ge=0, le=2**31)],
    service: ServiceDep,
    memory: MemoryDep,
    disclose: Literal["reach", "all"] = "reach",
) -> Response:
    """
    \f
    The read proof of step ``step`` of ``run_id``, as a download.
    """
    if not await service.runs.check_owner(run_id, who.scope):
        raise NotFound(f"no run {run_id!r} in this scope")
    for _ in range(_TRIES):
        data = await memory.prove_read(run_id, step, disclose=disclose)
        # `disclose=all` carries every memory text before the read, other tenants' too: the
        # proof holds no payload the ledger routes would withhold from this token.
        proof = decode_read_proof(data)
        carried = {e.seq: e.payload for e in (*proof.prefix, *proof.later) if e.payload}
        if await _check_payloads(memory, who, run_id, carried, what="read proof"):
            break
    else:
        raise _raced(run_id, "read proof")
    try:
        # Checked as an auditor will (the same verifier, against the first key) before it is
        # served: a store whose rows no longer match their signed hashes, or a read whose
        # ranking needs texts outside the reach, gets a named refusal, never a bad proof.
        # With this service's own embedder when the read used it: "auto" rebuilds only
        # the embedders memseal ships, and would refuse an honest semantic proof.
        own = memory.engine.embedder
        used = own is not None and own.id in proof.embedders
        await verify_read(proof, memory.trust_root, embedder=own if own and used else "auto")
    except VerificationError as exc:
        raise ApiError(
            409,
            f"read_proof_{exc.step.replace(' ', '_')}_failed",
            "the read proof would not verify: " + " ".join(str(exc).split()),
            step=exc.step,
            seq=exc.seq,
        ) from exc
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)
    return Response(
        data,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{plain}-step{step}.read-proof"'},
    )


# The routes naming only the run come last: with the ``path`` converter their pattern
# would take ".../export" or ".../steps/N/read-proof" as part of the run id.
@router.get(
    "/v1/runs/{run_id:run_id}",
    summary="A run's status: recorded steps, lease, whether this process holds it",
    response_model=RunStatusOut,
)
async def run_status(who: Agent, run_id: RunId, service: ServiceDep) -> Response:
    """
    \f
    What the ledger and this process know of ``run_id``.
    """
    return json_response(await service.runs.status(run_id, who.scope))


@router.delete(
    "/v1/runs/{run_id:run_id}",
    summary="Close a held run (release its lease); its record stays and can be resumed",
)
async def close_run(who: Agent, run_id: RunId, service: ServiceDep) -> Response:
    """
    \f
    Release ``run_id`` if this process holds it.
    """
    closed = await service.runs.close_run(run_id, who.scope)
    return json_response({"run_id": run_id, "closed": closed})


#: Exports a forget may race before the caller is told to ask again.
_TRIES = 2


def _raced(run_id: str, what: str) -> Conflict:
    return Conflict(
        f"run {run_id!r}: a forget erased a text the {what} was to carry while it was made; "
        "ask again"
    )


async def _check_payloads(
    memory: Memory,
    who: Principal,
    run_id: str,
    carried: Mapping[int, bytes | None],
    what: str = "bundle",
) -> bool:
    """Refuse a bundle holding a payload the ledger routes would withhold from ``who``
    (a result citing an item of a place beyond its reach, such an item's own entries).

    False when a carried payload is no longer the stored one: a forget erased it after
    the bundle read it, and privacy wins, so the bundle is made again (the bundle's own
    race check sees only erasures that came first)."""
    store = memory.ledger.store
    view = EntryView(store, who.scope.reach)
    seqs = list(carried)
    for start in range(0, len(seqs), 200):
        records = [await store.read(s) for s in seqs[start : start + 200]]
        if any(r.payload != carried[r.seq] for r in records):
            return False
        shown = await view.render(records)
        withheld = [e["seq"] for e in shown if e.get("payload_withheld")]
        if withheld:
            raise ApiError(
                403,
                "forbidden",
                f"run {run_id!r}: the {what} holds payloads outside your reach "
                f"(seq {withheld[0]}); "
                + (
                    "export it with the run's own agent token"
                    if what == "bundle"
                    else "ask for disclose=reach, or prove it with the operator's CLI"
                ),
            )
    return True


def attachment(run_id: str) -> str:
    """A Content-Disposition for ``run_id``'s bundle: header values are latin-1, and a run
    id may hold any printable character, quotes and U+FFFD included (RFC 6266 filename*)."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)
    encoded = quote(run_id, safe="")
    return f"attachment; filename=\"{plain}.bundle\"; filename*=UTF-8''{encoded}.bundle"
