"""The days an item's text talks about, for ``refers_to``.

Extraction runs in the projection and must not depend on the host: it
stores each date *expression* an item's text mentions, not a resolved
date, because "yesterday" or "next Tuesday" only become days in a time
zone. Resolution runs at query time against the item's ``observed_at``
read in the zone the query names (the host's zone).

Expressions (``ref`` strings, sorted and unique per item):

==================  ============================================  =================
``d:YYYY-MM-DD``    a full date: 2024-03-02, March 2, 2024         that day
``m:MM-DD``         a day without a year: March 2, 2 March         in the observed year
``r:N``             today, yesterday, tomorrow, N days ago,        the observed day + N
                    in N days, N weeks ago
``w:MODE:D``        (last|this|next|on) Monday...Sunday            see :func:`resolve`
==================  ============================================  =================

An item that mentions no date is about its observed day.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Final

from memseal.ledger.errors import InvalidRequest

__all__ = ["check_zone", "extract_refs", "observed_day", "resolve"]

_MONTHS: Final = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_DAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS: Final = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a": 1,
}

_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_ISO = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d])")
_MONTH_DAY = re.compile(
    rf"\b({_MONTH})\.?\s+(\d{{1,2}}){_ORD}(?:,?\s+(\d{{4}}))?\b(?!:)", re.IGNORECASE
)
_DAY_MONTH = re.compile(
    rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})\b\.?(?:,?\s+(\d{{4}}))?", re.IGNORECASE
)
_COUNT = r"(\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|a)"
_AGO = re.compile(rf"\b{_COUNT}\s+(day|week)s?\s+ago\b", re.IGNORECASE)
_IN = re.compile(rf"\bin\s+{_COUNT}\s+(day|week)s?\b", re.IGNORECASE)
_WORDS = re.compile(
    r"\b(the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|"
    r"yesterday|today|tonight|tomorrow)\b",
    re.IGNORECASE,
)
_WORD_OFFSET: Final = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}
_WEEKDAY = re.compile(rf"\b(?:(last|this|next|on)\s+)?({'|'.join(_DAYS)})\b", re.IGNORECASE)
# Longer texts than this are read only this far: dates past it are rare and the
# projection must stay fast for documents.
_SCAN_CHARS: Final = 20_000


def _valid(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def extract_refs(text: str) -> list[str]:
    """The date expressions ``text`` mentions (see the module docstring), sorted, unique."""
    text = text[:_SCAN_CHARS]
    refs: set[str] = set()
    for m in _ISO.finditer(text):
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if _valid(year, month, day):
            refs.add(f"d:{year:04d}-{month:02d}-{day:02d}")
    for m in _MONTH_DAY.finditer(text):
        _month_ref(refs, _MONTHS[m.group(1).lower()], int(m.group(2)), m.group(3))
    for m in _DAY_MONTH.finditer(text):
        _month_ref(refs, _MONTHS[m.group(2).lower()], int(m.group(1)), m.group(3))
    for m in _WORDS.finditer(text):
        phrase = " ".join(m.group(1).lower().split())
        if phrase.startswith("the day before"):
            refs.add("r:-2")
        elif phrase.startswith("the day after"):
            refs.add("r:2")
        else:
            refs.add(f"r:{_WORD_OFFSET[phrase]}")
    for m in _AGO.finditer(text):
        n = _count(m.group(1)) * (7 if m.group(2).lower() == "week" else 1)
        refs.add(f"r:{-n}")
    for m in _IN.finditer(text):
        n = _count(m.group(1)) * (7 if m.group(2).lower() == "week" else 1)
        refs.add(f"r:{n}")
    for m in _WEEKDAY.finditer(text):
        mode = (m.group(1) or "on").lower()
        refs.add(f"w:{mode}:{_DAYS.index(m.group(2).lower())}")
    return sorted(refs)


def _month_ref(refs: set[str], month: int, day: int, year: str | None) -> None:
    if year is not None and _valid(int(year), month, day):
        refs.add(f"d:{int(year):04d}-{month:02d}-{day:02d}")
    elif year is None and _valid(2000, month, day):  # 2000 is a leap year: Feb 29 is a day
        refs.add(f"m:{month:02d}-{day:02d}")


def observed_day(observed_at: str, zone: tzinfo) -> date:
    """The local day (in ``zone``) of an RFC 3339 UTC time as the projection stores it."""
    moment = datetime.fromisoformat(observed_at.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(zone).date()


def resolve(refs: Iterable[str], observed_at: str, zone: tzinfo) -> set[date]:
    """The days ``refs`` name, read from ``observed_at`` in ``zone``; the observed day if none.

    Weekdays: ``last`` is the latest such day strictly before the observed
    day, ``next`` the first strictly after, ``this`` the one in the same
    Monday-to-Sunday week, and a bare (``on``) weekday the nearest one
    within three days either way (a note made on Monday about "Tuesday"
    means the next day; one made on Thursday means two days before).
    """
    today = observed_day(observed_at, zone)
    days: set[date] = set()
    for ref in refs:
        kind, _, rest = ref.partition(":")
        try:
            if kind == "d":
                days.add(date.fromisoformat(rest))
            elif kind == "m":
                month, day = (int(x) for x in rest.split("-"))
                if _valid(today.year, month, day):
                    days.add(date(today.year, month, day))
            elif kind == "r":
                days.add(today + timedelta(days=int(rest)))
            elif kind == "w":
                mode, _, weekday_text = rest.partition(":")
                days.add(_weekday(today, mode, int(weekday_text)))
        except (ValueError, OverflowError):
            continue  # a date past year 9999 or before year 1 names no day we can compare
    return days or {today}


def _weekday(today: date, mode: str, weekday: int) -> date:
    ahead = (weekday - today.weekday()) % 7
    if mode == "last":
        return today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    if mode == "next":
        return today + timedelta(days=ahead or 7)
    if mode == "this":
        return today + timedelta(days=weekday - today.weekday())
    return today + timedelta(days=ahead if ahead <= 3 else ahead - 7)


def check_zone(value: object, default: tzinfo) -> tzinfo:
    """The time zone dates are read in: ``value`` if a tzinfo, ``default`` if None."""
    if value is None:
        return default
    if not isinstance(value, tzinfo):
        raise InvalidRequest("`zone` must be a tzinfo, such as zoneinfo.ZoneInfo('Europe/Lisbon')")
    return value
