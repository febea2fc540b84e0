"""``MemsealStore`` behaves as LangGraph's ``InMemoryStore`` and signs every write.

A behaviour table runs the same operations against both stores and compares what
LangGraph code can see (scores and timestamps aside); every put and delete is a
signed ``memory_tool_call`` entry and the ledger verifies; bad input is refused
before anything is written; a compiled ``StateGraph`` uses the store from a node.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

import memseal
from memseal.integrations.langgraph import STORE_NODE, STORE_TAG, MemsealStore
from memseal.memory import STORE_ENV
from memseal.tools import ToolScope

PLACE = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(PLACE)


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


async def _writes(memory: memseal.Memory) -> list[str]:
    """The tools of the signed calls that wrote (store and forget), in ledger order."""
    rows = await memory.ledger.store.rows("SELECT seq FROM memos ORDER BY seq")
    tools = []
    for (seq,) in rows:
        entry = (await memory.ledger.read(int(seq))).entry()
        assert entry.kind == "memory_tool_call"
        body = msgspec.json.decode(bytes(entry.body))
        if body["tool"] in ("memory_store", "memory_forget"):
            tools.append(body["tool"])
    return tools


def _visible(result: Any) -> Any:
    """What LangGraph code sees of a result, scores and timestamps aside."""
    if isinstance(result, Item):
        return (result.namespace, result.key, json.dumps(result.value))
    if isinstance(result, list):
        return [_visible(r) for r in result]
    return result


UI = ("users", "u1", "prefs")
DOCS = ("users", "u1", "docs")
OTHER = ("users", "u2", "prefs")
VALUE = {"theme": "dark", "size": 12, "nested": {"a": [1, 2.5, None, True]}, "ü": "snow ☃"}

# (method, args, kwargs): one LangGraph call each; the table is replayed on both stores.
TABLE: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("put", (UI, "theme", VALUE), {}),
    ("get", (UI, "theme"), {}),
    ("get", (UI, "missing"), {}),
    ("put", (UI, "font", {"family": "mono", "size": 12}), {}),
    ("put", (DOCS, "d1", {"title": "deploy notes", "size": 3}), {}),
    ("put", (DOCS, "d2", {"title": "retro", "size": 12}), {}),
    ("put", (OTHER, "theme", {"theme": "light"}), {}),
    ("search", (("users",),), {}),
    ("search", (("users", "u1"),), {"limit": 2}),
    ("search", (("users", "u1"),), {"limit": 2, "offset": 2}),
    ("search", (("users",),), {"filter": {"size": 12}}),
    ("search", (("users", "u1"),), {"filter": {"size": {"$gte": 5}}}),
    ("search", (("users",),), {"filter": {"nested": {"a": [1, 2.5, None, True]}}}),
    ("search", (("nobody",),), {}),
    ("put", (UI, "theme", {"theme": "light", "replaced": True}), {}),
    ("get", (UI, "theme"), {}),
    ("delete", (DOCS, "d2"), {}),
    ("get", (DOCS, "d2"), {}),
    ("delete", (DOCS, "never-put"), {}),
    ("list_namespaces", (), {}),
    ("list_namespaces", (), {"prefix": ("users", "u1")}),
    ("list_namespaces", (), {"suffix": ("prefs",)}),
    ("list_namespaces", (), {"prefix": ("users", "*", "prefs")}),
    ("list_namespaces", (), {"max_depth": 2}),
    ("list_namespaces", (), {"limit": 1, "offset": 1}),
    ("search", (("users", "u1", "docs"),), {}),
]

# Both stores order a search by put order; InMemoryStore keeps a replaced key in
# its first place, so the table reads one namespace's order only before a replace.
PUTS = sum(1 for method, _, _ in TABLE if method == "put")


async def _play_async(store: BaseStore) -> list[Any]:
    out = []
    for method, args, kwargs in TABLE:
        out.append(_visible(await getattr(store, "a" + method)(*args, **kwargs)))
    return out


def _play_sync(store: BaseStore) -> list[Any]:
    return [_visible(getattr(store, m)(*a, **k)) for m, a, k in TABLE]


async def test_the_behaviour_table_matches_in_memory_store_and_signs_every_write(
    tmp_path: Path,
) -> None:
    expected = _play_sync(InMemoryStore())
    async with _open(tmp_path) as memory:
        got = await _play_async(MemsealStore(memory, SCOPE))
        for i, (row, want, have) in enumerate(zip(TABLE, expected, got, strict=True)):
            assert have == want, f"row {i} {row[0]}{row[1:]}"
        writes = await _writes(memory)
        # One store per put, one forget per replace and per delete of a live key.
        assert writes.count("memory_store") == PUTS == 6
        assert writes.count("memory_forget") == 2  # the replace and the delete of d2
        await memory.verify()


def test_the_sync_facade_plays_the_same_table(tmp_path: Path) -> None:
    expected = _play_sync(InMemoryStore())
    with memseal.open_sync(tmp_path, embedder=None, checkpoint_interval=None) as memory:
        assert _play_sync(MemsealStore(memory, SCOPE)) == expected


async def test_sync_methods_on_the_memorys_own_loop_are_refused(tmp_path: Path) -> None:
    async with _open(tmp_path) as memory:
        store = MemsealStore(memory, SCOPE)
        with pytest.raises(memseal.InvalidRequest, match="use the async form"):
            store.put(UI, "k", {"v": 1})
        assert await _writes(memory) == []


async def test_values_round_trip_byte_equal_after_json(tmp_path: Path) -> None:
    value = {"z": 1, "a": [0.1, 1e-300, -0.0, 2**60], "é\u0301": "e\u0301", " pad ": " x\t\n"}
    async with _open(tmp_path) as memory:
        store = MemsealStore(memory, SCOPE)
        await store.aput(UI, "odd", value)
        item = await store.aget(UI, "odd")
        assert item is not None
        assert json.dumps(item.value) == json.dumps(value)  # key order, floats, NFD kept


async def test_a_batch_reads_before_its_puts_as_in_memory_store(tmp_path: Path) -> None:
    ops: list[Op] = [
        PutOp(UI, "k", {"v": 1}),
        GetOp(UI, "k"),
        PutOp(UI, "k", {"v": 2}),
        SearchOp(("users",)),
    ]
    reference = InMemoryStore()
    want = [_visible(r) for r in reference.batch(ops)]
    async with _open(tmp_path) as memory:
        store = MemsealStore(memory, SCOPE)
        assert [_visible(r) for r in await store.abatch(ops)] == want
        assert _visible(await store.aget(UI, "k")) == _visible(reference.get(UI, "k"))
        assert await _writes(memory) == ["memory_store"]  # the last put of a key wins


async def test_search_with_a_query_uses_memseal_fetch(tmp_path: Path) -> None:
    async with _open(tmp_path) as memory:
        store = MemsealStore(memory, SCOPE)
        await store.aput(DOCS, "d1", {"text": "the deploy runbook for Tuesdays"})
        await store.aput(DOCS, "d2", {"text": "lunch menu"})
        await store.aput(OTHER, "d3", {"text": "deploy freeze in December"})
        hits = await store.asearch(("users", "u1"), query="deploy")
        assert [(h.namespace, h.key) for h in hits] == [(DOCS, "d1")]
        assert hits[0].score is not None
        everywhere = await store.asearch(("users",), query="deploy", limit=1)
        assert len(everywhere) == 1


@pytest.mark.parametrize(
    ("namespace", "key", "value", "message"),
    [
        (("users", ""), "k", {"v": 1}, "must not be empty"),
        (("users", 7), "k", {"v": 1}, "must be text"),
        (("a.b",), "k", {"v": 1}, "period"),
        ((), "k", {"v": 1}, "must not be empty"),
        (("users",), "k", ["not", "a", "dict"], "must be a dict"),
        (("users",), "k", {"v": float("nan")}, "not JSON"),
        (("users",), "k", {"v": object()}, "not JSON"),
        (("users",), "k", {"v": "x" * 20_000}, "the limit is"),
        (("users",), "", {"v": 1}, "`key`"),
    ],
)
async def test_bad_input_is_refused_and_writes_nothing(
    tmp_path: Path, namespace: Any, key: Any, value: Any, message: str
) -> None:
    async with _open(tmp_path) as memory:
        store = MemsealStore(memory, SCOPE)
        # The batch path checks every op before any runs, a good put included.
        with pytest.raises(memseal.InvalidRequest, match=message):
            await store.abatch([PutOp(("ok",), "first", {"v": 0}), PutOp(namespace, key, value)])
        assert await _writes(memory) == []
        assert await store.asearch(()) == []


async def test_items_live_at_the_stores_node_below_the_hosts_place_and_no_other(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path) as memory:
        store = MemsealStore(memory, SCOPE)
        assert store.scope.place == f"{PLACE}/{STORE_NODE}"
        await store.aput(UI, "k", {"v": 1})
        sibling = MemsealStore(memory, ToolScope.placed_at("team:acme/agent:reader"))
        parent = MemsealStore(memory, ToolScope.placed_at("team:acme"))
        assert await sibling.aget(UI, "k") is None
        assert await parent.aget(UI, "k") is None  # exactly the host's node
        # The store's own tools see the item; a model's tools at the host's place do not.
        _, mine = await memory.call("memory_list", {}, scope=store.scope)
        _, models = await memory.call("memory_list", {}, scope=SCOPE)
        _, theirs = await memory.call("memory_list", {}, scope=sibling.scope)
        assert len(mine["items"]) == 1 and models["items"] == theirs["items"] == []
        again = MemsealStore(memory, SCOPE)
        assert _visible(await again.aget(UI, "k")) == (UI, "k", '{"v": 1}')


class _State(TypedDict):
    user: str
    seen: str


async def test_a_compiled_graph_puts_and_reads_through_the_store(tmp_path: Path) -> None:
    async def remember(state: _State, *, store: BaseStore) -> dict[str, str]:
        await store.aput(("users", state["user"]), "last", {"said": "hello"})
        item = await store.aget(("users", state["user"]), "last")
        assert item is not None
        return {"seen": item.value["said"]}

    builder = StateGraph(_State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    async with _open(tmp_path) as memory:
        graph = builder.compile(store=MemsealStore(memory, SCOPE))
        out = await graph.ainvoke({"user": "u1", "seen": ""})
        assert out["seen"] == "hello"
        assert await _writes(memory) == ["memory_store"]
        await memory.verify()


def test_a_sync_graph_uses_the_store_on_the_sync_facade(tmp_path: Path) -> None:
    def remember(state: _State, *, store: BaseStore) -> dict[str, str]:
        store.put(("users", state["user"]), "last", {"said": "hi"})
        item = store.get(("users", state["user"]), "last")
        assert item is not None
        return {"seen": item.value["said"]}

    builder = StateGraph(_State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    with memseal.open_sync(tmp_path, embedder=None, checkpoint_interval=None) as memory:
        graph = builder.compile(store=MemsealStore(memory, SCOPE))
        assert graph.invoke({"user": "u1", "seen": ""})["seen"] == "hi"


async def test_a_put_crashed_between_store_and_forget_reads_the_newer_and_heals(
    tmp_path: Path,
) -> None:
    from memseal.integrations._langgraph_store import _envelope, _key_tag

    async with _open(tmp_path) as memory:
        store = MemsealStore(memory, SCOPE)
        await store.aput(UI, "k", {"v": "old"})
        # What a put that died after its store and before its forget leaves behind.
        newer = _envelope(
            PutOp(UI, "k", {"v": "new"}),
            {"v": "new"},
            "2000-01-01T00:00:00+00:00",
            "9999-01-01T00:00:00+00:00",
        )
        await memory.tools(store.scope).call(
            "memory_store",
            {"document": {"text": newer}, "tags": [STORE_TAG, _key_tag(UI, "k")]},
        )
        item = await store.aget(UI, "k")
        assert item is not None and item.value == {"v": "new"}
        assert [i.value for i in await store.asearch(("users",))] == [{"v": "new"}]
        await store.adelete(UI, "k")  # forgets both halves
        assert await store.aget(UI, "k") is None
        assert await store.asearch(()) == []
        await memory.verify()


async def test_the_earlier_layouts_items_at_the_place_itself_are_read_and_moved_by_a_put(
    tmp_path: Path,
) -> None:
    from memseal.integrations._langgraph_store import _envelope, _key_tag

    async with _open(tmp_path) as memory:
        # What a MemsealStore of the earlier layout wrote: its items at the place itself.
        old = [(UI, "theme", {"theme": "dark"}), (DOCS, "d1", {"title": "retro"})]
        for namespace, key, value in old:
            when = "2024-01-01T00:00:00+00:00"
            text = _envelope(PutOp(namespace, key, value), value, when, when)
            await memory.engine.store(
                {"document": {"title": "langgraph store item", "text": text}},
                namespace=PLACE,
                tags=[STORE_TAG, _key_tag(namespace, key)],
            )
        await memory.engine.store(
            {"learning": {"text": "not json"}}, namespace=PLACE, tags=[STORE_TAG]
        )
        store = MemsealStore(memory, SCOPE)
        got = await store.aget(UI, "theme")
        assert got is not None and got.value == {"theme": "dark"}
        assert await store.alist_namespaces() == [DOCS, UI]
        assert [i.key for i in await store.asearch(("users",), query="retro")] == ["d1"]
        assert len(store.skipped) == 1  # the one that is not an item, skipped
        await store.aput(UI, "theme", {"theme": "light"})  # the new node's; the old forgotten
        await store.adelete(DOCS, "d1")
        assert [i.value for i in await store.asearch(())] == [{"theme": "light"}]
        _, left = await memory.call("memory_list", {}, scope=ToolScope())
        texts = [i["text"] for i in left["items"]]
        assert not [t for t in texts if "dark" in t or "retro" in t]  # the old ones forgotten
        await memory.verify()
