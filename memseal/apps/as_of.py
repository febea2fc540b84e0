"""The memory as of any point: a read-only view of the log prefix's projection.

``await memory.as_of(size=N)`` (or ``at="2026-05-01T12:00:00Z"``, or ``run="R",
step=S``) names a point of the log and returns an :class:`AsOfView`; its
``tools(scope)`` serve the five read tools (recall, fetch, list, get, explore)
over the memory as it stood at tree size ``N``, and refuse memory_store and
memory_forget. A point is served by the host, never the model: it is a Python
argument (here, ``SyncMemory.as_of``, the lifecycle's ``as_of=``), an HTTP query
parameter (the read routes, the MCP endpoint's URL), a CLI option (``memseal
show``, ``memseal mcp --as-of``), and never a tool argument. How a view is built,
and how forgets reach it, is :mod:`._as_of_build`.
Reads of a view are not recorded (they change no memory and belong to no run).

Points:

* ``size=N``: the first ``N`` entries (``0 <= N <=`` the live size);
* ``at=T`` (RFC 3339, with a zone): the size just past the last entry whose
  time is at or before ``T`` (0 when none is);
* ``run=R, step=S``: the tree size the recorded call observed (for a write,
  the size before its own entries).

Privacy wins over history: text a forget erased is erased in every view, also
in views of points before the forget (see :mod:`._as_of_build`). ``memory_get``
of such an item shows its signed structure with ``"text": {"forgotten_at":
seq}``, the marker replay shows; searches and listings leave it out, since its
words are gone.
"""

from __future__ import annotations

import calendar
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import Any, Final

import msgspec

from memseal.engine import Engine
from memseal.engine.trust import trust_rank
from memseal.ledger.errors import InvalidRequest, Unsupported, VerificationError
from memseal.ledger.store import SqlStore
from memseal.replay.evidence._temp_log import parse_time
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call
from memseal.tools import MemoryTools, ToolScope
from memseal.tools.catalog import TOOL_NAMES, TRAITS
from memseal.tools.policy import offered
from memseal.tools.specs import ToolSpec, spec_for

from ._as_of_build import Built, Erased, ViewCache

__all__ = [
    "PYTHON_NAMES",
    "AsOfTools",
    "AsOfView",
    "ViewCache",
    "parse_count",
    "parse_rfc3339",
    "resolve_point",
]

#: What each part of a point is called in Python (the HTTP and CLI names differ).
PYTHON_NAMES: Final = {"size": "size", "at": "at", "run": "run", "step": "step"}
_WINDOW: Final = 1_024


async def resolve_point(
    store: SqlStore,
    *,
    size: object = None,
    at: object = None,
    run: object = None,
    step: object = None,
    names: Mapping[str, str] = PYTHON_NAMES,
) -> int:
    """The tree size a point names; :class:`InvalidRequest` naming the field (by
    ``names``) for a bad or unknown point, or none or more than one given."""
    given = [
        k for k, v in (("size", size), ("at", at), ("run", run), ("step", step)) if v is not None
    ]
    if not given:
        raise InvalidRequest(
            f"name a point: `{names['size']}`, `{names['at']}`, or `{names['run']}` "
            f"with `{names['step']}`"
        )
    if len(given) > 1 and ("size" in given or "at" in given):
        shown = ", ".join(f"`{names[k]}`" for k in given)
        raise InvalidRequest(f"name one point, not {shown}")
    head = (await store.head()).size
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= head:
            raise InvalidRequest(
                f"`{names['size']}` must be a tree size from 0 to {head} (the log holds "
                f"{head} entries), not {str(size)[:40]!r}"
            )
        return size
    if at is not None:
        return await _size_at(store, _when(at, names["at"]), head)
    return await _size_of_call(store, run, step, names)


#: RFC 3339's date-time (section 5.6), ASCII digits only; its note lets "T" and "Z" be
#: lowercase. ``fromisoformat`` also took week dates, hour-only times, comma fractions.
_RFC3339: Final = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]"
    r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<off_h>[0-9]{2}):(?P<off_m>[0-9]{2}))"
)


