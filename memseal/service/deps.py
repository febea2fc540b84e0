"""The FastAPI dependencies of the routes: the service, the memory, who calls, the body.

A route states what it needs in its signature (``who: Agent``, ``memory:
MemoryDep``...) and gets it here; a dependency that cannot give it raises the
refusal (401 without a valid token, 403 for a role without the route, 503
while the service starts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import msgspec
from fastapi import Depends, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError

from memseal.ledger.errors import InvalidRequest
from memseal.memory import Memory
from memseal.replay.runs._sent import check_key
from memseal.tools.decode import MAX_DEPTH

from .errors import ApiError
from .state import Service
from .tokens import Principal, role_token

__all__ = [
    "Admin",
    "Agent",
    "Auditor",
    "KeyHeader",
    "MemoryDep",
    "Revalidate",
    "RunHeader",
    "ServiceDep",
    "StepHeader",
    "arguments",
    "bearer",
    "call_key",
    "fields",
    "memory",
    "principal",
    "role",
    "service",
]

_Model = TypeVar("_Model", bound=BaseModel)

bearer = HTTPBearer(auto_error=False, description="a memseal token (`memseal tokens add`)")


# The dependencies are coroutines although none awaits: FastAPI runs a plain ``def``
# dependency on a worker thread, and a request's four thread hops (service, principal,
# role, point) cost more on the event loop than the work they hand over (a dict lookup,
# one indexed row of the token table).


def _service(request: Request) -> Service:
    found: Service | None = getattr(request.app.state, "service", None)
    if found is None:
        raise ApiError(503, "starting", "the service is starting")
    return found


async def service(request: Request) -> Service:
    """The :class:`Service` of this app, or a 503 while it starts or stops."""
    return _service(request)


async def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """Who the request is, from its bearer token (``credentials`` only documents the
    scheme: the header is read as it came, so a malformed one gets a clear 401)."""
    return _service(request).authenticate(request.headers.get("authorization"))


async def memory(request: Request) -> Memory:
    """The open memory the routes read and write (a 503 while the service starts)."""
    return _service(request).memory


def role(*allowed: str) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency giving the principal if its role is one of ``allowed``, else a 403."""

    async def check(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if who.role not in allowed:
            routes = "/".join(allowed)
            raise ApiError(
                403, "forbidden", f"{role_token(who.role)} cannot use this route ({routes})"
            )
        return who

    return check


Agent = Annotated[Principal, Depends(role("agent"))]
Auditor = Annotated[Principal, Depends(role("auditor", "admin"))]
Admin = Annotated[Principal, Depends(role("admin"))]
#: The open memory, for routes that read or write it.
MemoryDep = Annotated[Memory, Depends(memory)]
#: The whole service (tokens, held runs, metrics), for routes that need more than the memory.
ServiceDep = Annotated[Service, Depends(service)]
RunHeader = Annotated[
    str | None,
    Header(
        alias="X-Memseal-Run",
        max_length=200,
        description="the run to record the call in (a fresh run when absent)",
    ),
]
StepHeader = Annotated[
    int | None,
    Header(
        alias="X-Memseal-Step",
        ge=0,
        le=1_000_000,
        description="the call's step in the run (default: the next, in arrival order)",
    ),
]
KeyHeader = Annotated[
    str | None,
    Header(
        alias="X-Memseal-Key",
        description=(
            "the call's key: the id the model gave the tool call (needs X-Memseal-Run); "
            "a key the run recorded answers its memo"
        ),
    ),
]
Revalidate = Annotated[
    bool,
    Query(description="run live even if the step is recorded, and record the replacement"),
]


def call_key(header: str | None) -> str | None:
    """The ``X-Memseal-Key`` header as the call's key, or None; a 400 naming ``key``.

    The header's bytes are read as UTF-8 (the server hands them over as Latin-1), so
    a key is signed as the client wrote it, never as mojibake.
    """
    if header is None:
        return None
    try:
        key = header.encode("latin-1").decode("utf-8")
    except UnicodeError as exc:
        raise InvalidRequest("`key` (X-Memseal-Key) must be UTF-8 text") from exc
    try:
        return check_key(key)
    except InvalidRequest as exc:
        raise InvalidRequest(f"{exc} (X-Memseal-Key)") from exc


async def arguments(request: Request, what: str = "arguments") -> dict[str, Any]:
    """The request body as a JSON object, whatever the content type said."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ApiError(400, "invalid_request", f"the body is not JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, "invalid_request", f"the body is not UTF-8 JSON: a string holds {exc.reason}"
        ) from exc
    except RecursionError as exc:
        raise ApiError(
            400,
            "invalid_request",
            f"the body nests deeper than the arguments may ({MAX_DEPTH} levels)",
        ) from exc
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_request", f"the body must be a JSON object of {what}")
    return value


def fields(model: type[_Model]) -> Any:
    """A dependency giving the body as ``model``, read as the tool routes read theirs.

    FastAPI parses a body as JSON only when its Content-Type says JSON, so ``curl -d``
    (form-encoded by default) reached an admin route as bytes, "not a valid dictionary",
    while the same form worked on the tool routes. Pair with
    :func:`~memseal.service.models.fields_doc`.
    """

    async def read(request: Request) -> _Model:
        value = await arguments(request, what="fields")
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False)) from exc

    return Depends(read)
