"""The standard namespace tree of one tenant, and the scope of each role in it.

Hosts used to spell namespaces by hand, and a typo put an agent's memory
where no other part would look (or where another agent could). A
:class:`MemoryLayout` names every node once::

    team:acme                                   shared team learnings
    team:acme/brain:docs                        the brain (every source below it)
    team:acme/brain:docs/source:<source>        one source's documents
    team:acme/agent:<agent>                     the agent's own learnings
    team:acme/agent:<agent>/thread:<thread>     one conversation of the agent

The brain sits one node below the tenant (``brain:docs``, the ``brain``
name chosen by the host) so that one subtree reach covers every source and
nothing else: no agent's learnings or conversations are inside it.

Each role gets its :class:`ToolScope`, fixed here and never by a model:

==================  =================================  ====================================
role                place                              reach, writes
==================  =================================  ====================================
agent writer        the agent's node                   its node and ancestors; writes
learnings writer    the agent's node                   its subtree (its threads); writes
brain reader        the brain                          the brain's subtree; read-only
brain writer        one source                         that source only; writes
thread writer       one thread                         that thread only; writes (the host)
auditor             the tenant                         the tenant's subtree; read-only
==================  =================================  ====================================

A frozen layout (``MemoryLayout(tenant=..., frozen=True)``) hands every writer
role a frozen scope: its write tools are offered and refused, so an agent under
a freeze writes nothing through any role (a session's turns, the model's tools,
the belief builds, which a :class:`JobQueue` then holds). The read-only roles
are the same frozen or not: a freeze changes nothing they do.

Names are checked as namespace names (letters, digits and ``._@+=-``,
starting with a letter or digit, at most 128 characters): a bad one is an
:class:`InvalidRequest` naming the argument.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from memseal.engine import Namespace, Reach, Trust
from memseal.ledger.errors import InvalidRequest
from memseal.tools.scope import ToolScope

__all__ = ["DEFAULT_BRAIN", "MemoryLayout", "check_name"]

DEFAULT_BRAIN: Final = "docs"


def check_name(value: object, field: str) -> str:
    """``value`` if it is a valid namespace name, else :class:`InvalidRequest` naming ``field``."""
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"`{field}` must be a non-empty name like `writer` or `t-42`")
    try:
        Namespace(f"x:{value}", field=field)
    except InvalidRequest:
        raise InvalidRequest(
            f"`{field}`: {value[:60]!r} is not a name (letters, digits or `._@+=-`, "
            "starting with a letter or digit, at most 128 characters)"
        ) from None
    return value


class MemoryLayout(msgspec.Struct, frozen=True, kw_only=True):
    """One tenant's standard tree (see the module docstring).

    ``tenant`` is the tenant's namespace (``team:acme``; a bare name such as
    ``acme`` is read as ``team:acme``). ``floor`` and ``default_trust`` are
    given to every scope the layout hands out; ``frozen`` to every writer's (a write
    freeze: see the module docstring).
    """

    tenant: str
    brain: str = DEFAULT_BRAIN
    floor: Trust = "unverified"
    default_trust: Trust = "unverified"
    frozen: bool = False

    def __post_init__(self) -> None:
        tenant: object = self.tenant
        if isinstance(tenant, Namespace):
            tenant = tenant.text
        if isinstance(tenant, str) and tenant and ":" not in tenant and "/" not in tenant:
            tenant = f"team:{check_name(tenant, 'tenant')}"
        if not isinstance(tenant, str) or not tenant:
            raise InvalidRequest("`tenant` must be a namespace like `team:acme` (or a name)")
        msgspec.structs.force_setattr(self, "tenant", Namespace(tenant, field="tenant").text)
        check_name(self.brain, "brain")
        if not isinstance(self.frozen, bool):
            raise InvalidRequest("`frozen` must be True or False")
        # The scopes check the trust levels; build one now so a bad level fails here.
        ToolScope(floor=self.floor, default_trust=self.default_trust)

    # -- the nodes --------------------------------------------------------------------------

    @property
    def team(self) -> str:
        """The tenant's node: the team's shared learnings."""
        return self.tenant

    @property
    def brain_root(self) -> str:
        """The brain's node: every source's documents are below it."""
        return Namespace(self.tenant).child("brain", self.brain).text

    def brain_source(self, source: str) -> str:
        """The node of one brain source's documents."""
        return Namespace(self.brain_root).child("source", check_name(source, "source")).text

    def agent(self, agent: str) -> str:
        """The agent's node: its own learnings."""
        return Namespace(self.tenant).child("agent", check_name(agent, "agent")).text

    def thread(self, agent: str, thread: str) -> str:
        """The node of one conversation of the agent."""
        return Namespace(self.agent(agent)).child("thread", check_name(thread, "thread")).text

    # -- the roles --------------------------------------------------------------------------

    def _scope(self, place: str, reach: Reach, **fields: Any) -> ToolScope:
        # A writer carries the freeze; a reader is left as it is, so its runs (a run
        # belongs to its whole scope) stay the same whether the layout is frozen or not.
        if fields.get("writes", True):
            fields["frozen"] = self.frozen
        return ToolScope(
            place=place,
            reach=reach,
            floor=self.floor,
            default_trust=self.default_trust,
            **fields,
        )

    def agent_writer(self, agent: str) -> ToolScope:
        """The model's tools for an agent: writes to its node, reads it and its ancestors
        (its own and the team's learnings), never a sibling agent or the brain."""
        node = self.agent(agent)
        return self._scope(node, Reach.of(node))

    def learnings_writer(self, agent: str) -> ToolScope:
        """The scope the agent's background belief builds run under (a :class:`JobQueue`'s):
        beliefs are stored at the agent's node, and the reach is the agent's subtree, so a
        job reads the turns of every thread of the agent and nothing of another agent."""
        node = self.agent(agent)
        return self._scope(node, Reach.subtree(node))

    def brain_reader(self) -> ToolScope:
        """Read-only tools over the whole brain (every source)."""
        return self._scope(self.brain_root, Reach.subtree(self.brain_root), writes=False)

    def brain_writer(self, source: str) -> ToolScope:
        """Tools that write one source's documents, and read and forget only those: the
        scope a :class:`Brain` takes (``Brain(memory, layout.brain_writer("handbook"))``),
        whose chunks :meth:`brain_reader` and every session's ``brain`` reach then see."""
        node = self.brain_source(source)
        return self._scope(node, Reach.exact(node))

    def thread_writer(self, agent: str, thread: str) -> ToolScope:
        """The host's tools for one conversation: turns and summaries are written there,
        and reads and forgets stay inside it."""
        node = self.thread(agent, thread)
        return self._scope(node, Reach.exact(node))

    def auditor(self) -> ToolScope:
        """Read-only tools over everything the tenant holds."""
        return self._scope(self.tenant, Reach.subtree(self.tenant), writes=False)

    def reader(self, place: str, reach: Reach) -> ToolScope:
        """A read-only scope at ``place`` confined to ``reach`` (what recall reads through)."""
        return self._scope(Namespace.parse(place, field="place").text, reach, writes=False)