def parse_count(text: str | None, field: str) -> int | None:
    """A size or a step as the HTTP query and the CLI give it: ASCII digits only (``int``
    also takes ``+1``, ``1_0``, spaces and other scripts' digits); None stays None."""
    if text is None:
        return None
    if not text.isascii() or not text.isdigit():
        raise InvalidRequest(f"`{field}` must be a whole number (0 or more), not {text[:40]!r}")
    return int(text)


def parse_rfc3339(text: str, field: str) -> datetime:
    """An RFC 3339 date-time as an aware UTC datetime; InvalidRequest naming ``field``.

    Digits past microseconds are dropped, and a leap second (``23:59:60Z``, in UTC,
    the last day of a month) is read as the microsecond before the next minute: entry
    times are whole microseconds and never a leap second, so "at or before ``T``" picks
    the same entries either way.
    """
    bad = f"`{field}` must be an RFC 3339 time with a zone, like 2026-05-01T12:00:00Z"
    found = _RFC3339.fullmatch(text)
    if found is None:
        raise InvalidRequest(f"{bad}, not {text[:60]!r}")
    leap = found["second"] == "60"
    hours, minutes = int(found["off_h"] or 0), int(found["off_m"] or 0)
    if hours > 23 or minutes > 59:
        raise InvalidRequest(f"{bad}: the zone offset {text[-6:]!r} is out of range")
    offset = timedelta(hours=hours, minutes=minutes)
    try:
        day = date.fromisoformat(found["date"])
        when = datetime.combine(
            day,
            time(
                int(found["hour"]),
                int(found["minute"]),
                59 if leap else int(found["second"]),
                int((found["fraction"] or "0")[:6].ljust(6, "0")),
            ),
            timezone(-offset if found["sign"] == "-" else offset),
        ).astimezone(UTC)
    except (ValueError, OverflowError):  # a 13th month; or before the first instant there is
        raise InvalidRequest(f"{bad}, not {text[:60]!r}") from None
    if leap:
        last_day = calendar.monthrange(when.year, when.month)[1]
        if (when.hour, when.minute) != (23, 59) or when.day != last_day:
            raise InvalidRequest(
                f"`{field}`: a leap second (:60) falls only at 23:59:60 UTC on the last day "
                f"of a month, not {text[:60]!r}"
            )
        when = when.replace(microsecond=999_999)
    return when


def _when(at: object, field: str) -> datetime:
    if isinstance(at, str):
        return parse_rfc3339(at, field)
    if isinstance(at, datetime) and at.tzinfo is not None and at.utcoffset() is not None:
        try:
            return at.astimezone(UTC)
        except OverflowError:
            pass
    raise InvalidRequest(
        f"`{field}` must be an RFC 3339 time with a zone, like 2026-05-01T12:00:00Z, "
        f"not {str(at)[:60]!r}"
    )


async def _size_at(store: SqlStore, when: datetime, head: int) -> int:
    """Just past the last entry at or before ``when``, read back from the end a window at a
    time (entry times need not rise with seq: clocks of processes sharing a log differ)."""
    stop = head
    while stop > 0:
        start = max(0, stop - _WINDOW)
        last = None
        async for record in store.scan(start, stop):
            if parse_time(record.entry().at) <= when:
                last = record.seq
        if last is not None:
            return last + 1
        stop = start
    return 0


async def _size_of_call(
    store: SqlStore, run: object, step: object, names: Mapping[str, str]
) -> int:
    if not isinstance(run, str) or not run or len(run) > 200:
        raise InvalidRequest(f"`{names['run']}` must be a run id (1 to 200 characters)")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InvalidRequest(f"`{names['step']}` must be a step number (0 or more) of run {run!r}")
    rows = await store.rows("SELECT seq FROM memos WHERE run_id = ? AND step = ?", (run, step))
    if not rows:
        if not await store.rows("SELECT 1 FROM memos WHERE run_id = ? LIMIT 1", (run,)):
            raise InvalidRequest(f"`{names['run']}`: no run {run!r} was recorded here")
        raise InvalidRequest(f"`{names['step']}`: run {run!r} recorded no step {step}")
    seq = int(rows[0][0])
    entry = (await store.read(seq)).entry()
    if entry.kind != TOOL_CALL:
        raise VerificationError("a memo names an entry that is no tool call", seq=seq, step="memo")
    call = decode_tool_call(bytes(entry.body))
    if call.run_id != run or call.step != step:
        raise VerificationError("a memo names another run's call", seq=seq, step="memo")
    return call.observed_size


