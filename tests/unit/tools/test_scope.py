"""ToolScope and the MemoryTools builders: what the host fixes, checked when it is built."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import msgspec
import pytest

from memseal.engine import Engine, Namespace, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.tools import TOOL_NAMES, MemoryTools, ToolScope

PLACE = "team:acme/agent:writer"


def test_the_default_scope_is_the_single_tenant_root() -> None:
    scope = ToolScope()
    assert (scope.place, scope.reach, scope.writes, scope.frozen) == ("", None, True, False)
    assert (scope.floor, scope.default_trust, scope.allowlist) == ("unverified", "unverified", None)


def test_placed_at_reads_the_place_and_its_ancestors() -> None:
    scope = ToolScope.placed_at(PLACE)
    assert scope.place == PLACE
    assert scope.reach == Reach.of(PLACE)
    assert ToolScope.placed_at(Namespace(PLACE)).place == PLACE
    wider = ToolScope.placed_at(PLACE, reach=Reach.subtree("team:acme"), writes=False)
    assert wider.reach == Reach.subtree("team:acme") and not wider.writes


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"place": "team acme"}, "`place`"),
        ({"place": 7}, "`place` must be a namespace"),
        ({"reach": "team:acme"}, "`reach` must be a Reach"),
        ({"writes": "yes"}, "`writes` must be True or False"),
        ({"frozen": 1}, "`frozen` must be True or False"),
        ({"floor": "rejected"}, "`floor`"),
        ({"default_trust": "trusted"}, "`default_trust`"),
        ({"floor": "verified", "default_trust": "unverified"}, "below the `floor`"),
        ({"allowlist": ["memory_fetch", "memory_add"]}, "`allowlist`: 'memory_add'"),
        ({"allowlist": "memory_fetch"}, "`allowlist` must be a list"),
    ],
)
def test_a_bad_scope_is_refused_naming_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        ToolScope(**fields)  # type: ignore[arg-type]


def test_a_scope_is_frozen_and_replace_checks_again() -> None:
    scope = ToolScope.placed_at(PLACE, allowlist=["memory_get", "memory_get"])
    assert scope.allowlist == ("memory_get",)
    with pytest.raises(AttributeError):
        scope.place = "team:other"  # type: ignore[misc]
    with pytest.raises(InvalidRequest):
        scope.replace(floor="nope")
    # Encodable as it is: the replay layer fingerprints place, reach, writes and floor.
    assert msgspec.to_builtins(scope)["reach"] == {"mode": "of", "node": PLACE}


async def test_builders_return_new_narrower_tools(engine: Engine) -> None:
    root = MemoryTools(engine)
    assert root.scope == ToolScope()
    agent = root.placed_at(PLACE)
    assert agent is not root and root.scope == ToolScope()
    assert agent.scope.reach == Reach.of(PLACE) and agent.scope.place == PLACE
    team = agent.reach(Reach.subtree("team:acme"))
    assert team.scope.reach == Reach.subtree("team:acme") and team.scope.place == PLACE
    # Placing again resets the reach to the new place and its ancestors.
    moved = team.placed_at("team:acme/agent:reader")
    assert moved.scope.reach == Reach.of("team:acme/agent:reader")
    read_only = moved.read_only()
    assert not read_only.scope.writes and moved.scope.writes
    assert read_only.names() == TOOL_NAMES[:5]
    zoned = read_only.in_zone(ZoneInfo("Europe/Lisbon"))
    assert zoned.zone == ZoneInfo("Europe/Lisbon") and zoned.scope == read_only.scope
    assert read_only.zone is None
    frozen = zoned.with_scope(ToolScope.placed_at(PLACE, frozen=True))
    assert frozen.scope.frozen and frozen.zone == ZoneInfo("Europe/Lisbon")
    assert frozen.engine is engine


async def test_tools_check_what_they_are_built_from(engine: Engine) -> None:
    with pytest.raises(InvalidRequest, match="`engine`"):
        MemoryTools("engine")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="`scope`"):
        MemoryTools(engine, {"place": PLACE})  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="`zone`"):
        MemoryTools(engine).in_zone("UTC")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="`place`"):
        MemoryTools(engine).placed_at("not a namespace")
