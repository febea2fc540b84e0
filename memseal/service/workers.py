"""The explicit scope of each ``memseal serve --worker``: where it builds, what it reads.

``--worker PLACE[,reach=REACH][,trust=LEVEL][,attempts=N]`` names one agent
node whose queued belief builds the service runs in its own loop:

=============  ==========================================================  =====================
option         what it fixes                                               default
=============  ==========================================================  =====================
``PLACE``      the agent node: beliefs are stored there, jobs are queued   (required)
               at ``PLACE/queue:jobs``
``reach``      what a build reads (its turns) and supersedes (its          ``subtree:PLACE``
               beliefs); only ``subtree:PLACE`` is accepted, see below
``trust``      the lowest trust a build reads a turn at: a turn below it   ``unverified``
               is not read, and the job fails naming it
``attempts``   attempts of a failing job before it is ``failed``           5
=============  ==========================================================  =====================

Why the reach is checked and not free: a build lists the beliefs already
held on a subject within its reach and forgets those it supersedes. A
reach that admits another agent's node (``subtree:team:acme``, ``all``)
would let one agent's build forget another agent's beliefs; one that does
not cover the agent's threads (``exact:PLACE``, ``of:PLACE``, a thread's
subtree) would let no job read its turns, or see the beliefs it replaces.
So the reach is stated for the operator to read (``serve`` prints each
worker's scope) and any other is refused before anything starts, naming
the option and why.
"""

from __future__ import annotations

from typing import Final, cast

import msgspec

from memseal.apps.lifecycle import DEFAULT_MAX_ATTEMPTS, MemoryLayout, RetryPolicy
from memseal.engine import Namespace, Trust
from memseal.ledger.errors import InvalidRequest
from memseal.tools import ToolScope

from .tokens import parse_reach, reach_text

__all__ = ["WorkerScope", "parse_worker"]

_KEYS: Final = ("reach", "trust", "attempts")


class WorkerScope(msgspec.Struct, frozen=True, kw_only=True):
    """One ``--worker``: the agent node, the scope its builds run under, its retries."""

    place: str
    scope: ToolScope
    retry: RetryPolicy

    def describe(self) -> str:
        """The scope as one line, as ``serve`` prints it."""
        return (
            f"builds beliefs at {self.place}, reads {reach_text(self.scope.reach)} "
            f"at trust {self.scope.default_trust} and above, queue {self.place}/queue:jobs, "
            f"at most {self.retry.max_attempts} attempts a job"
        )


def _bad(field: str, text: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"`{field}` {text!r:.80}: {why}")


def parse_worker(
    text: object, *, field: str = "--worker", attempts: int | None = None
) -> WorkerScope:
    """The :class:`WorkerScope` of one ``--worker`` text, or :class:`InvalidRequest` saying
    what is wrong with it (see the module docstring).

    ``field`` is the option the text came from, named in every error: ``memseal worker``
    and ``memseal jobs`` take the same text as ``--place`` (one syntax, one parser).
    ``attempts`` is what another option gave (``memseal worker --max-attempts``): the
    attempts when the text names none; a text that names them too is refused, so the
    two never disagree silently.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest(f"`{field}` must be an agent node, like team:acme/agent:writer")
    place_text, *rest = text.split(",")
    options: dict[str, str] = {}
    for part in rest:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _KEYS:
            known = ", ".join(k + "=..." for k in _KEYS)
            raise _bad(field, text, f"{part!r:.40} is not one of {known}")
        if key in options:
            raise _bad(field, text, f"`{key}` is given twice")
        options[key] = value.strip()
    # 1. the place: an agent node of a tenant (what the layout's learnings writer is for).
    node = Namespace(place_text.strip(), field=field)
    if len(node.segments) < 2 or node.segments[-1][0] != "agent":
        raise _bad(field, text, "the place must be an agent node, like team:acme/agent:writer")
    tenant = "/".join(f"{k}:{n}" for k, n in node.segments[:-1])
    trust = options.get("trust", "unverified")
    try:
        level = cast(Trust, trust)  # checked by the layout's scopes, naming the level
        layout = MemoryLayout(tenant=tenant, floor=level, default_trust=level)
    except InvalidRequest as exc:
        raise _bad(field, text, f"`trust` {trust!r:.20}: {exc}") from None
    scope = layout.learnings_writer(node.segments[-1][1])
    # 2. the reach: exactly the agent's subtree (why: the module docstring).
    if "reach" in options:
        try:
            asked = parse_reach(options["reach"], scope.place, "agent")
        except InvalidRequest as exc:
            raise _bad(field, text, str(exc)) from None
        if asked != scope.reach:
            raise _bad(
                field,
                text,
                f"the reach must be subtree:{scope.place}: a build reads the agent's threads "
                "and supersedes its beliefs there, and a wider reach would let it forget "
                "another agent's beliefs",
            )
    # 3. the retries.
    if attempts is not None and "attempts" in options:
        raise _bad(field, text, "`attempts` is given twice (here and as --max-attempts)")
    fallback = DEFAULT_MAX_ATTEMPTS if attempts is None else attempts
    attempts_text = options.get("attempts", str(fallback))
    if not attempts_text.isdigit():
        raise _bad(field, text, "`attempts` must be a whole number from 1")
    try:
        retry = RetryPolicy(max_attempts=int(attempts_text))
    except InvalidRequest as exc:
        raise _bad(field, text, str(exc)) from None
    return WorkerScope(place=scope.place, scope=scope, retry=retry)
