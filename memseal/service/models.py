"""The shapes the routes answer, for the OpenAPI document only.

The routes encode their answers with msgspec (:func:`json_response`); these
pydantic models describe them to ``/openapi.json``, and the two ``...In``
models are also how the admin routes read their bodies.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ARGUMENTS_BODY",
    "ERRORS",
    "TEXT_OK",
    "EntriesOut",
    "EntryOut",
    "ErrorDetail",
    "ErrorResponse",
    "ForgetIn",
    "ForgetOut",
    "LedgerOut",
    "ReasonIn",
    "RunStatusOut",
    "TokenIn",
    "TokenInfoOut",
    "TokenMadeOut",
    "TokensOut",
    "ToolResultOut",
    "ToolSpecOut",
    "ToolsOut",
    "TrustChangeOut",
    "fields_doc",
    "json_response",
]

_encoder = msgspec.json.Encoder()


def json_response(value: Any, status: int = 200) -> Response:
    """``value`` as a JSON answer, encoded by msgspec (the models below only describe it)."""
    return Response(_encoder.encode(value), status_code=status, media_type="application/json")


def _no_description(schema: dict[str, Any]) -> None:
    # pydantic makes a model's docstring its schema's description: the docstrings are for
    # readers of this file, and the OpenAPI document stays as it was before they were added.
    schema.pop("description", None)


class _Documented(BaseModel):
    model_config = ConfigDict(json_schema_extra=_no_description)


class ErrorDetail(_Documented):
    """What went wrong: a stable code and a message naming the field."""

    code: str = Field(description="a stable, lowercase code: invalid_request, unauthorized, ...")
    message: str = Field(description="what was wrong, naming the field")


class ErrorResponse(_Documented):
    """The body of every refusal."""

    error: ErrorDetail


class ToolSpecOut(_Documented):
    """One tool as the caller's scope offers it."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(description="a closed JSON Schema object")


class ToolsOut(_Documented):
    """The answer of ``GET /v1/tools``."""

    tools: list[ToolSpecOut]
    as_of: int | None = Field(None, description="with a point: the tree size it names")


class ToolResultOut(_Documented):
    """A tool call's answer: where it was recorded and the tool's result."""

    run_id: str = Field(description="the run the call was recorded in")
    step: int = Field(description="the call's step in that run")
    result: dict[str, Any] = Field(description="the tool's result object")


class RunStatusOut(_Documented):
    """The answer of ``GET /v1/runs/{run_id}``."""

    run_id: str
    started_seq: int
    recorded_steps: int
    last_step: int | None
    held_here: bool
    steps_issued: int | None
    mode: str | None
    leased: bool
    #: Memo hits of the run in every process (an unsigned count, not a proof: a hit
    #: writes no entry), as added by each run's lease renewals and close.
    memo_hits: int
    #: When a process last added hits (Unix time), or None.
    last_hit_at: float | None


class TokenIn(_Documented):
    """The fields of ``POST /v1/admin/tokens`` (the options of ``memseal tokens add``)."""

    role: Literal["agent", "auditor", "admin"]
    place: str = Field(max_length=1000, description="the namespace, e.g. team:acme/agent:writer")
    reach: str | None = Field(
        None, max_length=1000, description="of:NS, subtree:NS, exact:NS or all"
    )
    read_only: bool = False
    floor: Literal["stale", "unverified", "verified"] = "unverified"
    default_trust: Literal["stale", "unverified", "verified"] | None = None
    frozen: bool = False
    allow: list[str] | None = Field(None, max_length=16)
    label: str = Field("", max_length=200)


class TokenInfoOut(_Documented):
    """A token as listed (never the token itself)."""

    id: str
    role: str
    place: str
    reach: str
    writes: bool
    floor: str
    default_trust: str
    frozen: bool
    allowlist: list[str] | None
    label: str
    created_at: str
    revoked_at: str | None


class TokenMadeOut(_Documented):
    """A token just made: the token, shown this once, and its listing."""

    token: str = Field(description="the bearer token, shown this once")
    info: TokenInfoOut


class TokensOut(_Documented):
    """The answer of ``GET /v1/admin/tokens``."""

    tokens: list[TokenInfoOut]


class ReasonIn(_Documented):
    """The body of a trust change: why."""

    reason: str = Field(min_length=1, max_length=2000)


class ForgetIn(_Documented):
    """The body of an admin's forget: the item id typed again, so no slip erases an item,
    and why (signed into the entry's payload with the token that asked)."""

    # An unknown field is refused, naming it: a misspelt ``reason`` must not forget
    # an item with no reason at all.
    model_config = ConfigDict(json_schema_extra=_no_description, extra="forbid")

    confirm: str = Field(min_length=1, max_length=200, description="the item id, again")
    reason: str = Field(
        min_length=1,
        max_length=2000,
        description=(
            "why the item is forgotten; kept in the log for good (no forget erases it), "
            "so it must not quote the forgotten text"
        ),
    )


class ForgetOut(_Documented):
    """An admin's forget: the signed memory_forgotten entries and the payloads they erased."""

    id: str
    seqs: list[int] = Field(description="the signed memory_forgotten entries")
    redacted: list[int] = Field(description="the seqs whose payloads the forget erased")


class TrustChangeOut(_Documented):
    """An item's trust change, and the signed entry recording it."""

    id: str
    trust: str
    previous: str
    seq: int | None = Field(description="the signed trust_changed entry; null if unchanged")


class LedgerOut(_Documented):
    """The answer of ``GET /v1/ledger``."""

    size: int
    origin: str
    trust_root: str = Field(description="the first key (vkey): what `memseal verify` trusts")
    vkey: str = Field(description="the current signing key (vkey)")


class EntryOut(_Documented):
    """One ledger entry as the caller may see it."""

    seq: int
    kind: str
    at: str
    entry: str = Field(description="the exact signed entry bytes, base64")
    leaf_hash: str
    signature: str = Field(description="Ed25519 signature, base64")
    header: dict[str, Any] = Field(description="the entry decoded")
    payload: str | None = Field(description="the payload bytes, base64, when within reach")
    salt: str | None
    redacted: bool | None = None
    redacted_by: int | None = Field(None, description="the signed entry that erased the payload")
    payload_withheld: bool | None = None


class EntriesOut(_Documented):
    """A page of ledger entries."""

    size: int
    entries: list[EntryOut]
    next: int | None = Field(description="the start of the next page, or null")


ERRORS: Final[dict[int | str, dict[str, Any]]] = {
    status: {"model": ErrorResponse} for status in (400, 401, 403, 404, 409, 413, 422)
}
#: A route answering text/plain on success: declared with ``response_class=Response`` (no
#: media type of its own), FastAPI lists its errors as the JSON they are, not as text/plain.
TEXT_OK: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "description": "the signed text (C2SP formats)",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


ARGUMENTS_BODY: Final[dict[str, Any]] = {
    "requestBody": {
        "required": False,
        "description": "the tool's arguments: a JSON object (see GET /v1/tools); empty means {}",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def fields_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route taking :func:`~memseal.service.deps.fields`
    (FastAPI sees none)."""
    return {
        "requestBody": {
            "required": True,
            "description": "a JSON object (any Content-Type, as on the tool routes)",
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }
