"""How a refusal becomes an HTTP answer: :class:`ApiError`, the status map, the error body.

Every refusal is a 4xx (or a 5xx for a failed verification or an unreachable
store) with the body ``{"error": {"code": ..., "message": ...}}``. A
:class:`~memseal.errors.MemsealError` raised anywhere below gets its status
and code from :data:`STATUS` (see :func:`from_memseal`); the service's own
refusals (no token, a role without this route...) are :class:`ApiError`.

This module imports no web framework, so the MCP endpoint and the guard can
raise and answer with the same errors.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from memseal.ledger.errors import (
    Conflict,
    InvalidRequest,
    MemsealError,
    NotFound,
    ReplayDivergence,
    StorageError,
    Unsupported,
    VerificationError,
)

from .tokens import OutsideReach

__all__ = ["STATUS", "ApiError", "error_body", "from_memseal"]

_encoder = msgspec.json.Encoder()


class ApiError(MemsealError):
    """A refusal with its HTTP status, error code and message (and extra top-level fields).

    It joins the one error tree (see :mod:`memseal.ledger.errors`), so code that
    handles every memseal error (the MCP endpoint's ``isError`` results) handles
    the service's own refusals as well; the app answers it with its own status.
    """

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


#: The status and code of each error kind, most specific first: the first match wins, so
#: :class:`OutsideReach` (an :class:`Unsupported`) answers 403 ``forbidden``.
STATUS: Final[list[tuple[type[MemsealError], int, str]]] = [
    (InvalidRequest, 400, "invalid_request"),
    (OutsideReach, 403, "forbidden"),
    (Unsupported, 403, "unsupported"),
    (NotFound, 404, "not_found"),
    (ReplayDivergence, 409, "replay_divergence"),
    (Conflict, 409, "conflict"),
    (VerificationError, 500, "verification_failed"),
    (StorageError, 503, "storage_unavailable"),
]


def from_memseal(exc: MemsealError, **extra: Any) -> ApiError:
    """The :class:`ApiError` answering ``exc``: its status and code from :data:`STATUS`
    (an error of no listed kind is a 400 ``invalid_request``), ``extra`` beside it."""
    for kind, status, code in STATUS:
        if isinstance(exc, kind):
            return ApiError(status, code, str(exc), **extra)
    return ApiError(400, "invalid_request", str(exc), **extra)


def error_body(code: str, message: str, **extra: Any) -> bytes:
    """The JSON body of a refusal (the message cut at 2,000 characters)."""
    return _encoder.encode({"error": {"code": code, "message": message[:2000]}, **extra})
