"""Reserved tags: memory_store writes one only at its owner's own node, in any spelling."""

from __future__ import annotations

import pytest

from memseal.engine import Engine
from memseal.ledger.errors import InvalidRequest
from memseal.tools import MemoryTools, ToolScope
from memseal.tools._reserved import reserved_tag_refusal

PLACE = "team:acme/agent:writer"


@pytest.mark.parametrize(
    "tag",
    ["langgraph-store", "LangGraph-Store", " langgraph-store ", "lgk:0a1b", "LGK:0A1B", "lgk:"],
)
def test_a_reserved_tag_in_any_spelling_is_refused_but_at_its_owners_node(tag: str) -> None:
    refusal = reserved_tag_refusal(["mine", tag], PLACE)
    assert refusal is not None and refusal.startswith("`tags[1]`:")
    assert reserved_tag_refusal([tag], "") is not None  # the root is no langgraph node
    assert reserved_tag_refusal([tag], f"{PLACE}/langgraph:store") is None
    assert reserved_tag_refusal([tag], "langgraph:store") is None
    # The store's node whole, never any node of its type: a host may name its place so.
    assert reserved_tag_refusal([tag], "langgraph:x") is not None
    assert reserved_tag_refusal([tag], f"{PLACE}/langgraph:support-bot") is not None
    assert reserved_tag_refusal([tag], f"{PLACE}/langgraph:Store") is not None
    # Only the last segment counts: a node below the store's is not the store's.
    assert reserved_tag_refusal([tag], f"{PLACE}/langgraph:store/agent:b") is not None


@pytest.mark.parametrize("tag", ["langgraph-store-notes", "langgraph", "lgk", "xlgk:1", "store"])
def test_tags_that_only_resemble_a_reserved_one_are_free(tag: str) -> None:
    assert reserved_tag_refusal([tag], PLACE) is None


async def test_memory_store_refuses_a_reserved_tag_naming_tags_and_writes_nothing(
    engine: Engine,
) -> None:
    everything = MemoryTools(engine, ToolScope())
    tools = MemoryTools(engine, ToolScope.placed_at(PLACE))
    with pytest.raises(InvalidRequest, match=r"^memory_store: `tags\[0\]`: 'lgk:1' is reserved"):
        await tools.call("memory_store", {"learning": {"text": "x"}, "tags": ["lgk:1"]})
    assert (await everything.call("memory_list", {}))["items"] == []
    at_node = MemoryTools(engine, ToolScope.placed_at(f"{PLACE}/langgraph:store"))
    stored = await at_node.call("memory_store", {"learning": {"text": "x"}, "tags": ["lgk:1"]})
    listed = (await everything.call("memory_list", {}))["items"]
    assert [i["id"] for i in listed] == [stored["id"]]
