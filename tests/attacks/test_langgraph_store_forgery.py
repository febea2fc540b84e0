"""Attacks on ``MemsealStore`` from a model whose tools share the host's scope.

docs/durable.md compiles a graph with ``tool_node(memory, SCOPE)`` and
``MemsealStore(memory, SCOPE)``: the model's ``memory_store`` and the host's
long-term store on one scope. Here the model stores crafted envelopes with the
store's tags (every spelling of them) to replace a host value or plant a key;
each is refused naming ``tags`` and nothing is written, and the host reads its
own values. An item the store's tag marks that is not an envelope is skipped and
reported, never fatal to ``asearch`` or ``alist_namespaces``; and of a key's items
the one the log wrote last is the value, whatever ``updated_at`` an envelope
claims. On SQLite and PostgreSQL, through LangGraph's own ``StateGraph``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import PutOp

import memseal
from memseal.errors import InvalidRequest
from memseal.integrations._langgraph_store import _envelope, _key_tag
from memseal.integrations.langgraph import STORE_TAG, MemsealStore, tool_node
from memseal.memory import Memory

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
USER = ("users", "u1")


def _crafted(namespace: tuple[str, ...], key: str, value: dict[str, Any], updated: str) -> str:
    """An envelope as MemsealStore writes it, with the time its writer chooses to state."""
    return _envelope(PutOp(namespace, key, value), value, "2000-01-01T00:00:00+00:00", updated)


async def _model_calls(
    memory: Memory, *calls: dict[str, Any], scope: memseal.ToolScope = SCOPE
) -> dict[str, ToolMessage]:
    """The model's calls through ``tool_node(memory, scope)`` in a compiled graph whose store
    is ``MemsealStore(memory, scope)``, as docs/durable.md builds it: its ToolMessages by id."""
    builder = StateGraph(MessagesState)
    builder.add_node("tools", tool_node(memory, scope))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile(store=MemsealStore(memory, scope))
    ask = AIMessage(content="", tool_calls=list(calls))
    config: Any = {"configurable": {"thread_id": "model-thread"}}
    state = await graph.ainvoke({"messages": [ask]}, config)
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


def _store_call(call_id: str, text: str, tags: list[str]) -> dict[str, Any]:
    args = {"document": {"title": "langgraph store item", "text": text}, "tags": tags}
    return {"name": "memory_store", "args": args, "id": call_id, "type": "tool_call"}


async def _item_count(memory: Memory) -> int:
    """Every live item in the memory, wherever it is."""
    page = await memory.tools(memseal.ToolScope()).call("memory_list", {"limit": 50})
    return len(page["items"])


@pytest.mark.parametrize(
    "tags",
    [
        [STORE_TAG, _key_tag(USER, "profile")],
        [_key_tag(USER, "profile")],
        [STORE_TAG],
        [" LangGraph-Store ", "mine"],
        ["mine", _key_tag(USER, "profile").upper().replace("LGK:", "Lgk:")],
    ],
    ids=["both", "key-tag", "store-tag", "store-tag-spelt-otherwise", "key-tag-spelt-otherwise"],
)
async def test_a_models_envelope_with_the_stores_tags_is_refused_and_the_host_reads_its_own(
    memory: Memory, tags: list[str]
) -> None:
    store = MemsealStore(memory, SCOPE)
    await store.aput(USER, "profile", {"role": "viewer"})
    before = await _item_count(memory)
    forged = _crafted(USER, "profile", {"role": "admin"}, "9999-12-31T00:00:00+00:00")
    planted = _crafted(("admins",), "u1", {"role": "admin"}, "9999-12-31T00:00:00+00:00")
    plant_tags = [STORE_TAG, _key_tag(("admins",), "u1")]
    answers = await _model_calls(
        memory, _store_call("c1", forged, tags), _store_call("c2", planted, plant_tags)
    )
    item = await store.aget(USER, "profile")
    assert item is not None and item.value == {"role": "viewer"}
    assert await store.aget(("admins",), "u1") is None
    assert [(i.namespace, i.key) for i in await store.asearch(())] == [(USER, "profile")]
    assert await store.alist_namespaces() == [USER]
    for call_id in ("c1", "c2"):
        assert answers[call_id].status == "error"
        assert "memory_store: `tags[" in str(answers[call_id].content)
        assert "is reserved for MemsealStore" in str(answers[call_id].content)
    assert await _item_count(memory) == before  # nothing written
    await memory.verify()


async def test_an_untagged_envelope_at_the_models_place_is_not_a_store_item(
    memory: Memory,
) -> None:
    store = MemsealStore(memory, SCOPE)
    await store.aput(USER, "profile", {"role": "viewer"})
    forged = _crafted(USER, "profile", {"role": "admin"}, "9999-12-31T00:00:00+00:00")
    planted = _crafted(("admins",), "u1", {"role": "admin"}, "9999-12-31T00:00:00+00:00")
    answers = await _model_calls(
        memory, _store_call("c1", forged, ["note"]), _store_call("c2", planted, ["note"])
    )
    assert all(json.loads(str(m.content))["id"] for m in answers.values())  # stored, as notes
    item = await store.aget(USER, "profile")
    assert item is not None and item.value == {"role": "viewer"}
    assert await store.aget(("admins",), "u1") is None
    assert [i.value for i in await store.asearch((), query="admin")] == []
    assert await store.alist_namespaces() == [USER]
    # The model's own reads never reach the store's node either.
    listed = await memory.tools(SCOPE).call("memory_list", {"limit": 50})
    assert all("viewer" not in i["text"] for i in listed["items"])


@pytest.mark.parametrize(
    "text", ["not json", "[" * 3000 + "]" * 3000], ids=["not-json", "nested-3000-deep"]
)
async def test_a_tagged_item_that_is_not_an_envelope_is_skipped_and_reported(
    memory: Memory, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    store = MemsealStore(memory, SCOPE)
    await store.aput(USER, "profile", {"role": "viewer"})
    # Written at the store's own node (the host's other code, a bug, an older writer).
    # Nested deeper than a JSON decoder recurses, it once made every read raise for good.
    bad = await memory.tools(store.scope).call(
        "memory_store", {"learning": {"text": text}, "tags": [STORE_TAG]}
    )
    assert not bad.get("truncated")
    with caplog.at_level(logging.WARNING, logger="memseal.integrations.langgraph"):
        assert [i.key for i in await store.asearch(())] == ["profile"]
        assert await store.alist_namespaces() == [USER]
        assert [i.key for i in await store.asearch((), query="viewer")] == ["profile"]
        item = await store.aget(USER, "profile")
        assert item is not None and item.value == {"role": "viewer"}
    assert list(store.skipped) == [bad["id"]]
    warned = [r for r in caplog.records if bad["id"] in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING  # once, however often read
    # The store still writes and reads around it.
    await store.aput(("users", "u2"), "profile", {"role": "editor"})
    assert await store.alist_namespaces() == [USER, ("users", "u2")]


async def test_the_log_order_decides_a_keys_value_never_the_envelopes_updated_at(
    memory: Memory,
) -> None:
    store = MemsealStore(memory, SCOPE)
    writer = memory.tools(store.scope)  # what a put that crashed before its forget leaves
    tags = [STORE_TAG, _key_tag(USER, "profile")]
    for value, updated in (
        ({"role": "claims-newest"}, "9999-12-31T00:00:00+00:00"),
        ({"role": "written-last"}, "2000-01-02T00:00:00+00:00"),
    ):
        text = _crafted(USER, "profile", value, updated)
        await writer.call("memory_store", {"document": {"text": text}, "tags": tags})
    item = await store.aget(USER, "profile")
    assert item is not None and item.value == {"role": "written-last"}
    assert [i.value for i in await store.asearch(())] == [{"role": "written-last"}]
    await store.aput(USER, "profile", {"role": "viewer"})  # forgets both halves
    assert [i.value for i in await store.asearch(())] == [{"role": "viewer"}]


#: A host place whose last segment is a ``langgraph:`` node, as a host may name its graph.
AT_GRAPH = memseal.ToolScope.placed_at("team:acme/langgraph:support-bot")


async def test_a_host_placed_at_a_langgraph_node_keeps_the_model_out_of_its_store(
    memory: Memory,
) -> None:
    # Once any `langgraph:` node took the store's tags, so the model's `memory_store`
    # at this place wrote an envelope the store read as its earlier layout's.
    store = MemsealStore(memory, AT_GRAPH)
    await store.aput(USER, "profile", {"role": "viewer"})
    before = await _item_count(memory)
    forged = _crafted(USER, "profile", {"role": "admin"}, "9999-12-31T00:00:00+00:00")
    planted = _crafted(("admins",), "u1", {"role": "admin"}, "9999-12-31T00:00:00+00:00")
    answers = await _model_calls(
        memory,
        _store_call("c1", forged, [STORE_TAG, _key_tag(USER, "profile")]),
        _store_call("c2", planted, [STORE_TAG, _key_tag(("admins",), "u1")]),
        scope=AT_GRAPH,
    )
    for call_id in ("c1", "c2"):
        assert answers[call_id].status == "error"
        assert "is reserved for MemsealStore" in str(answers[call_id].content)
    assert await _item_count(memory) == before
    fresh = MemsealStore(memory, AT_GRAPH)  # a new process: the layout question asked anew
    item = await fresh.aget(USER, "profile")
    assert item is not None and item.value == {"role": "viewer"}
    assert await fresh.aget(("admins",), "u1") is None
    assert await fresh.alist_namespaces() == [USER]


async def test_earlier_layout_items_at_a_langgraph_place_are_not_read(memory: Memory) -> None:
    # What a model at that place could write before: not taken for the host's value.
    forged = _crafted(USER, "profile", {"role": "admin"}, "9999-12-31T00:00:00+00:00")
    await memory.engine.store(
        {"document": {"title": "langgraph store item", "text": forged}},
        namespace=AT_GRAPH.place,
        tags=[STORE_TAG, _key_tag(USER, "profile")],
    )
    store = MemsealStore(memory, AT_GRAPH)
    assert await store.aget(USER, "profile") is None
    assert await store.asearch(()) == [] and await store.alist_namespaces() == []
    await store.aput(USER, "profile", {"role": "viewer"})
    item = await store.aget(USER, "profile")
    assert item is not None and item.value == {"role": "viewer"}


@pytest.mark.parametrize(
    "place", ["team:acme/agent:writer/langgraph:store", "langgraph:store"], ids=["below", "root"]
)
async def test_the_stores_own_node_is_refused_as_a_host_or_a_model_scope(
    memory: Memory, place: str
) -> None:
    # There the model's memory_store may write the store's tags: a scope placed at it is
    # the store's alone.
    scope = memseal.ToolScope.placed_at(place)
    with pytest.raises(InvalidRequest, match=r"^`scope`: .*langgraph:store"):
        MemsealStore(memory, scope)
    with pytest.raises(InvalidRequest, match=r"^`scope`: .*langgraph:store"):
        tool_node(memory, scope)
    assert await _item_count(memory) == 0


async def test_a_number_no_float_holds_matches_no_comparison_and_breaks_no_search(
    memory: Memory,
) -> None:
    store = MemsealStore(memory, SCOPE)
    await store.aput(USER, "profile", {"role": "viewer", "n": 10**400})
    await store.aput(("users", "u2"), "profile", {"role": "editor", "n": 5})
    for filter, keys in (
        ({"n": {"$gt": 1}}, [("users", "u2")]),
        ({"n": {"$lte": 10**400}}, []),
        ({"n": {"$eq": 10**400}}, [USER]),
        ({"n": 10**400}, [USER]),
    ):
        found = await store.asearch((), filter=filter)
        assert [i.namespace for i in found] == keys, filter
    item = await store.aget(USER, "profile")
    assert item is not None and item.value["n"] == 10**400  # kept exactly
