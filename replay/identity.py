"""What identifies a recorded step: its memo key (position) and fingerprint (identity).

* The **memo key** is blake3 of the canonical JSON array
  ``["memseal/memo/v1", run_id, step]``: a step is found by its position in
  its run, as durable-execution systems key steps.
* The **fingerprint** is blake3 keyed with the instance secret over the
  canonical ``[tool, arguments as sent, place, reach, writes, floor]``: what
  the step *was*. A different fingerprint at a recorded position is a
  divergence. ``revalidate`` is never part of it: it is how the host asks,
  not what the model asked.
* The **input hash** is the keyed blake3 of the arguments alone. Keyed, so
  neither hash can confirm a guessed argument text after a forget.
"""

from __future__ import annotations

from typing import Any

import blake3
import msgspec

__all__ = ["MEMO_CONTEXT", "ScopeIdentity", "fingerprint", "input_hash", "memo_key"]

MEMO_CONTEXT = "memseal/memo/v1"
_encoder = msgspec.json.Encoder(order="deterministic")


class ScopeIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """The parts of a tool scope that change what a call means."""

    place: str
    reach: str | None
    writes: bool
    floor: str

    def as_list(self) -> list[Any]:
        return [self.place, self.reach, self.writes, self.floor]


def memo_key(run_id: str, step: int) -> str:
    return blake3.blake3(_encoder.encode([MEMO_CONTEXT, run_id, step])).hexdigest()


def _derive(secret: bytes, context: str) -> bytes:
    # One subkey per use, so a fingerprint can never be passed off as an input hash.
    return blake3.blake3(secret, derive_key_context=f"memseal 2026 {context}").digest()


def fingerprint(secret: bytes, tool: str, arguments: Any, scope: ScopeIdentity) -> str:
    key = _derive(secret, "replay fingerprint v1")
    data = _encoder.encode([tool, arguments, *scope.as_list()])
    return blake3.blake3(data, key=key).hexdigest()


def input_hash(secret: bytes, arguments: Any) -> str:
    key = _derive(secret, "replay input hash v1")
    return blake3.blake3(_encoder.encode(arguments), key=key).hexdigest()
