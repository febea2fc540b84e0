"""The tests' clock: moved by hand, so every reading (and every entry's time) is known."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """Starts at 2026-11-30 09:00 UTC; each reading is one millisecond after the last."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def set(self, when: datetime) -> None:
        self.now = when
