"""A plain progress line on a terminal; silent when the output is not one."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressLine"]


class ProgressLine:
    """Call with (done, total); redraws at most ten times a second."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._label = label
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = self._stream.isatty()
        self._last = 0.0
        self._start = time.monotonic()
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        share = done / total if total else 1.0
        rate = done / max(now - self._start, 1e-9)
        bar = "#" * int(share * 30)
        self._stream.write(
            f"\r{self._label} [{bar:<30}] {done:,}/{total:,} ({share:.0%}, {rate:,.0f}/s)"
        )
        self._drawn = True
        if done >= total:
            self.close()

    def close(self) -> None:
        """End the line drawn so far (if any), so the next output starts on its own line."""
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False
