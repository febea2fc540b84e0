"""How a point's parts are read before any store is asked: times, and the counts.

Times are RFC 3339's date-time and nothing else (``datetime.fromisoformat`` also took
week dates, hour-only times and comma fractions); one parser serves Python, HTTP and
the CLI. Counts are ASCII digits, in the HTTP query and on the command line alike.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memseal.apps.as_of import _when, parse_count, parse_rfc3339
from memseal.cli.main import main
from memseal.ledger.errors import InvalidRequest


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


def test_a_count_is_ascii_digits_only() -> None:
    assert parse_count(None, "as_of") is None
    assert parse_count("0", "as_of") == 0 and parse_count("0042", "as_of") == 42
    for bad in ("-1", "+1", "1_0", "1.0", "1e3", " 1", "١٢", "x", ""):
        with pytest.raises(InvalidRequest, match=r"^`as_of_step` must be a whole number"):
            parse_count(bad, "as_of_step")


@pytest.mark.parametrize(
    "text",
    [
        "2026-W01-1T00:00:00Z",  # an ISO week date
        "2026-W01-1",
        "2026-123T00:00:00Z",  # an ISO ordinal date
        "2026-05-01T12Z",  # the hour alone
        "2026-05-01T12:00Z",  # no seconds
        "2026-05-01T12:00:00,5Z",  # a comma fraction
        "2026-05-01T12:00:00.Z",  # a point with no digits
        "2026-05-01 12:00:00Z",  # a space for the T
        "20260501T120000Z",  # ISO 8601's basic format
        "2026-05-01T12:00:00+0200",
        "2026-05-01T12:00:00+02",
        "2026-05-01T12:00:00+24:00",
        "2026-05-01T12:00:00+02:60",
        "2026-05-01T24:00:00Z",
        "2026-02-29T00:00:00Z",
        "２０２６-05-01T12:00:00Z",  # fullwidth digits
        "2026-05-01T12:00:00Z ",
    ],
)
def test_only_rfc_3339_is_a_time(text: str) -> None:
    with pytest.raises(InvalidRequest, match=r"^`at` must be an RFC 3339 time"):
        parse_rfc3339(text, "at")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Entry times are whole microseconds: the digits past them change no "at or before".
        ("2026-05-01T12:00:00.1234569Z", datetime(2026, 5, 1, 12, 0, 0, 123_456, tzinfo=UTC)),
        ("2026-05-01T12:00:00.000000999Z", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01T12:00:00.5Z", datetime(2026, 5, 1, 12, 0, 0, 500_000, tzinfo=UTC)),
        ("2026-05-01T12:00:00-00:00", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01t12:00:00+02:00", datetime(2026, 5, 1, 10, tzinfo=UTC)),
    ],
)
def test_fractions_and_zones(text: str, expected: datetime) -> None:
    assert parse_rfc3339(text, "at") == expected


@pytest.mark.parametrize(
    "text", ["2016-12-31T23:59:60Z", "2016-12-31t23:59:60.5z", "1990-12-31T15:59:60-08:00"]
)
def test_a_leap_second_is_the_last_microsecond_of_its_minute(text: str) -> None:
    # No entry time is ever :60, so the entries at or before the leap second are those at
    # or before the microsecond before it ends.
    end = datetime(int(text[:4]), 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    assert parse_rfc3339(text, "as_of_time") == end


@pytest.mark.parametrize(
    "text", ["2016-12-30T23:59:60Z", "2026-05-01T12:00:60Z", "2016-12-31T23:59:60+01:00"]
)
def test_a_leap_second_anywhere_else_is_refused_by_name(text: str) -> None:
    with pytest.raises(InvalidRequest, match=r"^`as_of_time`: a leap second \(:60\) falls only"):
        parse_rfc3339(text, "as_of_time")


@pytest.mark.parametrize("option", [["--as-of", "+3"], ["--as-of", "٣"], ["--step", "1_0"]])
def test_the_cli_reads_counts_as_http_does(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["show", "--data", "unused", *option])
    assert exited.value.code == 2
    assert f"`{option[0]}` must be a whole number" in capsys.readouterr().err
