"""Trust: how far a memory may be relied on, and the floor a read asks for.

The levels, lowest first: ``rejected`` < ``stale`` < ``unverified`` <
``verified``. Model writes start ``unverified``; hosts and reviewers
promote, reject or mark stale through the engine, each change a signed
``trust_changed`` entry naming who and why. A read's ``min_trust`` is the
lowest level it returns; ``rejected`` is never returned, whatever is asked.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from memseal.ledger.errors import InvalidRequest

__all__ = [
    "DEFAULT_MIN_TRUST",
    "READABLE",
    "TRUST_LEVELS",
    "Trust",
    "check_min_trust",
    "check_trust",
    "trust_rank",
]

Trust = Literal["rejected", "stale", "unverified", "verified"]

TRUST_LEVELS: Final[tuple[Trust, ...]] = get_args(Trust)
_RANK: Final[dict[str, int]] = {name: rank for rank, name in enumerate(TRUST_LEVELS)}
#: The levels a read may ask for as its floor.
READABLE: Final[tuple[Trust, ...]] = ("stale", "unverified", "verified")
DEFAULT_MIN_TRUST: Final[Trust] = "unverified"


def trust_rank(level: Trust) -> int:
    """0 for rejected up to 3 for verified (what the projection stores and compares)."""
    return _RANK[level]


def check_trust(value: object, field: str = "trust") -> Trust:
    """``value`` if it is a trust level; otherwise InvalidRequest naming ``field``."""
    if not isinstance(value, str) or value not in _RANK:
        raise InvalidRequest(f"`{field}` is not a trust level ({', '.join(TRUST_LEVELS)})")
    level: Trust = value  # type: ignore[assignment]  # checked just above
    return level


def check_min_trust(value: object, field: str = "min_trust") -> Trust:
    """A read floor: any level but ``rejected``, which no read ever returns."""
    if value == "rejected":
        raise InvalidRequest(
            f"`{field}`: rejected memory is never returned; ask for stale or above"
        )
    if not isinstance(value, str) or value not in READABLE:
        raise InvalidRequest(f"`{field}` is not one of {', '.join(READABLE)}")
    level: Trust = value
    return level
