"""The ledger's ``mentions`` index against the signed entries (run by ``verify``).

A forget finds the payloads to erase through ``mentions``; a row deleted from
it would let a forget leave the forgotten text in a payload while the log
still verified. Each entry's item refs are implied by its signed body: a
``memory_stored`` or ``trust_changed`` entry mentions its item, a
successful ``memory_tool_call`` the ids it cites. An entry whose payload is
gone mentions nothing; one a forget cut to a residue mentions the owners of the texts it
kept. Keyed facet refs (``facet:...``, an explore's bucket
values) need the instance secret: :func:`check_facet_mentions` compares them
under ``verify --deep``. The rows of kinds memseal does not write (a host's own
``ledger.append``) are not compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from memseal.engine.explore import CLOSED_FACETS
from memseal.ledger.entry import RESIDUE_SALT, Entry, decode_residue, text_owners
from memseal.ledger.errors import VerificationError
from memseal.ledger.store import Record, SqlStore

from .calls import decode_tool_call, decode_tool_call_payload
from .results import restore

__all__ = ["MentionsWanted", "check_facet_mentions", "check_mentions"]

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


class MentionsWanted:
    """The item refs the signed entries imply, collected entry by entry in one scan."""

    def __init__(self) -> None:
        self.wanted: dict[int, set[str]] = {}
        self.ours: set[int] = set()

    def add(self, record: Record, entry: Entry | None = None, body: Any = None) -> None:
        """Note what ``record`` implies; ``entry`` and ``body`` are its decoded entry and
        body, if the caller has them."""
        # 1. what each entry of ours implies (nothing once its payload is erased)
        try:
            entry = record.entry() if entry is None else entry
            body = msgspec.json.decode(bytes(entry.body)) if body is None else body
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return
        if entry.kind not in _OURS:
            return
        self.ours.add(record.seq)
        if record.payload is not None and record.salt == RESIDUE_SALT:
            # A forget cut this payload: what it kept is indexed under the kept texts' owners.
            owners = text_owners(body)
            try:
                kept = decode_residue(bytes(record.payload))
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                kept = {}
            refs = {o for ref in kept if (o := owners.get(ref)) is not None}
            if refs:
                self.wanted[record.seq] = refs
        elif record.payload is not None:
            refs = _implied(entry.kind, body)
            if refs:
                self.wanted[record.seq] = refs

    async def check(self, store: SqlStore) -> None:
        """Raise :class:`VerificationError` (step ``mentions``) unless the table's item refs
        are exactly those collected."""
        found: dict[int, set[str]] = {}
        for ref, seq in await store.rows("SELECT ref, seq FROM mentions ORDER BY seq"):
            if not str(ref).startswith("facet:"):
                found.setdefault(int(seq), set()).add(str(ref))
        wanted, ours = self.wanted, self.ours
        # The common case, all rows as they should be, in one comparison (no set in either
        # map is empty, and every seq of ``wanted`` is one of ours).
        if {seq: refs for seq, refs in found.items() if seq in ours} == wanted:
            return
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


async def check_mentions(store: SqlStore, size: int) -> None:
    """Raise :class:`VerificationError` (step ``mentions``) unless the table's item refs
    are exactly those the first ``size`` signed entries imply."""
    collected = MentionsWanted()
    async for record in store.scan(0, size):
        collected.add(record)
    await collected.check(store)


async def check_facet_mentions(
    store: SqlStore, size: int, facet_ref: Callable[[str, str], str]
) -> None:
    """Raise :class:`VerificationError` (step ``mentions``) unless the keyed facet refs in
    ``mentions`` are exactly those the first ``size`` entries' explore results imply.

    A forget finds a recorded explore through these refs (one per bucket value of an
    open facet, keyed with the instance secret, so this check needs ``facet_ref``: it
    runs under ``verify --deep``). A deleted row would let a forget leave a forgotten
    tag in that explore's payload.
    """
    found: dict[int, set[str]] = {}
    for ref, seq in await store.rows(
        "SELECT ref, seq FROM mentions WHERE ref LIKE ? ORDER BY seq", ("facet:%",)
    ):
        found.setdefault(int(seq), set()).add(str(ref))
    # 1. the refs each intact explore result implies (the values its buckets show)
    wanted: dict[int, set[str]] = {}
    async for record in store.scan(0, size):
        entry = record.entry()
        if entry.kind != "memory_tool_call" or record.payload is None:
            continue
        if record.salt == RESIDUE_SALT:
            continue  # a forget cut it: the bucket values (owned by no item) went first
        try:
            call = decode_tool_call(bytes(entry.body))
            payload = decode_tool_call_payload(bytes(record.payload))
            result = restore(call.result, payload.texts, None)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError):
            continue  # the ledger's verify and the memo check own malformed calls
        if call.tool != "memory_explore" or call.error or not isinstance(result, dict):
            continue
        facet, buckets = result.get("facet"), result.get("buckets")
        if isinstance(facet, str) and facet not in CLOSED_FACETS and isinstance(buckets, list):
            refs = {
                facet_ref(facet, b["value"])
                for b in buckets
                if isinstance(b, dict) and isinstance(b.get("value"), str)
            }
            if refs:
                wanted[record.seq] = refs
    # 2. missing and extra facet rows, plainly
    for seq in sorted(set(found) | set(wanted)):
        missing = wanted.get(seq, set()) - found.get(seq, set())
        extra = found.get(seq, set()) - wanted.get(seq, set())
        if missing or extra:
            raise VerificationError(
                f"the mentions table disagrees with the explore at seq {seq}: "
                f"{len(missing)} facet ref(s) missing, {len(extra)} extra "
                "(a forget would leave a forgotten tag in its payload)",
                seq=seq,
                step="mentions",
            )
