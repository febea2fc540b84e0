"""How a point's parts are read before any store is asked: times, and the HTTP counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memseal.ledger.errors import InvalidRequest
from memseal.replay.as_of import _when
from memseal.service.history import _count


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-01T12:00:00Z", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01t12:00:00z", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01T14:30:00.250+02:30", datetime(2026, 5, 1, 12, 0, 0, 250_000, tzinfo=UTC)),
        (
            datetime(2026, 5, 1, 13, tzinfo=timezone(timedelta(hours=1))),
            datetime(2026, 5, 1, 12, tzinfo=UTC),
        ),
    ],
)
def test_a_time_with_a_zone_is_read_as_utc(text: object, expected: datetime) -> None:
    assert _when(text, "at") == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-05-01T12:00:00",
        "2026-05-01",
        "noon",
        "",
        "2026-13-01T00:00:00Z",
        1_700_000_000,
        datetime(2026, 5, 1),
    ],
)
def test_a_time_without_a_zone_or_not_a_time_is_refused_naming_the_field(text: object) -> None:
    with pytest.raises(InvalidRequest, match=r"^`as_of_time` must be an RFC 3339 time"):
        _when(text, "as_of_time")


def test_an_http_count_is_digits_only() -> None:
    assert _count(None, "as_of") is None
    assert _count("0", "as_of") == 0 and _count("0042", "as_of") == 42
    for bad in ("-1", "1.0", "1e3", " 1", "١٢", "x"):
        with pytest.raises(InvalidRequest, match=r"^`as_of_step` must be a whole number"):
            _count(bad, "as_of_step")
