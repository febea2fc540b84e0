"""Namespaces and reach: where an item lives, and which items a read may see.

A namespace is a path of ``type:name`` segments joined by ``/``, such as
``team:acme/agent:writer``; the empty path is the root. A :class:`Reach`
confines every read and forget:

* ``Reach.of(place)``: the place and its ancestors (what an agent shares
  with its team and the root), the default for a placed agent;
* ``Reach.subtree(node)``: the node and everything below it;
* ``Reach.exact(node)``: the node alone;
* ``None`` (no reach): every namespace.

Matching respects segment boundaries: ``team:acme`` reaches neither
``team:acme-corp`` nor ``team:acmeco/agent:x``, because the SQL compares
whole paths or the prefix ``team:acme/``, never a bare string prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

import msgspec

from memseal.ledger.errors import InvalidRequest

__all__ = ["MAX_DEPTH", "Namespace", "Reach", "check_reach", "reach_sql"]

MAX_DEPTH = 16
_TYPE = r"[a-z][a-z0-9_-]{0,31}"
# Names are identifiers people choose (user names, repo names, emails), so they
# allow more than types do, but never the separators `/` and `:` or whitespace.
_NAME = r"[A-Za-z0-9][A-Za-z0-9._@+=-]{0,127}"
_SEGMENT = re.compile(rf"({_TYPE}):({_NAME})")


class Namespace:
    """A validated namespace path; compares and hashes by its text."""

    __slots__ = ("_segments", "_text")

    def __init__(self, text: str, *, field: str = "namespace") -> None:
        if not isinstance(text, str):
            raise InvalidRequest(f"`{field}` must be text like `team:acme/agent:writer`")
        segments: tuple[tuple[str, str], ...] = ()
        if text:
            parts = text.split("/")
            if len(parts) > MAX_DEPTH:
                raise InvalidRequest(f"`{field}` has {len(parts)} segments; at most {MAX_DEPTH}")
            parsed = []
            for part in parts:
                match = _SEGMENT.fullmatch(part)
                if match is None:
                    raise InvalidRequest(
                        f"`{field}`: segment {part!r} is not `type:name` (type lowercase "
                        "letters, digits, `_` or `-`; name letters, digits or `._@+=-`)"
                    )
                parsed.append((match.group(1), match.group(2)))
            segments = tuple(parsed)
        self._text = text
        self._segments = segments

    @classmethod
    def root(cls) -> Namespace:
        """The empty namespace, above every other."""
        return cls("")

    @classmethod
    def parse(cls, value: Namespace | str, *, field: str = "namespace") -> Namespace:
        """``value`` as a Namespace, checked; errors name ``field``."""
        return value if isinstance(value, Namespace) else cls(value, field=field)

    @property
    def text(self) -> str:
        """The namespace as written: ``kind:name`` segments joined by ``/``."""
        return self._text

    @property
    def segments(self) -> tuple[tuple[str, str], ...]:
        """The ``(kind, name)`` pairs from the root down."""
        return self._segments

    @property
    def is_root(self) -> bool:
        """Whether this is the root namespace."""
        return not self._segments

    def ancestors(self) -> Iterator[Namespace]:
        """The root, every ancestor, then this namespace itself (outermost first)."""
        parts = self._text.split("/") if self._text else []
        for depth in range(len(parts) + 1):
            yield Namespace("/".join(parts[:depth]))

    def child(self, kind: str, name: str) -> Namespace:
        """The namespace one ``kind:name`` segment below this one."""
        segment = f"{kind}:{name}"
        return Namespace(f"{self._text}/{segment}" if self._text else segment)

    def contains(self, other: Namespace) -> bool:
        """Whether ``other`` is this namespace or below it (segment-wise)."""
        if self.is_root:
            return True
        return other._text == self._text or other._text.startswith(self._text + "/")

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Namespace({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Namespace) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


ReachMode = Literal["of", "subtree", "exact"]


class Reach(msgspec.Struct, frozen=True, kw_only=True):
    """Which namespaces a read or forget may touch (see the module docstring)."""

    mode: ReachMode
    node: str

    @classmethod
    def of(cls, place: Namespace | str) -> Reach:
        """The place and its ancestors up to the root."""
        return cls(mode="of", node=Namespace.parse(place, field="reach").text)

    @classmethod
    def subtree(cls, node: Namespace | str) -> Reach:
        """A reach over ``node`` and every namespace below it."""
        return cls(mode="subtree", node=Namespace.parse(node, field="reach").text)

    @classmethod
    def exact(cls, node: Namespace | str) -> Reach:
        """A reach over ``node`` alone."""
        return cls(mode="exact", node=Namespace.parse(node, field="reach").text)

    def __post_init__(self) -> None:
        # A Reach may also arrive through a decoder; check it the same way.
        Namespace(self.node, field="reach.node")

    def admits(self, namespace: Namespace | str) -> bool:
        """Whether an item at ``namespace`` is inside this reach."""
        ns = Namespace.parse(namespace)
        node = Namespace(self.node)
        if self.mode == "exact":
            return ns == node
        if self.mode == "subtree":
            return node.contains(ns)
        return ns.contains(node)


def reach_sql(reach: Reach | None, column: str) -> tuple[str, list[Any]]:
    """A SQL condition on ``column`` (a namespace text column) for ``reach``.

    Subtrees use a half-open text range on ``node/``: every path below the
    node starts with exactly that, and ``0`` is the character after ``/``,
    so the range is the prefix without LIKE's wildcard escaping.
    """
    if reach is None:
        return "1 = 1", []
    if reach.mode == "exact":
        return f"{column} = ?", [reach.node]
    if reach.mode == "of":
        names = [ns.text for ns in Namespace(reach.node).ancestors()]
        return f"{column} IN ({','.join('?' * len(names))})", names
    if not reach.node:
        return "1 = 1", []
    return (
        f"({column} = ? OR ({column} >= ? AND {column} < ?))",
        [reach.node, reach.node + "/", reach.node + "0"],
    )


def check_reach(value: object) -> Reach | None:
    """``value`` if it is a :class:`Reach` or None (no reach: every namespace), else
    :class:`InvalidRequest`."""
    if value is None or isinstance(value, Reach):
        return value
    raise InvalidRequest("`reach` must be a Reach (Reach.of, Reach.subtree, Reach.exact) or None")