class AsOfView:
    """The memory as of tree size :attr:`size`, read-only (see the module docstring)."""

    def __init__(self, cache: ViewCache, size: int) -> None:
        self._cache = cache
        self.size = size

    def __repr__(self) -> str:
        return f"AsOfView(size={self.size})"

    def tools(self, scope: ToolScope | None = None) -> AsOfTools:
        """The read tools over this view, for one host-fixed scope (default: the root)."""
        return AsOfTools(self._cache, self.size, ToolScope() if scope is None else scope)

    @contextlib.asynccontextmanager
    async def engine(self) -> AsyncIterator[Engine]:
        """The engine over this view, held for one read, for host code that reads the
        engine rather than the tools (an auditor's item listing). Its reads take the
        caller's reach as the live engine's do; it has no forget markers (listings and
        searches leave a forgotten item out either way), and anything written through it
        goes to the view's temporary store, never to the memory."""
        async with self._cache.use(self.size) as built:
            yield built.engine


class AsOfTools:
    """The read tools of :class:`AsOfView`: ``specs()``, ``names()`` and ``call()``."""

    def __init__(self, cache: ViewCache, size: int, scope: ToolScope) -> None:
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be a ToolScope")
        self._cache = cache
        self.size = size
        # A view is read-only whatever the scope says; the reach, floor and the rest stand.
        self.scope = scope.replace(writes=False)

    def names(self) -> tuple[str, ...]:
        """The tools offered: the scope's read tools."""
        modes = self._cache.modes
        return tuple(name for name in TOOL_NAMES if offered(self.scope, name, modes))

    def specs(self) -> list[ToolSpec]:
        """The specs of the tools offered."""
        modes = self._cache.modes
        return [spec_for(name, modes) for name in self.names()]

    async def call(self, name: str, arguments: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """Run read tool ``name`` over the memory as of :attr:`size` (unrecorded).

        memory_store and memory_forget raise :class:`Unsupported`; the rest raise
        as :meth:`memseal.tools.MemoryTools.call` does.
        """
        if isinstance(name, str) and name in TRAITS and TRAITS[name].side_effects:
            raise Unsupported(
                f"{name}: the memory as of tree size {self.size} is a read-only view of the "
                "past; write through memory.tools(scope)"
            )
        async with self._cache.use(self.size) as built:
            tools = MemoryTools(built.engine, self.scope)
            result = await tools.call(name, arguments)
            if name == "memory_get" and built.erased:
                result = self._marked(result, arguments, built)
        return result

    def _marked(
        self, result: dict[str, Any], arguments: Mapping[str, Any] | str | bytes, built: Built
    ) -> dict[str, Any]:
        """A get result with each asked item a later forget erased shown with the marker."""
        plain = arguments if isinstance(arguments, Mapping) else msgspec.json.decode(arguments)
        asked = list(dict.fromkeys(plain["ids"]))
        floor = trust_rank(plain.get("min_trust") or self.scope.default_trust)
        reach = self.scope.reach
        marked: dict[str, dict[str, Any]] = {}
        filtered = list(result["filtered"])
        for item_id in result["missing"]:
            found = built.erased.get(item_id)
            if found is None or (reach is not None and not reach.admits(found.namespace)):
                continue  # unknown, or outside the reach: missing, as ever
            if trust_rank(found.trust) < floor:  # type: ignore[arg-type]
                filtered.append(item_id)
            else:
                marked[item_id] = _marker_item(found)
        if not marked and len(filtered) == len(result["filtered"]):
            return result
        items = {item["id"]: item for item in result["items"]}
        items.update(marked)
        gone = set(marked) | set(filtered)
        return {
            "items": [items[i] for i in asked if i in items],
            "missing": [i for i in result["missing"] if i not in gone],
            "filtered": [i for i in asked if i in set(filtered)],
        }


def _marker_item(found: Erased) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": found.id,
        "kind": found.kind,
        "text": {"forgotten_at": found.forgotten_at},
    }
    if found.confidence is not None:
        out["confidence"] = found.confidence
    out["trust"] = found.trust
    out["ledger_ref"] = found.seq
    out["meta"] = {"observed_at": found.observed_at}
    return out
