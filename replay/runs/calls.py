"""The signed entries of durable runs: ``memory_tool_call``, ``run_started``, ``run_forked``.

Bodies hold structure only (ids, hashes, seqs and the result's skeleton);
payloads hold what a person or model typed (the arguments and the result's
texts), so a forget can erase them without breaking a signature.

A call that failed (refused, invalid, an error the model can act on) keeps
no arguments: its payload's ``arguments`` is null and ``withheld`` holds a
salted digest of them (what a bundle replay matches the call against), its
body ``input_size`` their size in bytes. Such arguments mention no item, so
no forget could ever reach them; a refused call must cost neither storage
nor privacy. Entries recorded before this kept the arguments, and still
verify and replay.

A keyed call (one that carried the id its model gave the tool call) has
its ``key`` in the signed body; an unkeyed call's body has no ``key`` field
at all, so its bytes are exactly those of the calls recorded before keys.
A call whose reads followed the engine's currency rule carries the rule's
version as ``currency``, likewise absent otherwise: a re-derivation follows
it (``memseal.engine.currency.following``), and a call recorded before the
rule re-derives without it.

``run_started`` records the whole scope the run belongs to; one recorded
before that holds only ``place``, ``reach``, ``writes`` and ``floor``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from memseal.engine import Reach
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.tools import ToolScope

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
    "forget_arguments",
    "marked_forget",
    "scope_of",
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
    # Set on a failed call only: the size of the arguments it kept no copy of.
    input_size: int | UnsetType = UNSET
    # Set on a keyed call only: the id the model gave the tool call (1 to 200 characters).
    key: str | UnsetType = UNSET
    # Set on a call whose reads followed the currency rule: its version (engine/currency.py).
    # Absent, as on every call recorded before the rule, its reads re-derive without it.
    currency: int | UnsetType = UNSET


class ToolCallPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The erasable part of a tool call: arguments and the result's texts."""

    arguments: Any  # null for a failed call (see the module docstring)
    texts: dict[str, list[str]]
    # A failed call: [salt hex, blake3(salt + canonical arguments) hex].
    withheld: list[str] | UnsetType = UNSET


class RunStarted(msgspec.Struct, frozen=True, kw_only=True):
    """The signed body of a ``run_started`` entry: a run's id, mode and the scope it runs in."""

    run_id: str
    mode: str
    place: str
    reach: str | None
    writes: bool
    floor: str
    # Absent from runs recorded before a run was bound to its whole scope.
    default_trust: str | UnsetType = UNSET
    frozen: bool | UnsetType = UNSET
    allowlist: list[str] | UnsetType | None = UNSET
    # What the run is to memseal's lifecycle (``session/thread``, ``session/model``,
    # ``job``, ``job-queue``, ``retraction``, ``brain``...), recorded by the layer that
    # opened it so a reader need not guess from the run id. Absent from plain runs and
    # from every run recorded before it existed (a reader shows those as plain).
    lifecycle: str | UnsetType = UNSET


def scope_of(started: RunStarted) -> ToolScope:
    """The scope a ``run_started`` body records: VerificationError (step ``run``) when it
    names an unknown reach or an invalid scope.

    The one reading of a recorded scope: bundle replay, ``--update`` and read proofs
    all call it, so a proof and a replay can never re-derive a read in two scopes.
    """
    reach = None
    if started.reach is not None:
        mode, _, node = started.reach.partition(":")
        makers: dict[str, Callable[[str], Reach]] = {
            "of": Reach.of,
            "subtree": Reach.subtree,
            "exact": Reach.exact,
        }
        if mode not in makers:
            raise VerificationError(
                f"run_started names an unknown reach {started.reach!r}", step="run"
            )
        reach = makers[mode](node)
    # A run records its whole scope; one recorded before that holds place, reach, writes
    # and floor only, and its default trust is taken as the floor.
    fields: dict[str, Any] = {"default_trust": started.floor}
    for name in ("default_trust", "frozen", "allowlist"):
        value = getattr(started, name)
        if value is not msgspec.UNSET:
            fields[name] = None if value is None else value
    try:
        return ToolScope(
            place=started.place,
            reach=reach,
            writes=started.writes,
            floor=started.floor,  # type: ignore[arg-type]
            **fields,
        )
    except InvalidRequest as exc:
        raise VerificationError(f"run_started names an invalid scope: {exc}", step="run") from None


class RunForked(msgspec.Struct, frozen=True, kw_only=True):
    """A resumed run that diverged at ``step`` and, as its host asked, went live from there."""

    run_id: str
    step: int
    recorded: str
    attempted: str


#: The filter fields of a forget whose values name what it forgot (see the module docstring).
NAMING_FILTER_FIELDS: Final = frozenset(
    {"tags_any", "workspace", "folder", "file_path", "repo", "url", "thread_id", "agent_id"}
)
FORGET_TOOL: Final = "memory_forget"


def forget_arguments(arguments: Any, forgotten_at: int) -> Any:
    """A forget's ``arguments`` as recorded: the naming filter values marked forgotten."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("filter"), dict):
        return arguments
    picked = {
        k: {"forgotten_at": forgotten_at} if k in NAMING_FILTER_FIELDS and v is not None else v
        for k, v in arguments["filter"].items()
    }
    return {**arguments, "filter": picked}


def marked_forget(tool: str, error: bool, arguments: Any) -> bool:
    """Whether recorded ``arguments`` are a forget's, marked by :func:`forget_arguments`."""
    if tool != FORGET_TOOL or error or not isinstance(arguments, dict):
        return False
    picked = arguments.get("filter")
    return isinstance(picked, dict) and any(
        isinstance(v, dict) and set(v) == {"forgotten_at"} for v in picked.values()
    )


_call = msgspec.json.Decoder(ToolCall)
_payload = msgspec.json.Decoder(ToolCallPayload)


def decode_tool_call(body: bytes) -> ToolCall:
    """Decode a ``tool_call`` entry body strictly."""
    return _call.decode(body)


def decode_tool_call_payload(payload: bytes) -> ToolCallPayload:
    """Decode a ``tool_call`` payload strictly (unknown fields refused)."""
    return _payload.decode(payload)
