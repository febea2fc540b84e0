"""Filters and date hints: what a read may narrow by, checked before anything runs.

:class:`Filter` is the seed's model-facing filter: ``kinds``, ``sources``
(source kinds), ``tags_any``, ``workspace``, ``folder``, ``file_path``,
``repo``, ``url``, ``thread_id``, ``agent_id``, ``observed_after`` and
``observed_before`` (RFC 3339 times; after is inclusive, before exclusive).
It never carries a namespace or a reach: those come from the host.

:class:`DateRange` is ``refers_to``: ``{from, to}`` local dates
(``YYYY-MM-DD``, inclusive) that a question is about.

:func:`check_filter` and :func:`check_date_range` accept the structs or the
plain JSON objects a tool call carries, and raise :class:`InvalidRequest`
naming the field for anything else.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any, Final

import msgspec

from memseal.ledger.entry import format_time
from memseal.ledger.errors import InvalidRequest

from ._convert import convert
from .items import ITEM_KINDS, MAX_META_CHARS, MAX_TAG_CHARS, check_kind, clean_text

__all__ = [
    "EQUALITY_FACETS",
    "DateRange",
    "Filter",
    "check_date_range",
    "check_filter",
    "parse_time",
]

_MAX_VALUES: Final = 50
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SOURCE = re.compile(r"[a-z][a-z0-9_.-]{0,31}")


class Filter(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Narrows a read (or picks what a forget removes); every field optional."""

    kinds: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    tags_any: tuple[str, ...] | None = None
    workspace: str | None = None
    folder: str | None = None
    file_path: str | None = None
    repo: str | None = None
    url: str | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    observed_after: str | None = None
    observed_before: str | None = None

    def is_empty(self) -> bool:
        """Whether no field of the filter is set (the query is not narrowed)."""
        return all(getattr(self, name) is None for name in self.__struct_fields__)


#: Filter fields that match one facet value each, with the facet they read.
EQUALITY_FACETS: Final = (
    ("workspace", "workspace"),
    ("folder", "folder"),
    ("file_path", "file_path"),
    ("repo", "repo"),
    ("url", "url"),
    ("thread_id", "thread"),
    ("agent_id", "agent"),
)


class DateRange(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename={"start": "from", "end": "to"},
):
    """``refers_to``: the local days (inclusive) a question is about; ``from``/``to`` in JSON."""

    start: str
    end: str

    @property
    def first(self) -> date:
        """The range's first day."""
        return date.fromisoformat(self.start)

    @property
    def last(self) -> date:
        """The range's last day (inclusive)."""
        return date.fromisoformat(self.end)


def parse_time(value: object, field: str) -> str:
    """An RFC 3339 time (or an aware datetime) as the projection's fixed-width UTC text."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidRequest(f"`{field}` must carry a time zone")
        return format_time(value)
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise InvalidRequest(f"`{field}` is not an RFC 3339 time like 2026-11-30T09:00:00Z")
    text = value.upper().replace("Z", "+00:00").replace(" ", "T")
    # Python parses at most microseconds; finer digits only ever round down here.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(f"`{field}` is not a valid date and time") from None
    return format_time(moment.astimezone(UTC))


def _values(value: tuple[str, ...] | None, field: str, limit: int) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not value:
        raise InvalidRequest(f"`{field}` must list at least one value")
    if len(value) > _MAX_VALUES:
        raise InvalidRequest(f"`{field}` lists {len(value)} values; at most {_MAX_VALUES}")
    return tuple(dict.fromkeys(clean_text(v, f"{field}[{i}]", limit) for i, v in enumerate(value)))


def check_filter(value: object, field: str = "filter") -> Filter:
    """A clean :class:`Filter` (times normalised to UTC) or :class:`InvalidRequest`."""
    if value is None:
        return Filter()
    raw = value if isinstance(value, Filter) else convert(value, Filter, field)
    cleaned: dict[str, Any] = {}
    if raw.kinds is not None:
        kinds = _values(raw.kinds, f"{field}.kinds", 64) or ()
        for i, kind in enumerate(kinds):
            check_kind(kind, f"{field}.kinds[{i}]", ITEM_KINDS)
        cleaned["kinds"] = kinds
    if raw.sources is not None:
        sources = _values(raw.sources, f"{field}.sources", 32) or ()
        for i, source in enumerate(sources):
            if not _SOURCE.fullmatch(source):
                raise InvalidRequest(f"`{field}.sources[{i}]` is not a source kind")
        cleaned["sources"] = sources
    if raw.tags_any is not None:
        cleaned["tags_any"] = _values(raw.tags_any, f"{field}.tags_any", MAX_TAG_CHARS)
    for name, _facet in EQUALITY_FACETS:
        text = getattr(raw, name)
        if text is not None:
            cleaned[name] = clean_text(text, f"{field}.{name}", MAX_META_CHARS)
    for name in ("observed_after", "observed_before"):
        moment = getattr(raw, name)
        if moment is not None:
            cleaned[name] = parse_time(moment, f"{field}.{name}")
    after, before = cleaned.get("observed_after"), cleaned.get("observed_before")
    if after is not None and before is not None and after >= before:
        raise InvalidRequest(f"`{field}.observed_after` must be before `{field}.observed_before`")
    return Filter(**cleaned)


def check_date_range(value: object, field: str = "refers_to") -> DateRange | None:
    """``value`` as a checked DateRange (start not after end), or None."""
    if value is None:
        return None
    raw = value if isinstance(value, DateRange) else convert(value, DateRange, field)
    for name, text in (("from", raw.start), ("to", raw.end)):
        if not isinstance(text, str) or not _DATE.fullmatch(text):
            raise InvalidRequest(f"`{field}.{name}` is not a date like 2026-11-30")
        try:
            date.fromisoformat(text)
        except ValueError:
            raise InvalidRequest(f"`{field}.{name}` is not a calendar date") from None
    if raw.start > raw.end:
        raise InvalidRequest(f"`{field}.from` must not be after `{field}.to`")
    return raw
