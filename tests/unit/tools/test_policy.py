"""Policy apart from registration: refusals before approval, and the call refusing the same."""

from __future__ import annotations

import pytest

from memseal.engine import Engine
from memseal.ledger.errors import InvalidRequest, Unsupported
from memseal.tools import (
    READ_TOOLS,
    TOOL_NAMES,
    WRITE_TOOLS,
    MemoryTools,
    Refusal,
    ToolScope,
    has_side_effects,
    refusal_before_approval,
)

PLACE = "team:acme/agent:writer"
JUNK = [None, "not json", {"namespace": "x"}, {"bogus": 1}, [1, 2]]


def test_each_tool_says_whether_it_has_side_effects() -> None:
    assert [has_side_effects(n) for n in TOOL_NAMES] == [False] * 5 + [True] * 2
    assert not has_side_effects("memory_bogus")


@pytest.mark.parametrize(
    ("scope", "name", "code"),
    [
        (ToolScope(allowlist=("memory_get",)), "memory_fetch", "not_allowed"),
        (
            ToolScope(allowlist=("memory_get",), writes=False, frozen=True),
            "memory_store",
            "not_allowed",
        ),
        (ToolScope(writes=False, frozen=True), "memory_forget", "read_only"),
        (ToolScope(writes=False), "memory_store", "read_only"),
        (ToolScope(frozen=True), "memory_store", "frozen"),
        (ToolScope(frozen=True), "memory_forget", "frozen"),
    ],
)
async def test_the_call_refuses_what_the_gate_refused_in_the_same_order(
    engine: Engine, scope: ToolScope, name: str, code: str
) -> None:
    tools = MemoryTools(engine, scope)
    for arguments in JUNK:  # refused before any schema check, whatever the arguments
        refusal = tools.refusal_before_approval(name, arguments)
        assert isinstance(refusal, Refusal) and refusal.code == code and refusal.tool == name
        assert refusal_before_approval(scope, name, arguments).code == code  # type: ignore[union-attr]
        with pytest.raises(Refusal) as caught:
            await tools.call(name, arguments)  # type: ignore[arg-type]
        assert caught.value.code == code and str(caught.value) == str(refusal)
        assert str(caught.value).startswith(f"{name}: ")
    assert isinstance(refusal, Unsupported)  # the seed's error for a write on read-only tools
    assert (await engine.ledger.size()) == 0


async def test_nothing_is_refused_for_an_open_scope(engine: Engine) -> None:
    tools = MemoryTools(engine, ToolScope.placed_at(PLACE))
    for name in TOOL_NAMES:
        assert tools.refusal_before_approval(name, None) is None
    # An unknown tool is no refusal; the call reports it as an invalid request.
    assert tools.refusal_before_approval("memory_bogus", {}) is None
    with pytest.raises(InvalidRequest, match="unknown tool `memory_bogus`; the tools offered are"):
        await tools.call("memory_bogus", {})
    with pytest.raises(InvalidRequest, match="the tool name must be text"):
        await tools.call(7, {})  # type: ignore[arg-type]


async def test_frozen_reads_still_run(engine: Engine) -> None:
    tools = MemoryTools(engine, ToolScope.placed_at(PLACE, frozen=True))
    for name in READ_TOOLS:
        assert tools.refusal_before_approval(name) is None
    assert (await tools.call("memory_list", {}))["items"] == []
    for name in WRITE_TOOLS:
        assert tools.side_effects(name)


async def test_a_tool_outside_the_allowlist_is_neither_offered_nor_callable(
    engine: Engine,
) -> None:
    tools = MemoryTools(engine, ToolScope.placed_at(PLACE, allowlist=("memory_list",)))
    assert tools.names() == ("memory_list",)
    assert [t.name for t in tools.toolset()] == ["memory_list"]
    with pytest.raises(Refusal, match="memory_fetch: this tool is not allowed for this agent"):
        await tools.call("memory_fetch", {"query": "x"})
    text = await tools.toolset().call("memory_fetch", {"query": "x"})
    assert text.startswith("error: memory_fetch: this tool is not allowed")
