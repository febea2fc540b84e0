"""Specs: names, descriptions and JSON Schemas made from the types that decode the arguments."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

import msgspec
import pytest

from memseal.engine import FACETS, ITEM_KINDS, LEARNING_KINDS, Engine
from memseal.ledger.errors import Unsupported
from memseal.tools import TOOL_NAMES, MemoryTools, ToolScope, arguments_type, spec_for
from memseal.tools.args import Facet, ReadTrust
from memseal.tools.specs import DESCRIPTIONS

ALL_MODES = ("exact", "semantic", "hybrid")


def _objects(schema: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield path, schema
        for key, value in schema.items():
            yield from _objects(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _objects(value, f"{path}[{i}]")


def _keys(schema: Any) -> Iterator[str]:
    """Every schema keyword used (property names are not keywords)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield key
            if key == "properties":
                for prop in value.values():
                    yield from _keys(prop)
            else:
                yield from _keys(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _keys(value)


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_schema_is_closed_inline_and_described(name: str) -> None:
    spec = spec_for(name)
    schema = spec.parameters
    assert schema["type"] == "object"
    assert spec.description == DESCRIPTIONS[name] and spec.description
    keys = set(_keys(schema))
    assert not keys & {"$ref", "$defs", "title", "anyOf", "oneOf", "allOf"}
    objects = list(_objects(schema))
    assert objects
    for where, obj in objects:
        assert obj["additionalProperties"] is False, where
        for prop_name, prop in obj.get("properties", {}).items():
            assert prop.get("description"), f"{where}.{prop_name}"
            assert prop_name not in ("namespace", "reach"), where
        assert set(obj.get("required", ())) <= set(obj.get("properties", {})), where


def test_the_schema_is_the_decoding_type() -> None:
    for name in TOOL_NAMES:
        raw = msgspec.json.schema(arguments_type(name))
        top = raw["$defs"][raw["$ref"].rsplit("/", 1)[-1]]
        assert list(top["properties"]) == list(spec_for(name).parameters["properties"])
        assert top.get("required", []) == spec_for(name).parameters.get("required", [])


def test_the_seed_arguments_and_limits() -> None:
    props: dict[str, Any] = {name: spec_for(name).parameters["properties"] for name in TOOL_NAMES}
    assert list(props["memory_recall"]) == [
        "question",
        "filter",
        "limit",
        "instructions",
        "refers_to",
        "min_trust",
    ]
    assert list(props["memory_fetch"]) == [
        "query",
        "mode",
        "filter",
        "limit",
        "cursor",
        "refers_to",
        "min_trust",
    ]
    assert list(props["memory_list"]) == ["filter", "limit", "cursor", "min_trust"]
    assert list(props["memory_get"]) == ["ids", "min_trust"]
    assert list(props["memory_explore"]) == ["facet", "filter", "limit", "min_trust"]
    assert list(props["memory_store"]) == ["learning", "document", "conversation", "tags"]
    assert list(props["memory_forget"]) == ["ids", "filter"]
    for name in ("memory_recall", "memory_fetch", "memory_list", "memory_explore"):
        limit = props[name]["limit"]
        assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 50, 10)
    for name in ("memory_get", "memory_forget"):
        assert (props[name]["ids"]["minItems"], props[name]["ids"]["maxItems"]) == (1, 200)
    learning = props["memory_store"]["learning"]["properties"]
    assert learning["learning_kind"]["default"] == "fact"
    assert learning["confidence"]["default"] == 0.8
    assert set(learning["learning_kind"]["enum"]) == set(LEARNING_KINDS)
    model_filter = props["memory_list"]["filter"]["properties"]
    assert list(model_filter) == [
        "kinds",
        "sources",
        "tags_any",
        "workspace",
        "folder",
        "file_path",
        "repo",
        "url",
        "thread_id",
        "agent_id",
        "observed_after",
        "observed_before",
    ]
    assert set(model_filter["kinds"]["items"]["enum"]) == set(ITEM_KINDS)
    assert set(props["memory_explore"]["facet"]["enum"]) == set(FACETS)
    assert "namespace" not in props["memory_explore"]["facet"]["enum"]
    assert props["memory_fetch"]["min_trust"]["enum"] == ["stale", "unverified", "verified"]
    assert list(props["memory_fetch"]["refers_to"]["properties"]) == ["from", "to"]


def test_the_literals_match_the_engine() -> None:
    assert set(get_args(Facet)) == set(FACETS)
    assert set(get_args(ReadTrust)) == {"stale", "unverified", "verified"}


async def test_the_mode_enum_lists_exactly_the_engine_modes(
    engine: Engine, exact_engine: Engine
) -> None:
    full = {s.name: s for s in MemoryTools(engine).specs()}
    assert set(full["memory_fetch"].parameters["properties"]["mode"]["enum"]) == set(ALL_MODES)
    exact = {s.name: s for s in MemoryTools(exact_engine).specs()}
    assert exact["memory_fetch"].parameters["properties"]["mode"]["enum"] == ["exact"]
    assert "Default: exact" in exact["memory_fetch"].parameters["properties"]["mode"]["description"]
    assert exact["memory_list"] == full["memory_list"]


async def test_an_engine_serving_no_mode_gets_no_fetch_tool(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(type(engine), "modes", property(lambda self: ()))
    tools = MemoryTools(engine, ToolScope.placed_at("team:acme/agent:a"))
    assert "memory_fetch" not in tools.names()
    assert [s.name for s in tools.specs()] == [n for n in TOOL_NAMES if n != "memory_fetch"]
    with pytest.raises(Unsupported, match="memory_fetch: this engine serves no fetch mode"):
        await tools.call("memory_fetch", {"query": "anything"})


async def test_specs_follow_the_scope(engine: Engine) -> None:
    tools = MemoryTools(engine)
    assert [s.name for s in tools.specs()] == list(TOOL_NAMES)
    assert [s.name for s in tools.read_only().specs()] == list(TOOL_NAMES[:5])
    frozen = tools.with_scope(ToolScope(frozen=True))
    assert [s.name for s in frozen.specs()] == list(TOOL_NAMES)  # offered, then refused
    allowed = tools.with_scope(ToolScope(allowlist=("memory_store", "memory_get")))
    assert [s.name for s in allowed.specs()] == ["memory_get", "memory_store"]
    # Each spec is a fresh copy: a host editing one changes nothing for the next session.
    first = tools.specs()[0]
    first.parameters["properties"].clear()
    assert tools.specs()[0].parameters["properties"]
