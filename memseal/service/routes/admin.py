"""The admin's routes: tokens (make, list, revoke), item trust (promote, reject, stale), forget.

An admin's reach bounds all three: it manages only tokens placed within it (see
:func:`memseal.service.tokens.check_mint`) and changes the trust of, or
forgets, only items inside it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import Response

from memseal.engine.events import MAX_ACTOR_CHARS
from memseal.engine.items import check_ids
from memseal.ledger.errors import InvalidRequest, NotFound
from memseal.memory import Memory

from ..deps import Admin, MemoryDep, ServiceDep, fields
from ..models import (
    ForgetIn,
    ForgetOut,
    ReasonIn,
    TokenIn,
    TokenInfoOut,
    TokenMadeOut,
    TokensOut,
    TrustChangeOut,
    fields_doc,
    json_response,
)
from ..tokens import Principal, check_mint, scope_from

__all__ = ["TRUST_ACTIONS", "add_token", "forget_item", "list_tokens", "revoke_token", "router"]

router = APIRouter(tags=["admin"])


@router.post(
    "/v1/admin/tokens",
    summary="Make a token (shown once in the answer)",
    status_code=201,
    response_model=TokenMadeOut,
    openapi_extra=fields_doc(TokenIn),
)
async def add_token(
    who: Admin, body: Annotated[TokenIn, fields(TokenIn)], service: ServiceDep
) -> Response:
    """
    \f
    A new token within the admin's reach, shown this once.
    """
    scope = scope_from(
        role=body.role,
        place=body.place,
        reach=body.reach,
        read_only=body.read_only,
        floor=body.floor,
        default_trust=body.default_trust,
        frozen=body.frozen,
        allow=body.allow,
    )
    check_mint(who.scope, body.role, scope)
    token, info = service.tokens.add(body.role, scope, label=body.label)
    return json_response({"token": token, "info": info.as_dict()}, status=201)


@router.get(
    "/v1/admin/tokens",
    summary="Every token within the admin's reach",
    response_model=TokensOut,
)
async def list_tokens(who: Admin, service: ServiceDep) -> Response:
    """
    \f
    The tokens the admin manages (never the tokens themselves).
    """
    listed = service.tokens.listed(within=who.scope)
    return json_response({"tokens": [t.as_dict() for t in listed]})


@router.delete(
    "/v1/admin/tokens/{token_id}",
    summary="Revoke a token (refused from the next request on)",
    response_model=TokenInfoOut,
)
async def revoke_token(
    who: Admin,
    token_id: Annotated[str, PathParam(max_length=64)],
    service: ServiceDep,
) -> Response:
    """
    \f
    Revoke a token the admin manages; a token beyond its reach is not found.
    """
    return json_response(service.tokens.revoke(token_id, within=who.scope).as_dict())


def _actor(who: Principal) -> str:
    """Who is signed as asking: the token id, then as much of its label as the actor
    field holds (a long label must not make an admin unable to act)."""
    return f"{who.token_id} {who.label}".strip()[:MAX_ACTOR_CHARS].rstrip()


async def _trust(memory: Memory, who: Principal, item_id: str, action: str, reason: str) -> Any:
    engine = memory.engine
    method: Callable[..., Awaitable[Any]] = {
        "promote": engine.promote,
        "reject": engine.reject,
        "stale": engine.mark_stale,
    }[action]
    change = await method(
        item_id,
        actor=_actor(who),
        reason=reason,
        reach=who.scope.reach,
    )
    return msgspec.to_builtins(change)


def _trust_route(action: str) -> Callable[..., Awaitable[Response]]:
    async def trust_route(
        who: Admin,
        item_id: Annotated[str, PathParam(max_length=200)],
        body: Annotated[ReasonIn, fields(ReasonIn)],
        memory: MemoryDep,
    ) -> Response:
        return json_response(await _trust(memory, who, item_id, action, body.reason))

    trust_route.__name__ = f"trust_{action}"
    return trust_route


#: The trust routes, ``POST /v1/admin/items/{item_id}/ACTION``, and their summaries.
TRUST_ACTIONS: tuple[tuple[str, str], ...] = (
    ("promote", "Mark an item verified (a signed trust_changed entry with the reason)"),
    ("reject", "Mark an item rejected: no read returns it any more"),
    ("stale", "Mark an item stale"),
)

for _action, _summary in TRUST_ACTIONS:
    router.post(
        f"/v1/admin/items/{{item_id}}/{_action}",
        summary=_summary,
        response_model=TrustChangeOut,
        openapi_extra=fields_doc(ReasonIn),
    )(_trust_route(_action))


@router.post(
    "/v1/admin/items/{item_id}/forget",
    summary="Forget an item: a signed memory_forgotten entry erases every payload naming it",
    response_model=ForgetOut,
    openapi_extra=fields_doc(ForgetIn),
)
async def forget_item(
    who: Admin,
    item_id: Annotated[str, PathParam(max_length=200)],
    body: Annotated[ForgetIn, fields(ForgetIn)],
    memory: MemoryDep,
) -> Response:
    """
    \f
    Forget ``item_id`` (whatever its trust) if it is inside the admin's reach.
    """
    try:
        (target,) = check_ids([item_id])
    except InvalidRequest:
        raise InvalidRequest("`item_id` is not an item id") from None
    # Forgetting cannot be undone: the body repeats the id, so a console click or a
    # script's wrong variable never erases an item nobody named twice.
    if body.confirm != target:
        raise InvalidRequest("`confirm` must repeat the item id of the path, exactly")
    if not body.reason.strip():
        raise InvalidRequest("`reason` must not be empty")
    done = await memory.engine.forget(
        ids=[target],
        reach=who.scope.reach,
        actor=_actor(who),
        reason=body.reason,
    )
    if target not in done.forgotten:
        raise NotFound(f"no item {target!r} in your reach")
    return json_response({"id": target, "seqs": list(done.seqs), "redacted": list(done.redacted)})
