"""The agent's tool routes: list the tools, call one, ask whether a call would be refused."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import Response

from memseal.ledger.errors import InvalidRequest, Unsupported
from memseal.tools import TRAITS, refusal_before_approval

from ..deps import (
    Agent,
    KeyHeader,
    MemoryDep,
    Revalidate,
    RunHeader,
    ServiceDep,
    StepHeader,
    arguments,
    call_key,
)
from ..history import AsOf
from ..models import ARGUMENTS_BODY, ToolResultOut, ToolsOut, json_response
from ..tokens import Principal

__all__ = ["call_tool", "check_tool", "list_tools", "recorded_call", "router"]

router = APIRouter(tags=["tools"])


@router.get("/v1/tools", summary="The tool specs of the caller's scope", response_model=ToolsOut)
async def list_tools(
    who: Agent,
    memory: MemoryDep,
    point: AsOf,
) -> Response:
    """
    \f
    The specs of the tools the caller's scope offers (with a point: its read tools).
    """
    view = await point.view(memory, who)
    if view is None:
        specs = memory.tools(who.scope).specs()
        return json_response({"tools": [msgspec.to_builtins(s) for s in specs]})
    specs = view.tools(who.scope).specs()
    return json_response({"tools": [msgspec.to_builtins(s) for s in specs], "as_of": view.size})


async def recorded_call(
    request: Request,
    service: ServiceDep,
    who: Principal,
    name: str,
    run_id: str | None,
    step: int | None,
    revalidate: bool,
    key: str | None = None,
) -> Response:
    """One tool call with the request body as its arguments, answered with where it was
    recorded (the run and step) and the tool's result. ``key`` is the raw
    ``X-Memseal-Key`` header: checked before anything is read or written."""
    checked = call_key(key)
    body = await arguments(request)
    rid, taken, result = await service.call_tool(
        who,
        name,
        body,
        run_id=run_id,
        step=step,
        revalidate=revalidate,
        key=checked,
    )
    return json_response({"run_id": rid, "step": taken, "result": result})


@router.post(
    "/v1/tools/{name}",
    summary="Call a tool (in the run named by X-Memseal-Run, or in a fresh run)",
    response_model=ToolResultOut,
    openapi_extra=ARGUMENTS_BODY,
)
async def call_tool(
    *,
    request: Request,
    who: Agent,
    name: Annotated[str, PathParam(max_length=64)],
    service: ServiceDep,
    revalidate: Revalidate = False,
    run_id: RunHeader = None,
    step: StepHeader = None,
    key: KeyHeader = None,
    point: AsOf,
) -> Response:
    """
    \f
    A tool call in the run the header names, or in a fresh one-shot run; with a point
    (``as_of``...), an unrecorded read of the memory as of that point.
    """
    view = await point.view(service.memory, who)
    if view is None:
        return await recorded_call(request, service, who, name, run_id, step, revalidate, key)
    if run_id is not None or step is not None or key is not None or revalidate:
        raise InvalidRequest(
            f"`{point.named}`: a read of the past is not recorded, so it takes no run, "
            "step, key or revalidate"
        )
    if name in TRAITS and TRAITS[name].side_effects:
        # Said over HTTP, naming the parameter the caller sent; the view's own refusal
        # speaks to Python callers.
        raise Unsupported(
            f"`{point.named}`: {name} writes, and the memory as of tree size {view.size} is "
            "a read-only view of the past; call it without a point"
        )
    body = await arguments(request)
    result = await view.tools(who.scope).call(name, body)
    return json_response({"as_of": view.size, "result": result})


@router.post(
    "/v1/tools/{name}/check",
    summary="Dry run for an approval gate: the policy refusal a call would meet, or 204",
    status_code=200,
    responses={
        200: {"description": "The call would be refused: its tool, rule code and message"},
        204: {"description": "No policy refuses the call (its arguments are still unchecked)"},
    },
)
async def check_tool(
    who: Agent,
    name: Annotated[str, PathParam(max_length=64)],
) -> Response:
    """
    \f
    The policy refusal a call of ``name`` would meet, or 204.
    """
    # Asked before approval, so it records nothing and reads no arguments: the policy
    # looks only at the token's scope and the tool (the call itself checks the rest).
    if name not in TRAITS:
        raise InvalidRequest(f"unknown tool {name!r}; the tools are {', '.join(TRAITS)}")
    refusal = refusal_before_approval(who.scope, name)
    if refusal is None:
        return Response(status_code=204)
    return json_response({"tool": refusal.tool, "code": refusal.code, "message": str(refusal)})
