"""The signed entries of durable runs: ``memory_tool_call``, ``run_started``, ``run_forked``.

Bodies hold structure only (ids, hashes, seqs and the result's skeleton);
payloads hold what a person or model typed (the arguments and the result's
texts), so a forget can erase them without breaking a signature.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "RUN_FORKED",
    "RUN_STARTED",
    "TOOL_CALL",
    "RunForked",
    "RunStarted",
    "ToolCall",
    "ToolCallPayload",
    "decode_tool_call",
    "decode_tool_call_payload",
]

TOOL_CALL = "memory_tool_call"
RUN_STARTED = "run_started"
RUN_FORKED = "run_forked"


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The body of a ``memory_tool_call`` entry."""

    run_id: str
    step: int
    tool: str
    memo_key: str
    fingerprint: str
    input_hash: str
    result_hash: str
    error: bool
    observed_size: int
    wrote: tuple[int, ...]
    cites: tuple[str, ...]
    supersedes: int | None
    result: Any


class ToolCallPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    arguments: Any
    texts: dict[str, list[str]]


class RunStarted(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    mode: str
    place: str
    reach: str | None
    writes: bool
    floor: str


class RunForked(msgspec.Struct, frozen=True, kw_only=True):
    """A resumed run that diverged at ``step`` and, as its host asked, went live from there."""

    run_id: str
    step: int
    recorded: str
    attempted: str


_call = msgspec.json.Decoder(ToolCall)
_payload = msgspec.json.Decoder(ToolCallPayload)


def decode_tool_call(body: bytes) -> ToolCall:
    return _call.decode(body)


def decode_tool_call_payload(payload: bytes) -> ToolCallPayload:
    return _payload.decode(payload)
