"""Checking a memo against its signed entry before anything in it is used.

:func:`check_memo` returns the verified call or raises
:class:`ProvenanceError` (always the message ``memory memo missing
matching signed provenance``; ``detail`` names the failed check). In order:

1. the memo row sits at the position it claims: its memo key is the key of
   (run, step);
2. the entry it points at exists and its stored leaf hash is the hash of
   its bytes;
3. the entry is a ``memory_tool_call`` signed by one of the instance's keys;
4. the body decodes and names the same memo key, run and step;
5. the result hash is the hash of the body's result skeleton;
6. a present payload matches its salted hash in the entry and its
   arguments match the input hash (a failed call keeps none); a missing payload was erased by a
   signed entry (a forget), whose seq marks the forgotten texts;
7. every text put back matches its reference in the skeleton.

Only then is the result decoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from memseal.ledger.entry import leaf_hash, payload_hash, signing_message
from memseal.ledger.errors import NotFound, ProvenanceError
from memseal.ledger.store import Record, SqlStore

from .calls import TOOL_CALL, ToolCall, decode_tool_call, decode_tool_call_payload
from .identity import input_hash, memo_key
from .memo import MemoRow
from .results import restore, result_hash

__all__ = ["Verified", "check_memo"]


class Verified(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    call: ToolCall
    arguments: Any  # None when erased by a forget
    result: Any  # with forgotten texts marked


async def check_memo(
    store: SqlStore,
    keys: Mapping[str, VerifyKey],
    secret: bytes,
    row: MemoRow,
    run_id: str,
    step: int,
) -> Verified:
    expected = memo_key(run_id, step)
    # 1. position
    if row.memo_key != expected or row.run_id != run_id or row.step != step:
        raise ProvenanceError("the memo row's key is not the key of its run and step")
    # 2. the entry
    try:
        record = await store.read(row.seq)
    except NotFound:
        raise ProvenanceError(
            f"the memo points at seq {row.seq}, which is not in the log"
        ) from None
    if leaf_hash(record.leaf) != record.leaf_hash:
        raise ProvenanceError("the entry's stored hash is not its hash", seq=row.seq)
    call, entry_payload_hash = _signed_call(record, keys)
    # 4. body
    if call.memo_key != expected or call.run_id != run_id or call.step != step:
        raise ProvenanceError("the signed entry belongs to another run or step", seq=row.seq)
    # 5. result hash
    if result_hash(call.result) != call.result_hash:
        raise ProvenanceError("the result does not match the signed result hash", seq=row.seq)
    # 6. payload
    arguments: Any = None
    texts: dict[str, list[str]] | None = None
    forgotten_at: int | None = None
    if record.payload is not None:
        if (
            entry_payload_hash is None
            or record.salt is None
            or payload_hash(record.salt, record.payload) != entry_payload_hash
        ):
            raise ProvenanceError("the payload does not match its signed hash", seq=row.seq)
        try:
            payload = decode_tool_call_payload(record.payload)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            raise ProvenanceError("the payload is malformed", seq=row.seq) from None
        withheld = payload.arguments is None and call.error and call.input_size is not UNSET
        # A failed call keeps no arguments (calls.py): its input hash stands alone.
        if not withheld and input_hash(secret, payload.arguments) != call.input_hash:
            raise ProvenanceError("the arguments do not match the input hash", seq=row.seq)
        arguments, texts = payload.arguments, payload.texts
    elif entry_payload_hash is not None:
        forgotten_at = await store.redacted_by(row.seq)
        if forgotten_at is None:
            raise ProvenanceError("the payload is gone and no signed entry erased it", seq=row.seq)
    # 7. texts
    try:
        result = restore(call.result, texts, forgotten_at)
    except ValueError as exc:
        raise ProvenanceError(str(exc), seq=row.seq) from None
    return Verified(seq=row.seq, call=call, arguments=arguments, result=result)


def _signed_call(record: Record, keys: Mapping[str, VerifyKey]) -> tuple[ToolCall, str | None]:
    # 3. a memory_tool_call signed by one of our keys
    try:
        entry = record.entry()
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        raise ProvenanceError("the entry does not decode", seq=record.seq) from None
    if entry.kind != TOOL_CALL or entry.seq != record.seq:
        raise ProvenanceError(f"seq {record.seq} is not a memory_tool_call", seq=record.seq)
    key = keys.get(entry.key)
    if key is None:
        raise ProvenanceError(f"signed by key {entry.key}, not ours", seq=record.seq)
    try:
        key.verify(signing_message(record.leaf_hash), record.signature)
    except (BadSignatureError, ValueError, TypeError):
        raise ProvenanceError("the signature does not verify", seq=record.seq) from None
    try:
        return decode_tool_call(bytes(entry.body)), entry.payload_hash
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ProvenanceError("the body is not a tool call", seq=record.seq) from None
