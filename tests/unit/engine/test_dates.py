"""refers_to: date expressions extracted from text, resolved in a zone against observed_at."""

from __future__ import annotations

from datetime import UTC, date
from zoneinfo import ZoneInfo

import pytest

from memseal.engine._dates import extract_refs, observed_day, resolve

MONDAY_NOON = "2026-11-30T12:00:00.000000Z"  # a Monday


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("Release on 2026-12-03.", ["d:2026-12-03"]),
        ("March 2, 2024 was the incident", ["d:2024-03-02"]),
        ("2 March 2024", ["d:2024-03-02"]),
        ("due Dec 5th", ["m:12-05"]),
        ("the 5th of December", ["m:12-05"]),
        ("Feb 29", ["m:02-29"]),
        ("2026-02-30 is not a day", []),
        ("yesterday and tomorrow", ["r:-1", "r:1"]),
        ("the day before yesterday", ["r:-2"]),
        ("three days ago", ["r:-3"]),
        ("in 2 weeks", ["r:14"]),
        ("see you next Friday", ["w:next:4"]),
        ("last monday", ["w:last:0"]),
        ("deploy on Tuesday", ["w:on:1"]),
        ("no dates here, just 12:30 and version 1.2.3", []),
    ],
)
def test_expressions_are_extracted(text: str, refs: list[str]) -> None:
    assert extract_refs(text) == refs


@pytest.mark.parametrize(
    ("refs", "days"),
    [
        (["r:-1"], {date(2026, 11, 29)}),
        (["r:1"], {date(2026, 12, 1)}),
        (["w:on:1"], {date(2026, 12, 1)}),  # Monday about "Tuesday": the next day
        (["w:on:5"], {date(2026, 11, 28)}),  # Monday about "Saturday": two days before
        (["w:last:0"], {date(2026, 11, 23)}),
        (["w:next:0"], {date(2026, 12, 7)}),
        (["w:this:4"], {date(2026, 12, 4)}),
        (["m:12-05"], {date(2026, 12, 5)}),
        (["m:02-29"], {date(2026, 11, 30)}),  # no Feb 29 in 2026: the observed day instead
        ([], {date(2026, 11, 30)}),
    ],
)
def test_expressions_resolve_against_the_observed_day(refs: list[str], days: set[date]) -> None:
    assert resolve(refs, MONDAY_NOON, UTC) == days


def test_the_zone_decides_which_day_yesterday_is() -> None:
    late = "2026-11-30T23:30:00.000000Z"  # Monday in UTC, already Tuesday in Tokyo
    assert observed_day(late, UTC) == date(2026, 11, 30)
    assert observed_day(late, ZoneInfo("Asia/Tokyo")) == date(2026, 12, 1)
    assert resolve(["r:-1"], late, ZoneInfo("Asia/Tokyo")) == {date(2026, 11, 30)}
    assert resolve(["r:-1"], late, UTC) == {date(2026, 11, 29)}
