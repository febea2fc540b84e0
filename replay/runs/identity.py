"""What identifies a recorded step: its memo key (position) and fingerprint (identity).

* The **memo key** is blake3 of the canonical JSON array
  ``["memseal/memo/v1", run_id, step]``: a step is found by its position in
  its run, as durable-execution systems key steps.
* The **fingerprint** is blake3 keyed with the instance secret over the
  canonical ``[tool, arguments as sent, place, reach, writes, floor]``: what
  the step *was*. A different fingerprint at a recorded position is a
  divergence. ``revalidate`` is never part of it: it is how the host asks,
  not what the model asked.
* The **scope identity** (:class:`ScopeIdentity`) is the whole scope a run
  belongs to: the four fields above and the default trust, the freeze and
  the allow list. A run records it in its ``run_started`` entry and refuses
  a caller whose scope differs in any field, so the fingerprint needs no
  more of it: within one run those fields never change. (The fingerprint
  keeps its four fields so that every run recorded before the scope was
  recorded whole still resumes and replays.)
* The **input hash** is the keyed blake3 of the arguments alone. Keyed, so
  neither hash can confirm a guessed argument text after a forget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import blake3
import msgspec

from memseal.tools.scope import ToolScope

__all__ = [
    "BASE_FIELDS",
    "MEMO_CONTEXT",
    "SCOPE_FIELDS",
    "ScopeIdentity",
    "fingerprint",
    "input_hash",
    "memo_key",
]

MEMO_CONTEXT = "memseal/memo/v1"
_encoder = msgspec.json.Encoder(order="deterministic")


#: The fields every ``run_started`` entry has recorded since runs were first signed.
BASE_FIELDS = ("place", "reach", "writes", "floor")
#: The rest of the scope, recorded since a run is bound to its whole scope.
SCOPE_FIELDS = (*BASE_FIELDS, "default_trust", "frozen", "allowlist")


class ScopeIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """The whole host-fixed scope a run belongs to (every field of a ToolScope)."""

    place: str
    reach: str | None
    writes: bool
    floor: str
    # ToolScope's defaults; ScopeIdentity.of(scope) sets every field.
    default_trust: str = "unverified"
    frozen: bool = False
    allowlist: tuple[str, ...] | None = None

    @classmethod
    def of(cls, scope: ToolScope) -> ScopeIdentity:
        """The parts of ``scope`` that a call's fingerprint covers."""
        reach = scope.reach
        return cls(
            place=scope.place,
            reach=None if reach is None else f"{reach.mode}:{reach.node}",
            writes=scope.writes,
            floor=scope.floor,
            default_trust=scope.default_trust,
            frozen=scope.frozen,
            allowlist=scope.allowlist,
        )

    def as_list(self) -> list[Any]:
        """The fingerprint's part of the scope (see the module docstring)."""
        return [self.place, self.reach, self.writes, self.floor]

    def recorded(self) -> dict[str, Any]:
        """The fields a ``run_started`` entry records (JSON values: the allow list a list)."""
        allow = None if self.allowlist is None else list(self.allowlist)
        return {**{f: getattr(self, f) for f in SCOPE_FIELDS[:-1]}, "allowlist": allow}

    def differs_from(self, recorded: Mapping[str, Any]) -> list[str]:
        """The fields in which a recorded scope (a ``run_started`` body) differs from this one.

        A field the entry does not hold (a run recorded before the whole scope was) is not
        compared: that run's four base fields are all that is known of its scope.
        """
        mine = self.recorded()
        return [
            f
            for f in SCOPE_FIELDS
            if (f in BASE_FIELDS or f in recorded) and recorded.get(f) != mine[f]
        ]


def memo_key(run_id: str, step: int) -> str:
    """The memo key of a run's step: the same run and step always map to the same key."""
    return blake3.blake3(_encoder.encode([MEMO_CONTEXT, run_id, step])).hexdigest()


def _derive(secret: bytes, context: str) -> bytes:
    # One subkey per use, so a fingerprint can never be passed off as an input hash.
    return blake3.blake3(secret, derive_key_context=f"memseal 2026 {context}").digest()


def fingerprint(
    secret: bytes, tool: str, arguments: Any, scope: ScopeIdentity, call_key: str | None = None
) -> str:
    """A keyed hash of a call (tool, arguments, scope, and its call key if it has one):
    a replay must send the same one. An unkeyed call's is what it has always been."""
    key = _derive(secret, "replay fingerprint v1")
    # The scope list has a fixed length, so the key appended after it is unambiguous.
    fields = [tool, arguments, *scope.as_list()]
    data = _encoder.encode(fields if call_key is None else [*fields, call_key])
    return blake3.blake3(data, key=key).hexdigest()


def input_hash(secret: bytes, arguments: Any) -> str:
    """A keyed hash of a call's arguments, kept signed after the arguments are erased."""
    key = _derive(secret, "replay input hash v1")
    return blake3.blake3(_encoder.encode(arguments), key=key).hexdigest()
