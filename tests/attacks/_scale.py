"""How hard the standing attack suites push: ``MEMSEAL_ATTACK_SCALE`` (default 1).

At 1 every suite is sized for CI, well under a minute each on a 2-core machine.
A larger whole number multiplies each suite's load (writers' rounds, rotations,
calls in flight, tamper samples, injection strings), for a longer soak run by
hand: ``MEMSEAL_ATTACK_SCALE=20 make test`` or one file with pytest.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["SCALE"]


def _scale() -> int:
    raw = os.environ.get("MEMSEAL_ATTACK_SCALE", "1")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"MEMSEAL_ATTACK_SCALE must be a whole number, not {raw!r}") from None
    if value < 1:
        raise ValueError(f"MEMSEAL_ATTACK_SCALE must be at least 1, not {value}")
    return value


SCALE: Final = _scale()
