"""Decoding a model's arguments: strict, closed, host-fixed keys refused, errors it can read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memseal.ledger.errors import InvalidRequest
from memseal.tools import MAX_ARGUMENT_BYTES, MemoryTools, arguments_type, as_plain
from memseal.tools.args import FetchArgs, ListArgs, StoreArgs
from memseal.tools.decode import MAX_DEPTH, decode, given
from memseal.tools.specs import schema_of


def _error(tool: str, arguments: object) -> str:
    with pytest.raises(InvalidRequest) as caught:
        decode(tool, arguments, arguments_type(tool), schema_of(tool))
    message = str(caught.value)
    assert message.startswith(f"{tool}: "), message
    assert message[len(tool) + 2].islower() or message[len(tool) + 2] == "`", message
    return message


def test_the_seed_example_message() -> None:
    message = _error("memory_list", {"filter": {"kinds": ["memo"]}})
    assert message.startswith("memory_list: `filter.kinds` is not an item kind (")


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("memory_list", {"limit": 0}, "memory_list: `limit` must be at least 1"),
        ("memory_list", {"limit": 51}, "memory_list: `limit` must be at most 50"),
        (
            "memory_list",
            {"limit": True},
            "memory_list: `limit` must be an integer, not true or false",
        ),
        ("memory_list", {"limit": "5"}, "memory_list: `limit` must be an integer, not text"),
        ("memory_list", {"limit": 2.5}, "memory_list: `limit` must be an integer, not a number"),
        ("memory_list", {"limit": "ten"}, "memory_list: `limit` must be an integer, not text"),
        ("memory_list", {"filter": []}, "memory_list: `filter` must be an object, not a list"),
        (
            "memory_list",
            {"filter": {"kinds": []}},
            "memory_list: `filter.kinds` must list at least 1 value",
        ),
        (
            "memory_list",
            {"filter": {"workspace": ""}},
            "memory_list: `filter.workspace` must not be empty",
        ),
        ("memory_list", {"bogus": 1}, "memory_list: `bogus` is not an argument of memory_list"),
        (
            "memory_list",
            {"filter": {"bogus": 1}},
            "memory_list: `filter.bogus` is not a field of `filter`",
        ),
        (
            "memory_list",
            {"cursor": "a b"},
            "memory_list: `cursor` is malformed; pass back a next_cursor unchanged",
        ),
        (
            "memory_list",
            {"min_trust": "rejected"},
            "memory_list: `min_trust` is not a trust level a read may ask for "
            "(stale, unverified, verified); rejected memory is never returned",
        ),
        ("memory_fetch", {}, "memory_fetch: `query` is required"),
        (
            "memory_fetch",
            {"query": "x" * 2001},
            "memory_fetch: `query` is too long; the limit is 2000 characters",
        ),
        (
            "memory_fetch",
            {"query": "x", "mode": "fuzzy"},
            "memory_fetch: `mode` is not a fetch mode this engine serves (exact, hybrid, semantic)",
        ),
        (
            "memory_fetch",
            {"query": "x", "refers_to": {"from": "2026-11-30"}},
            "memory_fetch: `refers_to.to` is required",
        ),
        (
            "memory_fetch",
            {"query": "x", "refers_to": {"from": "30/11/2026", "to": "2026-12-01"}},
            "memory_fetch: `refers_to.from` is not a date like 2026-11-30",
        ),
        (
            "memory_get",
            {"ids": ["ok", "has space"]},
            "memory_get: `ids[1]` is not a memory id",
        ),
        (
            "memory_get",
            {"ids": ["x"] * 201},
            "memory_get: `ids` lists too many values; at most 200",
        ),
        (
            "memory_explore",
            {"facet": "namespace"},
            "memory_explore: `facet` is not a facet (",
        ),
        (
            "memory_store",
            {"learning": {"text": "x", "confidence": 1.5}},
            "memory_store: `learning.confidence` must be at most 1",
        ),
        (
            "memory_store",
            {"learning": {"text": "x", "learning_kind": "document"}},
            "memory_store: `learning.learning_kind` is not a learning kind (",
        ),
        (
            "memory_store",
            {"conversation": {"turns": [{"role": "user"}]}},
            "memory_store: `conversation.turns[0].text` is required",
        ),
        (
            "memory_store",
            {"tags": ["x"] * 33},
            "memory_store: `tags` lists too many values; at most 32",
        ),
        (
            "memory_forget",
            {"filter": {"sources": ["Agent"]}},
            "memory_forget: `filter.sources[0]` is not a source kind",
        ),
    ],
)
def test_messages_name_the_tool_and_the_field(tool: str, arguments: object, expected: str) -> None:
    assert _error(tool, arguments).startswith(expected)


@pytest.mark.parametrize(
    "arguments",
    [
        {"namespace": "team:other"},
        {"reach": None},
        {"filter": {"namespace": "team:other"}},
        {"filter": {"kinds": ["fact"], "reach": {"mode": "subtree", "node": ""}}},
        {"limit": 0, "deep": [1, {"x": [{"namespace": "x"}]}]},  # wins over every other fault
        {"a": float("nan"), "b": {"reach": 1}},
    ],
)
def test_a_host_fixed_key_at_any_depth_is_refused(arguments: dict[str, Any]) -> None:
    message = _error("memory_list", arguments)
    assert "is not an argument: the host fixes the namespace and reach" in message


def test_json_text_is_decoded_like_an_object() -> None:
    plain, args = decode("memory_fetch", '{"query": "dark mode", "limit": 3}', FetchArgs)
    assert plain == {"query": "dark mode", "limit": 3}
    assert (args.query, args.limit, given(args.mode)) == ("dark mode", 3, None)
    assert decode("memory_list", b"{}", ListArgs)[0] == {}
    assert "`arguments` are not valid JSON" in _error("memory_list", "{nope")
    assert "`arguments` are not valid JSON" in _error("memory_list", b"\xff")
    assert "`arguments` must be a JSON object, not a list" in _error("memory_list", "[]")
    assert "`arguments` must be a JSON object, not null" in _error("memory_list", None)
    assert "`arguments` must be a JSON object, not text" in _error("memory_list", '"x"')
    assert "host fixes" in _error("memory_list", '{"filter": {"namespace": "x"}}')


def test_an_empty_argument_text_is_the_empty_object() -> None:
    # OpenAI hands back "" for a call it made without arguments.
    for empty in ("", b"", "  \n"):
        assert decode("memory_list", empty, ListArgs)[0] == {}
    assert "`query` is required" in _error("memory_fetch", "")


def test_an_explicit_null_is_an_absent_argument() -> None:
    # OpenAI strict mode sends every optional argument it leaves out as null.
    sent = '{"query": "dark mode", "mode": null, "filter": {"kinds": null, "repo": "x"}}'
    plain, args = decode("memory_fetch", sent, FetchArgs)
    assert plain == {"query": "dark mode", "filter": {"repo": "x"}}
    assert given(args.mode) is None
    # A required argument sent as null is still missing, and a null in a list is no value.
    assert "`query` is required" in _error("memory_fetch", {"query": None})
    assert "`ids[0]` must be text, not null" in _error("memory_get", {"ids": [None]})
    # The host-fixed keys are refused even when null.
    assert "host fixes" in _error("memory_list", {"filter": {"reach": None}})


def test_only_plain_json_values_pass() -> None:
    assert "`limit` must be a finite number" in _error("memory_list", {"limit": float("inf")})
    assert "`x` is out of range" in _error("memory_list", {"x": 2**70})
    assert "has a key that is not text" in _error("memory_list", {"filter": {1: "x"}})
    assert "must be a JSON value, not set" in _error("memory_list", {"filter": {"kinds": {"a"}}})
    deep: Any = {}
    node = deep
    for _ in range(MAX_DEPTH + 5):
        node["x"] = {}
        node = node["x"]
    assert f"nests deeper than {MAX_DEPTH} levels" in _error("memory_list", deep)
    # Tuples and other mappings are plain enough: they are copied as lists and dicts.
    plain = as_plain("memory_get", {"ids": ("a", "b")})
    assert plain == {"ids": ["a", "b"]} and isinstance(plain["ids"], list)


def test_arguments_as_sent_are_copied_without_defaults() -> None:
    sent = {"learning": {"text": "prefers dark mode"}, "tags": ["ui"]}
    plain, args = decode("memory_store", sent, StoreArgs)
    assert plain == sent and plain is not sent and plain["tags"] is not sent["tags"]
    assert given(args.document) is None and given(args.learning) is not None


def test_huge_arguments_are_refused_before_decoding() -> None:
    text = json.dumps({"query": "x" * MAX_ARGUMENT_BYTES})
    assert "bytes of JSON; the limit is" in _error("memory_fetch", text)
    assert "bytes of JSON; the limit is" in _error("memory_fetch", json.loads(text))


async def test_engine_checks_come_back_named_by_tool(tools: MemoryTools) -> None:
    cases = {
        ("memory_list", '{"filter": {"observed_after": "yesterday"}}'): (
            "memory_list: `filter.observed_after` is not an RFC 3339 time"
        ),
        (
            "memory_list",
            '{"filter": {"observed_after": "2026-12-01T00:00:00Z", '
            '"observed_before": "2026-11-01T00:00:00Z"}}',
        ): ("memory_list: `filter.observed_after` must be before `filter.observed_before`"),
        (
            "memory_fetch",
            '{"query": "x", "refers_to": {"from": "2026-02-30", "to": "2026-03-01"}}',
        ): ("memory_fetch: `refers_to.from` is not a calendar date"),
        ("memory_fetch", '{"query": "   "}'): "memory_fetch: `query` must not be empty",
        ("memory_store", '{"learning": {"text": "a\\u0000b"}}'): (
            "memory_store: `learning.text` contains a control character"
        ),
        ("memory_list", '{"cursor": "WzEsImxpc3QiLCJ4IiwxLDBd"}'): (
            "memory_list: `cursor` belongs to another request"
        ),
    }
    for (tool, arguments), expected in cases.items():
        with pytest.raises(InvalidRequest) as caught:
            await tools.call(tool, arguments)
        assert str(caught.value).startswith(expected), str(caught.value)
