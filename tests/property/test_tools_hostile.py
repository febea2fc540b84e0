"""Hostile arguments: whatever a model sends, it gets the seed's error, naming tool and field.

Hypothesis draws arbitrary JSON values (as objects and as JSON text) and near-miss
objects built from a valid call: an extra key, a ``namespace`` or ``reach`` key at
any depth, a value of the wrong type, a limit out of range, a string over its
limit, a bad date or time. Every call either runs (an arbitrary value may happen to
be valid) or raises :class:`InvalidRequest` whose message starts with the tool's
name and quotes the field; never another exception, and a refused call changes no
memory (same ledger size, same projection state hash). Through a toolset the same
error comes back as text.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder, Learning
from memseal.ledger.errors import InvalidRequest
from memseal.tools import TOOL_NAMES, MemoryTools, ToolScope, Toolset, runner_for, spec_for

PLACE = "team:acme/agent:writer"
FIELD = re.compile(r"`[^`]+`")

VALID: dict[str, dict[str, Any]] = {
    "memory_recall": {
        "question": "dark mode",
        "filter": {"kinds": ["fact"], "observed_before": "2027-01-01T00:00:00Z"},
        "limit": 5,
        "refers_to": {"from": "2026-11-01", "to": "2026-11-30"},
    },
    "memory_fetch": {
        "query": "dark mode",
        "mode": "exact",
        "filter": {"tags_any": ["ui"], "observed_after": "2026-01-01T00:00:00Z"},
        "limit": 5,
        "min_trust": "verified",
    },
    "memory_list": {"filter": {"kinds": ["fact"], "sources": ["agent"]}, "limit": 5},
    "memory_get": {"ids": ["abc", "def"]},
    "memory_explore": {"facet": "tag", "filter": {"workspace": "w"}, "limit": 5},
    "memory_store": {"learning": {"text": "hello there", "confidence": 0.5}, "tags": ["x"]},
    "memory_forget": {"filter": {"tags_any": ["matches-nothing"]}},
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
names = st.sampled_from(TOOL_NAMES)


def _objects(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """The paths of every object inside ``value`` (the root included)."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(value, dict):
        found.append(path)
        for key, item in value.items():
            found.extend(_objects(item, (*path, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(_objects(item, (*path, i)))
    return found


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*path, key))
            found.extend(_leaves(item, (*path, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.append((*path, i))
            found.extend(_leaves(item, (*path, i)))
    return found


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _schema_at(schema: dict[str, Any], path: tuple[str | int, ...]) -> dict[str, Any]:
    node = schema
    for part in path:
        node = node["items"] if isinstance(part, int) else node["properties"][part]
    return node


def _dotted(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _wrong_for(node: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` can never pass ``node`` (a different JSON type, or outside an enum)."""
    if "enum" in node:
        return value not in node["enum"]
    kind = node.get("type")
    if kind == "string":
        return not isinstance(value, str)
    if kind == "integer":
        return isinstance(value, bool) or not isinstance(value, int)
    if kind == "number":
        return isinstance(value, bool) or not isinstance(value, int | float)
    if kind == "array":
        return not isinstance(value, list)
    if kind == "object":
        return not isinstance(value, dict)
    return False


@st.composite
def near_misses(draw: st.DrawFn) -> tuple[str, Any, str]:
    """(tool, arguments, a text the error must contain)."""
    name = draw(names)
    arguments = copy.deepcopy(VALID[name])
    schema = spec_for(name).parameters
    how = draw(st.sampled_from(["extra", "host", "type", "limit", "huge", "date", "time", "nan"]))
    if how == "extra":
        path = draw(st.sampled_from(_objects(arguments)))
        allowed = set(_schema_at(schema, path).get("properties", {}))
        key = draw(
            st.text(min_size=1, max_size=12).filter(
                lambda k: k not in allowed and k not in ("namespace", "reach") and "`" not in k
            )
        )
        _at(arguments, path)[key] = draw(json_values)
        return name, arguments, key
    if how == "host":
        key = draw(st.sampled_from(["namespace", "reach"]))
        path = draw(st.sampled_from(_objects(arguments)))
        target = _at(arguments, path)
        if draw(st.booleans()):
            target = target.setdefault("deeper", [{}])[0] if isinstance(target, dict) else target
        target[key] = draw(json_values)
        return name, arguments, "the host fixes the namespace and reach"
    if how == "type":
        path = draw(st.sampled_from(_leaves(arguments)))
        node = _schema_at(schema, path)
        # Not null: an explicit null is an absent argument (OpenAI strict mode sends every
        # optional one it leaves out so), which the "unknown" and "limit" cases still cover.
        replacement = draw(json_values.filter(lambda v: v is not None and _wrong_for(node, v)))
        parent = _at(arguments, path[:-1])
        parent[path[-1]] = replacement
        # A bad list element may be named by its list ("`filter.kinds` is
        # not an item kind") or by its index (`filter.kinds[0]`): both start the same.
        named = path
        while named and isinstance(named[-1], int):
            named = named[:-1]
        return name, arguments, f"`{_dotted(named)}"
    if how == "limit" and "limit" in arguments:
        arguments["limit"] = draw(st.integers().filter(lambda n: not 1 <= n <= 50))
        return name, arguments, "`limit`"
    if how == "huge":
        field = {"memory_recall": "question", "memory_fetch": "query"}.get(name)
        if field is not None:
            arguments[field] = "y" * draw(st.integers(2_001, 50_000))
            return name, arguments, f"`{field}`"
        if name == "memory_store":
            arguments["learning"]["text"] = "z" * draw(st.integers(16_001, 40_000))
            return name, arguments, "`learning.text`"
        arguments = {"ids": ["a"] * draw(st.integers(201, 400))}
        name = draw(st.sampled_from(["memory_get", "memory_forget"]))
        return name, arguments, "`ids`"
    if how == "date" and "refers_to" in arguments:
        bad = draw(
            st.sampled_from(["2026-02-30", "2026-13-01", "2026-11-31", "26-11-30", "tomorrow"])
            | st.text(max_size=12)
        )
        side = draw(st.sampled_from(["from", "to"]))
        arguments["refers_to"][side] = bad
        if side == "to" and re.fullmatch(r"\d{4}-\d{2}-\d{2}", bad) and bad < "2026-11-01":
            return name, arguments, "`refers_to."  # from after to, or a bad calendar date
        return name, arguments, "`refers_to."
    if how == "time":
        bad = draw(
            st.sampled_from(
                ["2026-02-30T00:00:00Z", "2026-11-30", "2026-11-30T25:00:00Z", "yesterday", ""]
            )
            | st.text(max_size=30).filter(lambda t: not re.fullmatch(r"\d{4}-.*", t))
        )
        side = draw(st.sampled_from(["observed_after", "observed_before"]))
        if "filter" not in schema["properties"]:
            name, arguments = "memory_list", {}
        arguments = {**arguments, "filter": {**arguments.get("filter", {}), side: bad}}
        return name, arguments, f"`filter.{side}`"
    # "nan", and the fallbacks: a number no JSON can carry.
    arguments["x_number"] = draw(st.sampled_from([float("nan"), float("inf"), -float("inf")]))
    return name, arguments, "`x_number`"


async def _seed(engine: Engine) -> None:
    for text in ("dark mode please", "deploys on tuesday", "the ui uses dark themes"):
        await engine.store(Learning(text=text), namespace=PLACE, tags=["ui"])


class Shared:
    """One engine for every example, on a loop in its own thread (as the sync facade runs)."""

    def __init__(self, folder: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stack = contextlib.AsyncExitStack()
        self.run = runner_for(self.loop)
        self.tools: MemoryTools = self.run(self._open(folder))
        self.toolset = Toolset.of(self.tools, self.run)

    async def _open(self, folder: Path) -> MemoryTools:
        engine = await self.stack.enter_async_context(
            open_engine(folder, create=True, embedder=HashingEmbedder(dim=16))
        )
        await _seed(engine)
        return MemoryTools(engine, ToolScope.placed_at(PLACE, floor="stale"))

    def close(self) -> None:
        self.run(self.stack.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()

    async def _state(self) -> tuple[int, str]:
        engine = self.tools.engine
        return await engine.ledger.size(), await engine.state_hash()

    def attempt(self, name: Any, arguments: Any, must: str | None) -> None:
        before = self.run(self._state())
        try:
            self.run(self.tools.call(name, arguments))
        except InvalidRequest as exc:
            message = str(exc)
            if name in TOOL_NAMES:
                assert message.startswith(f"{name}: "), message
            else:
                assert message.startswith("unknown tool `"), message
            assert FIELD.search(message), message
            if must is not None:
                assert must in message, (must, message)
            assert self.run(self._state()) == before
            assert self.toolset.call(name, arguments) == f"error: {message}"
            assert self.run(self._state()) == before
        else:
            assert must is None, f"accepted a near miss: {name} {arguments!r:.300}"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    made = Shared(tmp_path_factory.mktemp("hostile") / "data")
    try:
        yield made
    finally:
        made.close()


@given(case=near_misses())
@settings(deadline=None, max_examples=300)
def test_near_misses_are_refused_naming_the_field(
    shared: Shared, case: tuple[str, Any, str]
) -> None:
    name, arguments, must = case
    shared.attempt(name, arguments, must)


@given(name=names, arguments=json_values, as_text=st.booleans())
@settings(deadline=None, max_examples=200)
def test_arbitrary_json_is_run_or_refused_never_anything_else(
    shared: Shared, name: str, arguments: Any, as_text: bool
) -> None:
    sent = json.dumps(arguments) if as_text else arguments
    # A str is JSON text, whatever it holds: it may be valid.
    must = None if isinstance(sent, dict | str) else "`arguments` must be a JSON object"
    shared.attempt(name, sent, must)


@given(name=st.text(max_size=80).filter(lambda n: n not in TOOL_NAMES), text=st.text(max_size=40))
@settings(deadline=None, max_examples=60)
def test_unknown_tools_and_broken_json_text(shared: Shared, name: str, text: str) -> None:
    shared.attempt(name, {}, "unknown tool")
    shared.attempt("memory_list", text, None)
