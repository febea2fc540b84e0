"""The :class:`ToolScope`: what the host fixes and a model never chooses.

A model's tools act for one agent. Where its writes land, what its reads
and forgets may touch, whether it may write at all, and how little trust it
may ask for are the host's decisions, made from the session's identity and
never from anything the model said; none of them is ever a tool argument.

=================  ==========================================================
``place``          the namespace every stored item is written to
``reach``          the namespaces every read and forget is confined to
                   (``None`` reads every namespace)
``writes``         whether memory_store and memory_forget are offered at all
``floor``          the lowest ``min_trust`` a model may ask for
``default_trust``  the ``min_trust`` reads use when the model names none
``frozen``         writes are offered but refused (a write freeze)
``allowlist``      the only tools offered and callable (``None``: all of them)
=================  ==========================================================

``ToolScope()`` is the single-tenant scope: the root, every namespace in
reach, writes on, trust floor and default ``unverified``.
``ToolScope.placed_at(ns)`` places an agent at ``ns`` with the reach
``Reach.of(ns)``: its node and its ancestors, never a sibling.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from memseal.engine import Namespace, Reach, Trust
from memseal.engine.trust import READABLE, trust_rank
from memseal.ledger.errors import InvalidRequest

from .catalog import TOOL_NAMES

__all__ = ["ToolScope"]


class ToolScope(msgspec.Struct, frozen=True, kw_only=True):
    """The host-fixed scope of one agent's tools (see the module docstring).

    Validated when built: a bad place, an unknown trust level, a default
    below the floor or an unknown tool in the allowlist is an
    :class:`InvalidRequest` naming the field.
    """

    place: str = ""
    reach: Reach | None = None
    writes: bool = True
    floor: Trust = "unverified"
    default_trust: Trust = "unverified"
    frozen: bool = False
    allowlist: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        place: object = self.place
        if isinstance(place, Namespace):
            msgspec.structs.force_setattr(self, "place", place.text)
        elif not isinstance(place, str):
            raise InvalidRequest("`place` must be a namespace like `team:acme/agent:writer`")
        Namespace(self.place, field="place")
        reach: object = self.reach
        if reach is not None and not isinstance(reach, Reach):
            raise InvalidRequest("`reach` must be a Reach (Reach.of, .subtree, .exact) or None")
        for name in ("writes", "frozen"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidRequest(f"`{name}` must be True or False")
        for name in ("floor", "default_trust"):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in READABLE:
                raise InvalidRequest(f"`{name}`: {value!r} is not one of {', '.join(READABLE)}")
        if trust_rank(self.default_trust) < trust_rank(self.floor):
            raise InvalidRequest(
                f"`default_trust` {self.default_trust} is below the `floor` {self.floor}"
            )
        if self.allowlist is not None:
            names: object = self.allowlist
            if isinstance(names, str) or not isinstance(names, Iterable):
                raise InvalidRequest("`allowlist` must be a list of tool names, or None")
            listed = tuple(names)
            for name in listed:
                if not isinstance(name, str) or name not in TOOL_NAMES:
                    raise InvalidRequest(
                        f"`allowlist`: {name!r} is not a tool ({', '.join(TOOL_NAMES)})"
                    )
            msgspec.structs.force_setattr(self, "allowlist", tuple(dict.fromkeys(listed)))

    @classmethod
    def placed_at(cls, place: Namespace | str, **fields: Any) -> ToolScope:
        """An agent placed at ``place``, reading its node and its ancestors.

        Other fields (``writes``, ``floor``...) may be given by keyword;
        ``reach`` too, to read more or less than ``Reach.of(place)``.
        """
        text = Namespace.parse(place, field="place").text
        fields.setdefault("reach", Reach.of(text))
        return cls(place=text, **fields)

    @property
    def namespace(self) -> Namespace:
        """:attr:`place` as a :class:`Namespace`."""
        return Namespace(self.place)

    def replace(self, **fields: Any) -> ToolScope:
        """A copy with ``fields`` changed (validated again)."""
        return msgspec.structs.replace(self, **fields)

    def offers(self, name: str) -> bool:
        """Whether the allowlist lets a tool be offered (writes and modes are checked apart)."""
        return self.allowlist is None or name in self.allowlist
