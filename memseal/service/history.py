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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final

import msgspec
from fastapi import Depends, Query

from memseal.ledger.errors import InvalidRequest
from memseal.memory import Memory
from memseal.replay.as_of import AsOfView

from .tokens import Principal

__all__ = [
    "HTTP_NAMES",
    "AsOfQuery",
    "AsOfRun",
    "AsOfStep",
    "AsOfTime",
    "run_in_reach",
    "view_at",
]

#: The query parameter each part of a point is named by in errors.
HTTP_NAMES: Final = {"size": "as_of", "at": "as_of_time", "run": "as_of_run", "step": "as_of_step"}

AsOfQuery = Annotated[
    str | None,
    Query(max_length=40, description="read the memory as of this tree size (read tools only)"),
]
AsOfTime = Annotated[
    str | None,
    Query(max_length=64, description="read the memory as of this RFC 3339 time"),
]
AsOfRun = Annotated[
    str | None,
    Query(max_length=200, description="read the memory as run R saw it at `as_of_step`"),
]
AsOfStep = Annotated[
    str | None,
    Query(max_length=40, description="the step of `as_of_run`"),
]


def _count(text: str | None, field: str) -> int | None:
    if text is None:
        return None
    if not text.isascii() or not text.isdigit():
        raise InvalidRequest(f"`{field}` must be a whole number (0 or more), not {text[:40]!r}")
    return int(text)


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
    size = _count(as_of, "as_of")
    step = _count(as_of_step, "as_of_step")
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
