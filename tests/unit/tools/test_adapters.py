"""The toolset shapes, checked against the real client libraries' own types."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from memseal.tools import MemoryTools, ToolScope
from memseal.tools.specs import openai_strict

openai_types = pytest.importorskip("openai.types")
from openai.types.chat import ChatCompletionFunctionToolParam  # noqa: E402
from openai.types.responses import FunctionToolParam  # noqa: E402


def _objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        here = stack.pop()
        if isinstance(here, list):
            stack.extend(here)
        elif isinstance(here, dict):
            if here.get("type") == "object" or "object" in (here.get("type") or []):
                found.append(here)
            stack.extend(here.values())
    return found


def test_strict_openai_tools_fit_the_sdk_and_strict_mode(tools: MemoryTools) -> None:
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    for definition in tools.toolset().to_openai(strict=True):
        adapter.validate_python(definition, strict=True)
        assert definition["function"]["strict"] is True
        parameters = definition["function"]["parameters"]
        assert not {"not", "oneOf", "anyOf", "allOf"} & parameters.keys()
        for obj in _objects(parameters):
            assert obj["additionalProperties"] is False
            assert obj["required"] == list(obj["properties"])
        text = str(parameters)
        for refused in ("'default'", "'minLength'", "'maxLength'", "'minProperties'"):
            assert refused not in text


def test_optional_arguments_become_nullable_in_strict_mode() -> None:
    from memseal.tools.specs import parameters_for

    strict = openai_strict(parameters_for("memory_fetch"))
    assert strict["properties"]["query"]["type"] == "string"
    assert strict["properties"]["limit"]["type"] == ["integer", "null"]
    assert None in strict["properties"]["mode"]["enum"]
    assert {"type": "null"} in strict["properties"]["filter"]["anyOf"]


def test_responses_api_tools_fit_the_sdk(tools: MemoryTools) -> None:
    adapter = TypeAdapter(FunctionToolParam)
    for strict in (False, True):
        for definition in tools.toolset().to_openai(strict=strict, api="responses"):
            adapter.validate_python(definition, strict=True)
            assert definition["type"] == "function" and "function" not in definition


async def test_what_strict_mode_sends_runs(tools: MemoryTools) -> None:
    toolset = tools.toolset()
    sent = (
        '{"learning": {"text": "prefers dark mode", "learning_kind": null, "confidence": null,'
        ' "evidence": null}, "document": null, "conversation": null, "tags": null}'
    )
    assert not (await toolset.outcome("memory_store", sent)).is_error
    assert not (await toolset.outcome("memory_list", "")).is_error


def test_anthropic_tools_carry_the_exactly_one_rules(tools: MemoryTools) -> None:
    anthropic_types = pytest.importorskip("anthropic.types")
    adapter = TypeAdapter(anthropic_types.ToolParam)
    by_name = {}
    for definition in tools.toolset().to_anthropic():
        adapter.validate_python(definition)
        assert not {"oneOf", "anyOf", "allOf"} & definition["input_schema"].keys()
        by_name[definition["name"]] = definition["input_schema"]
    assert "not" in by_name["memory_store"] and "not" in by_name["memory_forget"]
    assert "not" not in by_name["memory_fetch"]
    assert by_name["memory_forget"]["properties"]["filter"]["minProperties"] == 1


async def test_an_error_result_is_a_langchain_tool_message_with_status_error(
    tools: MemoryTools,
) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import ToolMessage

    lc = {tool.name: tool for tool in tools.toolset().to_langchain()}
    bad = await lc["memory_get"].ainvoke(
        {"type": "tool_call", "id": "c1", "name": "memory_get", "args": {"ids": []}}
    )
    assert isinstance(bad, ToolMessage) and bad.status == "error"
    assert isinstance(bad.content, str) and bad.content.startswith("error: memory_get:")
    good = await lc["memory_list"].ainvoke(
        {"type": "tool_call", "id": "c2", "name": "memory_list", "args": {}}
    )
    assert isinstance(good, ToolMessage) and good.status == "success"


def test_toolsets_answer_refusal_before_approval(engine: Any) -> None:
    frozen = MemoryTools(engine, ToolScope.placed_at("team:acme/agent:writer", frozen=True))
    toolset = frozen.toolset()
    refusal = toolset.refusal_before_approval("memory_store", {})
    assert refusal is not None and refusal.code == "frozen"
    assert toolset.refusal_before_approval("memory_fetch", {}) is None
    # The MCP definitions say the same: a refused tool is marked so (its code in `_meta`,
    # its description first), and hinted read-only, as its call changes nothing.
    for definition in toolset.mcp_tools():
        refusal = toolset.refusal_before_approval(definition["name"])
        marked = definition.get("_meta", {}).get("memseal/refusal")
        assert marked == (None if refusal is None else refusal.code)
        assert definition["description"].startswith("Refused: ") == (refusal is not None)
        assert definition["annotations"]["readOnlyHint"] is True
    live = MemoryTools(engine, ToolScope.placed_at("team:acme/agent:writer")).toolset()
    writes = {tool.name: tool.side_effects for tool in live}
    for definition in live.mcp_tools():
        assert "_meta" not in definition
        assert definition["annotations"]["readOnlyHint"] is not writes[definition["name"]]
