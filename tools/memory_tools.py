""":class:`MemoryTools`: the seven memory tools over an engine, for one host-fixed scope.

This is the tools layer's building block, and it records nothing: a recorder
(memseal.replay's ``Run``) prepares its calls and signs them. What a host
gets from ``memory.tools(scope)`` is the recorded form (``memseal.RecordedTools``),
every call a signed entry. Built from the session's identity, never from
anything the model said::

    tools = MemoryTools(engine, ToolScope.placed_at("team:acme/agent:writer"))
    specs = tools.specs()                        # what to hand the model
    result = await tools.call("memory_store", {"learning": {"text": "prefers dark mode"}})

The builders (:meth:`placed_at`, :meth:`reach`, :meth:`read_only`,
:meth:`with_scope`, :meth:`in_zone`) return a new MemoryTools; placing
resets the reach to the place and its ancestors.

Every call goes through two phases, which :meth:`call` runs back to back
and a recorder (memseal.replay) runs around its own transaction:

* :meth:`prepare` refuses by policy, validates the arguments, and runs a
  read outright (its rendered result is ready); for a write it does the
  expensive pure work (validation, embedding) and returns a ``command``
  to run inside the writer's transaction, plus a ``committed`` hook and an
  ``after`` to await once that transaction committed (forget's release of
  its vectors, and its scrub).
* the caller runs the command (``run_committed(engine.ledger.run,
  prepared.command, prepared.committed)``, or inside a larger command of its
  own, calling ``committed`` the same way) and then ``after``.

The scoping invariants (seed: tinymemory) hold in every path:

1. writes land at the scope's place, with metadata the tool builds
   (source agent, the model's tags, observed now); a reserved tag (one a
   host part finds its items by, :mod:`._reserved`) is refused but at its
   owner's node type;
2. every read is confined to the scope's reach;
3. forget by ids resolves the ids under the reach, in the write
   transaction, and returns the others as ``skipped``; forget by filter
   needs at least one field and is confined to the reach;
4. a ``namespace`` or ``reach`` key anywhere in the arguments, and any
   unknown key, is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Final

import msgspec

from memseal.engine import Engine, Meta, Namespace, Reach, Source, Trust
from memseal.engine.explore import CLOSED_FACETS
from memseal.engine.trust import trust_rank
from memseal.ledger.errors import InvalidRequest, Unsupported
from memseal.ledger.store import WriteTxn, run_committed

from . import render
from ._reserved import reserved_tag_refusal
from .args import (
    DEFAULT_LIMIT,
    ExploreArgs,
    FetchArgs,
    ForgetArgs,
    GetArgs,
    ListArgs,
    RecallArgs,
    StoreArgs,
    arguments_type,
)
from .catalog import TOOL_NAMES, TRAITS
from .decode import decode, fail, given, quote
from .policy import Refusal, offered, refusal_before_approval
from .scope import ToolScope
from .specs import ToolSpec, schema_of, spec_for
from .toolset import AsyncToolset

__all__ = ["MemoryTools", "PreparedCall", "cited_ids"]

#: Where a model's writes say they came from.
AGENT_SOURCE: Final = Source(kind="agent")

_Command = Callable[[WriteTxn], dict[str, Any]]
_After = Callable[[], Awaitable[None]]


def cited_ids(name: str, result: Mapping[str, Any]) -> list[str]:
    """The memory ids a rendered result of tool ``name`` cites, in order, without repeats.

    Hits, items and citations for reads; the stored id; the forgotten ids.
    """
    found: list[str] = []
    if name == "memory_recall":
        found = [c.get("id") for c in result.get("citations", ())]
    elif name == "memory_fetch":
        found = [h.get("id") for h in result.get("hits", ())]
    elif name in ("memory_list", "memory_get"):
        found = [i.get("id") for i in result.get("items", ())]
    elif name == "memory_store":
        found = [result.get("id")]  # type: ignore[list-item]
    elif name == "memory_forget":
        found = list(result.get("forgotten", ()))
    return list(dict.fromkeys(i for i in found if isinstance(i, str)))


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """One validated call, ready to run (see the module docstring).

    ``arguments`` are the arguments as sent (plain JSON, no defaults filled
    in). A read has its rendered ``result`` and no ``command``; a write has
    a ``command`` returning its rendered result when run in the writer, and
    possibly a ``committed`` and an ``after``. ``wrote`` lists the seqs of the entries the
    command appended (filled each time it runs; empty for a replayed store).
    """

    name: str
    arguments: dict[str, Any]
    side_effects: bool
    result: dict[str, Any] | None = None
    command: _Command | None = None
    #: Called once ``command``'s transaction committed, even if its caller is gone
    #: (``memseal.ledger.store.run_committed``): in-process state that must match it.
    committed: Callable[[], None] | None = None
    after: _After | None = None
    wrote: list[int] = field(default_factory=list)

    facet_ref: Callable[[str, str], str] | None = None
    #: A recall: every hit its answerer was given, cited or not (an answer may quote any).
    drawn_from: tuple[str, ...] = ()

    def cites(self, result: Mapping[str, Any]) -> list[str]:
        """The memory ids ``result`` (this call's rendered result) cites and, for a recall,
        every other hit its answer drew from: what a recorded call names in its signed body
        and its mentions, so that forgetting any of them erases the answer too."""
        return list(dict.fromkeys([*cited_ids(self.name, result), *self.drawn_from]))

    def mentions(self, result: Mapping[str, Any]) -> list[str]:
        """What a recorded ``result`` mentions for the ledger's index: the ids it cites and,
        for an explore, a keyed ref of each bucket value, so a forget can find it."""
        refs = self.cites(result)
        if self.facet_ref is not None and self.name == "memory_explore":
            facet, buckets = result.get("facet"), result.get("buckets")
            if isinstance(facet, str) and facet not in CLOSED_FACETS and isinstance(buckets, list):
                refs += [
                    self.facet_ref(facet, b["value"])
                    for b in buckets
                    if isinstance(b, dict) and isinstance(b.get("value"), str)
                ]
        return refs


def _text(value: object, limit: int = 64) -> str:
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


class MemoryTools:
    """The seven memory tools over ``engine``, scoped by ``scope`` (see the module docstring).

    ``scope`` defaults to ``ToolScope()``: the root, every namespace in
    reach, writes on. ``zone`` is the host's time zone for ``refers_to``
    dates (default: the engine's).
    """

    def __init__(
        self, engine: Engine, scope: ToolScope | None = None, *, zone: tzinfo | None = None
    ) -> None:
        if not isinstance(engine, Engine):
            raise InvalidRequest("`engine` must be a memseal.engine.Engine")
        if scope is None:
            scope = ToolScope()
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be a ToolScope")
        if zone is not None and not isinstance(zone, tzinfo):
            raise InvalidRequest("`zone` must be a tzinfo, such as zoneinfo.ZoneInfo('UTC')")
        self._engine = engine
        self._scope = scope
        self._zone = zone

    def __repr__(self) -> str:
        return f"MemoryTools({self._scope!r})"

    # -- what the host sees -------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The engine these tools run over."""
        return self._engine

    @property
    def scope(self) -> ToolScope:
        """The host-fixed scope every call of these tools runs in."""
        return self._scope

    @property
    def zone(self) -> tzinfo | None:
        """The host's time zone for ``refers_to`` dates (None: the engine's)."""
        return self._zone

    @property
    def modes(self) -> tuple[str, ...]:
        """The fetch modes memory_fetch offers (the engine's)."""
        return tuple(self._engine.modes)

    # -- builders -----------------------------------------------------------------------------

    def with_scope(self, scope: ToolScope) -> MemoryTools:
        """The same tools over the same engine, for another scope."""
        return MemoryTools(self._engine, scope, zone=self._zone)

    def placed_at(self, place: Namespace | str) -> MemoryTools:
        """Placed at ``place``, reading ``Reach.of(place)`` (its node and its ancestors)."""
        text = Namespace.parse(place, field="place").text
        return self.with_scope(self._scope.replace(place=text, reach=Reach.of(text)))

    def reach(self, reach: Reach | None) -> MemoryTools:
        """Reads and forgets confined to ``reach`` (None: every namespace)."""
        return self.with_scope(self._scope.replace(reach=reach))

    def read_only(self) -> MemoryTools:
        """No memory_store or memory_forget offered (a call to one is :class:`Unsupported`)."""
        return self.with_scope(self._scope.replace(writes=False))

    def in_zone(self, zone: tzinfo) -> MemoryTools:
        """``refers_to`` dates read in ``zone`` (the host's, never the model's)."""
        if not isinstance(zone, tzinfo):
            raise InvalidRequest("`zone` must be a tzinfo, such as zoneinfo.ZoneInfo('UTC')")
        return MemoryTools(self._engine, self._scope, zone=zone)

    # -- specs and policy ---------------------------------------------------------------------

    def names(self) -> tuple[str, ...]:
        """The tools this scope offers, in spec order."""
        modes = self.modes
        return tuple(name for name in TOOL_NAMES if offered(self._scope, name, modes))

    def specs(self) -> list[ToolSpec]:
        """The specs of the tools offered (cheap: build per session)."""
        modes = self.modes
        return [spec_for(name, modes) for name in self.names()]

    def side_effects(self, name: str) -> bool:
        """Whether tool ``name`` writes; :class:`InvalidRequest` for an unknown name."""
        return TRAITS[self._known(name)].side_effects

    def toolset(self) -> AsyncToolset:
        """These tools as an :class:`AsyncToolset`, unrecorded (hosts get recorded ones
        from ``memory.tools(scope).toolset()``; see the module docstring)."""
        return AsyncToolset.of(self)

    def refusal_before_approval(self, name: str, arguments: object = None) -> Refusal | None:
        """The policy refusal a call meets before any approval or schema check, or None."""
        return refusal_before_approval(self._scope, name, arguments)

    def _known(self, name: object) -> str:
        if not isinstance(name, str):
            raise InvalidRequest(f"the tool name must be text, not {type(name).__name__}")
        if name not in TRAITS:
            offered_names = ", ".join(self.names()) or "none"
            shown = quote(_text(name))
            raise InvalidRequest(f"unknown tool `{shown}`; the tools offered are {offered_names}")
        return name

    # -- calling ------------------------------------------------------------------------------

    async def call(self, name: str, arguments: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """Run tool ``name`` with the model's ``arguments`` (an object, or its JSON text).

        Returns the rendered result. Raises :class:`InvalidRequest`,
        :class:`Unsupported` (a :class:`Refusal` among them) or the engine's
        own errors.
        """
        prepared = await self.prepare(name, arguments)
        if prepared.command is not None:
            result = await run_committed(
                self._engine.ledger.run, prepared.command, prepared.committed
            )
        else:
            assert prepared.result is not None
            result = prepared.result
        if prepared.after is not None:
            await prepared.after()
        return result

    async def prepare(self, name: str, arguments: Mapping[str, Any] | str | bytes) -> PreparedCall:
        """Refuse, validate, and run a read or plan a write (see the module docstring)."""
        tool = self._known(name)
        refusal = self.refusal_before_approval(tool, arguments)
        if refusal is not None:
            raise refusal
        modes = self.modes
        if tool == "memory_fetch" and not modes:
            raise Unsupported("memory_fetch: this engine serves no fetch mode")
        plain, args = decode(tool, arguments, arguments_type(tool, modes), schema_of(tool, modes))
        side_effects = TRAITS[tool].side_effects
        try:
            if tool == "memory_store":
                return await self._store(plain, args)
            if tool == "memory_forget":
                return await self._forget(plain, args)
            result, drawn = await self._read(tool, args)
        except (InvalidRequest, Unsupported) as exc:
            if str(exc).startswith(f"{tool}: "):
                raise
            raise type(exc)(f"{tool}: {exc}") from None
        return PreparedCall(
            name=tool,
            arguments=plain,
            side_effects=side_effects,
            result=result,
            facet_ref=self._engine.facet_ref if tool == "memory_explore" else None,
            drawn_from=drawn,
        )

    # -- reads --------------------------------------------------------------------------------

    def _min_trust(self, tool: str, asked: Trust | None) -> Trust:
        if asked is None:
            return self._scope.default_trust
        if trust_rank(asked) < trust_rank(self._scope.floor):
            raise fail(
                tool,
                f"`min_trust` `{asked}` is below the lowest this agent may ask for "
                f"({self._scope.floor}, set by the host)",
            )
        return asked

    @staticmethod
    def _filter(value: object) -> dict[str, Any] | None:
        return None if value is None else msgspec.to_builtins(value)

    async def _read(self, tool: str, args: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The rendered result, and (a recall) the ids of every hit its answerer was given."""
        engine, reach, zone = self._engine, self._scope.reach, self._zone
        floor = self._min_trust(tool, given(args.min_trust))
        if isinstance(args, RecallArgs):
            recollection = await engine.recall(
                args.question,
                filter=self._filter(given(args.filter)),
                reach=reach,
                min_trust=floor,
                limit=given(args.limit) or DEFAULT_LIMIT,
                instructions=given(args.instructions),
                refers_to=self._filter(given(args.refers_to)),
                zone=zone,
            )
            return render.render_recollection(recollection), recollection.drawn_from
        if isinstance(args, FetchArgs):
            fetched = await engine.fetch(
                args.query,
                mode=given(args.mode),
                filter=self._filter(given(args.filter)),
                reach=reach,
                min_trust=floor,
                limit=given(args.limit) or DEFAULT_LIMIT,
                cursor=given(args.cursor),
                refers_to=self._filter(given(args.refers_to)),
                zone=zone,
            )
            return render.render_fetched(fetched), ()
        if isinstance(args, ListArgs):
            page = await engine.list(
                filter=self._filter(given(args.filter)),
                reach=reach,
                min_trust=floor,
                limit=given(args.limit) or DEFAULT_LIMIT,
                cursor=given(args.cursor),
            )
            return render.render_page(page), ()
        if isinstance(args, GetArgs):
            got = await engine.get(args.ids, reach=reach, min_trust=floor)
            return render.render_got(got), ()
        assert isinstance(args, ExploreArgs)
        exploration = await engine.explore(
            args.facet,
            filter=self._filter(given(args.filter)),
            reach=reach,
            min_trust=floor,
            limit=given(args.limit) or DEFAULT_LIMIT,
        )
        return render.render_exploration(exploration), ()

    # -- writes -------------------------------------------------------------------------------

    async def _store(self, plain: dict[str, Any], args: StoreArgs) -> PreparedCall:
        given_parts = [
            (key, value)
            for key, value in (
                ("learning", args.learning),
                ("document", args.document),
                ("conversation", args.conversation),
            )
            if value is not msgspec.UNSET
        ]
        if len(given_parts) != 1:
            raise fail(
                "memory_store",
                "`learning`, `document` or `conversation`: give exactly one of them",
            )
        key, value = given_parts[0]
        reserved = reserved_tag_refusal(given(args.tags) or (), self._scope.place)
        if reserved is not None:
            raise fail("memory_store", reserved)
        planned = await self._engine.plan_store(
            {key: msgspec.to_builtins(value)},
            namespace=self._scope.place,
            tags=given(args.tags),
            meta=Meta(source=AGENT_SOURCE),
            trust="unverified",
        )
        wrote: list[int] = []

        def command(txn: WriteTxn) -> dict[str, Any]:
            wrote.clear()
            stored = planned(txn)
            if not stored.replayed:
                wrote.append(stored.seq)
            return render.render_stored(stored)

        return PreparedCall(
            name="memory_store",
            arguments=plain,
            side_effects=True,
            command=command,
            wrote=wrote,
        )

    async def _forget(self, plain: dict[str, Any], args: ForgetArgs) -> PreparedCall:
        ids, picked = given(args.ids), given(args.filter)
        if (ids is None) == (picked is None):
            raise fail("memory_forget", "`ids` or `filter`: give exactly one of them")
        chosen = self._filter(picked)
        if chosen is not None and not chosen:
            raise fail(
                "memory_forget",
                "`filter` must set at least one field (an empty filter would forget "
                "everything you can see)",
            )
        planned, release = self._engine.plan_forget(ids=ids, filter=chosen, reach=self._scope.reach)
        wrote: list[int] = []

        def command(txn: WriteTxn) -> dict[str, Any]:
            wrote.clear()
            forgotten = planned(txn)
            rendered = render.render_forgotten(forgotten)
            wrote.extend(forgotten.seqs)  # only once the whole command went through
            return rendered

        def committed() -> None:
            if wrote:
                release()

        async def after() -> None:
            if wrote:
                await self._engine.scrub()

        return PreparedCall(
            name="memory_forget",
            arguments=plain,
            side_effects=True,
            command=command,
            committed=committed,
            after=after,
            wrote=wrote,
        )
