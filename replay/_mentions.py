"""The ledger's ``mentions`` index against the signed entries (run by ``verify``).

A forget finds the payloads to erase through ``mentions``; a row deleted from
it would let a forget leave the forgotten text in a payload while the log
still verified. Each entry's item refs are implied by its signed body: a
``memory_stored`` or ``trust_changed`` entry mentions its item, a
successful ``memory_tool_call`` the ids it cites. An entry whose payload is
gone mentions nothing; one a forget cut to a residue mentions the owners of the texts it
kept. Keyed facet refs (``facet:...``, an explore's bucket
values) need the instance secret and are not compared here; nor are the rows
of kinds memseal does not write (a host's own ``ledger.append``).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from memseal.ledger.entry import RESIDUE_SALT, decode_residue, text_owners
from memseal.ledger.errors import VerificationError
from memseal.ledger.store import SqlStore

__all__ = ["check_mentions"]

_OURS: Final = frozenset(
    {
        "memory_stored",
        "memory_forgotten",
        "trust_changed",
        "memory_tool_call",
        "run_started",
        "run_forked",
        "key_rotated",
    }
)


def _implied(kind: str, body: Any) -> set[str]:
    if not isinstance(body, dict):
        return set()
    if kind in ("memory_stored", "trust_changed") and isinstance(body.get("item"), str):
        return {body["item"]}
    if kind == "memory_tool_call" and not body.get("error") and isinstance(body.get("cites"), list):
        return {c for c in body["cites"] if isinstance(c, str)}
    return set()


async def check_mentions(store: SqlStore, size: int) -> None:
    """Raise :class:`VerificationError` (step ``mentions``) unless the table's item refs
    are exactly those the first ``size`` signed entries imply."""
    found: dict[int, set[str]] = {}
    for ref, seq in await store.rows("SELECT ref, seq FROM mentions ORDER BY seq"):
        if not str(ref).startswith("facet:"):
            found.setdefault(int(seq), set()).add(str(ref))
    # 1. what each entry of ours implies (nothing once its payload is erased)
    wanted: dict[int, set[str]] = {}
    ours: set[int] = set()
    async for record in store.scan(0, size):
        try:
            entry = record.entry()
            body = msgspec.json.decode(bytes(entry.body))
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            continue
        if entry.kind not in _OURS:
            continue
        ours.add(record.seq)
        if record.payload is not None and record.salt == RESIDUE_SALT:
            # A forget cut this payload: what it kept is indexed under the kept texts' owners.
            owners = text_owners(body)
            try:
                kept = decode_residue(bytes(record.payload))
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                kept = {}
            refs = {o for ref in kept if (o := owners.get(ref)) is not None}
            if refs:
                wanted[record.seq] = refs
        elif record.payload is not None:
            refs = _implied(entry.kind, body)
            if refs:
                wanted[record.seq] = refs
    # 2. missing and extra rows, plainly
    for seq in sorted((set(found) & ours) | set(wanted)):
        missing = wanted.get(seq, set()) - found.get(seq, set())
        extra = found.get(seq, set()) - wanted.get(seq, set())
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"{len(missing)} missing ({', '.join(sorted(missing))})")
            if extra:
                parts.append(f"{len(extra)} extra ({', '.join(sorted(extra))})")
            raise VerificationError(
                f"the mentions table disagrees with the signed entry at seq {seq}: "
                f"{'; '.join(parts)} (a forget would miss or misplace its payload)",
                seq=seq,
                step="mentions",
            )
