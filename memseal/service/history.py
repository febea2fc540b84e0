"""The ``as_of`` query parameters of the read routes: the memory as of a point.

``GET /v1/tools`` and ``POST /v1/tools/{name}`` take one point of the log, as
query parameters the host's client sets (never the model: no tool schema has
them):

=========================  ==================================================
``as_of=N``                the first ``N`` entries (a tree size)
``as_of_time=T``           just past the last entry at or before ``T``
                           (RFC 3339 with a zone)
``as_of_run=R&as_of_step=S``  the tree size run ``R`` observed at step ``S``
=========================  ==================================================

With a point, a read tool runs over the read-only view (unrecorded: no run, no
step, no header naming either), and memory_store and memory_forget are refused.
A bad point is a 400 naming the parameter, never a 500.

A route honours a point by taking :data:`AsOf`; every other route refuses one.
:func:`refuse_undeclared_point` is a dependency of the whole app, so a route added
later refuses a point until it takes :data:`AsOf`: a point sent to a route that
ignored it would read or write the live memory while its caller believed it read the
past. Every route (and ``/mcp``) refuses a parameter given twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final

import msgspec
from fastapi import Depends, Query, Request
from starlette.datastructures import QueryParams

from memseal.apps.as_of import AsOfView, parse_count
from memseal.ledger.errors import InvalidRequest
from memseal.memory import Memory

from .tokens import Principal

__all__ = [
    "HTTP_NAMES",
    "MAX_LENGTHS",
    "PARAMETERS",
    "AsOf",
    "AsOfPoint",
    "AsOfQuery",
    "AsOfRun",
    "AsOfStep",
    "AsOfTime",
    "point_of",
    "refuse_undeclared_point",
    "run_in_reach",
    "view_at",
]

#: The query parameter each part of a point is named by in errors.
HTTP_NAMES: Final = {"size": "as_of", "at": "as_of_time", "run": "as_of_run", "step": "as_of_step"}
#: The query parameters of a point, in the order :class:`AsOfPoint` takes them.
PARAMETERS: Final = ("as_of", "as_of_time", "as_of_run", "as_of_step")
#: The longest value each parameter takes, on every route and on /mcp: a size or step
#: longer than 40 digits is no tree size, and Python's int() refuses over 4,300.
MAX_LENGTHS: Final = {"as_of": 40, "as_of_time": 64, "as_of_run": 200, "as_of_step": 40}

AsOfQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_LENGTHS["as_of"],
        description="read the memory as of this tree size (read tools only)",
    ),
]
AsOfTime = Annotated[
    str | None,
    Query(
        max_length=MAX_LENGTHS["as_of_time"],
        description="read the memory as of this RFC 3339 time",
    ),
]
AsOfRun = Annotated[
    str | None,
    Query(
        max_length=MAX_LENGTHS["as_of_run"],
        description="read the memory as run R saw it at `as_of_step`",
    ),
]
AsOfStep = Annotated[
    str | None,
    Query(max_length=MAX_LENGTHS["as_of_step"], description="the step of `as_of_run`"),
]


async def view_at(
    memory: Memory,
    who: Principal,
    as_of: str | None,
    as_of_time: str | None,
    as_of_run: str | None,
    as_of_step: str | None,
) -> AsOfView | None:
    """The view the parameters name, or None when none is given (the live memory)."""
    if as_of is None and as_of_time is None and as_of_run is None and as_of_step is None:
        return None
    if (
        as_of_run is not None
        and as_of_step is not None
        and not await run_in_reach(memory, who, as_of_run)
    ):
        # As the run routes answer: a run beyond the reach is told as one never recorded,
        # so its steps and the sizes it saw are not learnt from the answer.
        raise InvalidRequest(f"`as_of_run`: no run {as_of_run[:200]!r} in your reach")
    size = parse_count(as_of, "as_of")
    step = parse_count(as_of_step, "as_of_step")
    return await memory.as_of(size, at=as_of_time, run=as_of_run, step=step, names=HTTP_NAMES)


@dataclass(frozen=True, slots=True)
class AsOfPoint:
    """The point a read route's query names, if any (see the module docstring)."""

    as_of: str | None = None
    as_of_time: str | None = None
    as_of_run: str | None = None
    as_of_step: str | None = None

    async def view(self, memory: Memory, who: Principal) -> AsOfView | None:
        """The view of the memory at this point for ``who``; None: the live memory."""
        return await view_at(
            memory, who, self.as_of, self.as_of_time, self.as_of_run, self.as_of_step
        )

    @property
    def named(self) -> str:
        """The first parameter given, to name in a refusal (``as_of`` when none is)."""
        given = (self.as_of, self.as_of_time, self.as_of_run, self.as_of_step)
        return next((n for n, v in zip(PARAMETERS, given, strict=True) if v is not None), "as_of")


def point_of(query: QueryParams) -> AsOfPoint:
    """The point a request's query names (``/mcp`` reads it so); a parameter given twice
    (which of the two was meant is not known) or longer than the routes take it
    (:data:`MAX_LENGTHS`) is an InvalidRequest naming it."""
    for name in PARAMETERS:
        given = query.getlist(name)
        if len(given) > 1:
            raise InvalidRequest(f"`{name}` is given more than once: name one point")
        if given and len(given[0]) > MAX_LENGTHS[name]:
            raise InvalidRequest(
                f"`{name}` is longer than {MAX_LENGTHS[name]} characters ({len(given[0])})"
            )
    return AsOfPoint(*(query.get(name) for name in PARAMETERS))


async def refuse_undeclared_point(request: Request) -> None:
    """A dependency of every route: a point sent to a route that does not take
    :data:`AsOf` is a 400 naming the parameter, before the route reads or writes."""
    query = request.query_params
    given = [name for name in PARAMETERS if name in query]
    if not given:
        return
    point_of(query)
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is not None and _takes_point(dependant):
        return
    path = getattr(route, "path_format", None) or request.url.path
    raise InvalidRequest(
        f"`{given[0]}`: {request.method} {path} does not read the memory as of a point "
        "(only the read routes whose parameters list it do); send it without one"
    )


def _takes_point(dependant: Any) -> bool:
    return dependant.call is _as_of_point or any(_takes_point(d) for d in dependant.dependencies)


async def _as_of_point(
    as_of: AsOfQuery = None,
    as_of_time: AsOfTime = None,
    as_of_run: AsOfRun = None,
    as_of_step: AsOfStep = None,
) -> AsOfPoint:
    return AsOfPoint(as_of, as_of_time, as_of_run, as_of_step)


#: A route parameter taking the four query parameters of a point as one value.
AsOf = Annotated[AsOfPoint, Depends(_as_of_point)]


async def run_in_reach(memory: Memory, who: Principal, run_id: str) -> bool:
    """Whether the place that started ``run_id`` is inside ``who``'s reach."""
    store = memory.ledger.store
    rows = await store.rows("SELECT started_seq FROM runs WHERE run_id = ?", (run_id,))
    if not rows:
        return False
    body = msgspec.json.decode(bytes((await store.read(int(rows[0][0]))).entry().body))
    place = body.get("place") if isinstance(body, dict) else None
    reach = who.scope.reach
    if reach is None:
        return True
    try:
        return isinstance(place, str) and reach.admits(place)
    except Exception:
        # A place the reach cannot even parse is not one it admits.
        return False
