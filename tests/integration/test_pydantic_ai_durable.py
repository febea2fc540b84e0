"""Pydantic AI resumes on memseal's tools with each logical call exactly once.

examples/durable_pydantic_ai.py runs as a subprocess agent on a scripted model
(``FunctionModel``, stable tool-call ids): it SIGKILLs itself right after its third
tool call returns, and a new process resumes it from the saved ``message_history``,
by a re-run from the start, or by DBOS recovery (SQLite system database). Then
every key has exactly one signed call, the recorded results are the ones the
killed process saw, the fourth call (the first one's arguments) got its own live
result, ``memseal verify`` passes and the exported bundle replays clean.

In process, on SQLite and PostgreSQL: a model's mistakes come back to it as failed
tool returns with memseal's text (a refused call recorded as memseal records one),
never as a crash of the agent run.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from durable_support import audit_export_replay, signed_calls, signed_calls_in
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import memseal
from memseal.memory import STORE_ENV, Memory
from memseal.tools import ToolScope

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "durable_pydantic_ai.py"
RUN_ID = "pydantic-ai-nightly"
KEYS = [f"call_{i}" for i in range(5)]
SCOPE = ToolScope.placed_at("team:acme/agent:writer")


def _example(data: Path, via: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", STORE_ENV)}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--data", str(data), "--via", via],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _lines(out: str, prefix: str) -> dict[str, str]:
    return dict(re.findall(rf"^{prefix} (call_\d+): (.*)$", out, re.M))


@pytest.mark.slow
@pytest.mark.parametrize("via", ["history", "rerun", "dbos"])
def test_killed_after_the_third_tool_call_a_new_process_resumes_each_call_exactly_once(
    tmp_path: Path, via: str
) -> None:
    data = tmp_path / "data"
    killed = _example(data, via)
    assert killed.returncode == -9, killed.stderr  # it SIGKILLed itself
    before = _lines(killed.stdout, "returned")
    assert list(before) == KEYS[:3]

    resumed = _example(data, via)
    assert resumed.returncode == 0, resumed.stderr
    after = _lines(resumed.stdout, "tool")
    assert list(after) == KEYS
    # The results after the resume are the ones the killed process saw.
    assert {key: after[key] for key in before} == before
    # The fourth call is the first one's fetch: it ran live and found both stores.
    assert json.loads(after["call_0"])["hits"] == []
    assert len(json.loads(after["call_3"])["hits"]) == 2
    assert "ledger verified" in resumed.stdout

    calls = [(c.step, c.key, c.error) for c in asyncio.run(signed_calls_in(data, RUN_ID))]
    # No entry written twice: one signed call per key, none an error.
    assert Counter(key for _, key, _ in calls) == Counter(KEYS)
    assert [step for step, _, _ in calls] == list(range(5))
    assert not any(error for _, _, error in calls)

    replayed = audit_export_replay(resumed.stdout, data, RUN_ID, tmp_path / "run.bundle")
    assert "matched by key" in replayed
    assert "all 3 re-executed step(s) match" in replayed


@pytest.fixture
async def memory(tmp_path: Path, store_url: str | None) -> AsyncIterator[Memory]:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=None, checkpoint_interval=None
    ) as opened:
        yield opened


def scripted(*calls: ToolCallPart) -> FunctionModel:
    """A model that makes ``calls`` one per turn, then answers with the texts it got back."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(
            isinstance(part, ToolCallPart)
            for message in messages
            if isinstance(message, ModelResponse)
            for part in message.parts
        )
        if made < len(calls):
            return ModelResponse(parts=[calls[made]])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


def returned(messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    return {
        part.tool_call_id: part
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


async def test_a_models_mistakes_come_back_as_failed_returns_never_a_crash(memory: Memory) -> None:
    async with memory.run("thread-1", SCOPE) as run:
        tools = FunctionToolset(run.toolset().to_pydantic_ai())
        model = scripted(
            ToolCallPart("memory_store", {"learning": {}}, tool_call_id="bad_store"),
            ToolCallPart("memory_store", "null", tool_call_id="null_args"),
            ToolCallPart("memory_fetch", "[1, 2]", tool_call_id="list_args"),
            ToolCallPart("memory_get", {"ids": ["0" * 32]}, tool_call_id="missing"),
            ToolCallPart("memory_store", {"namespace": "x"}, tool_call_id="smuggled"),
            # Text Pydantic AI's own parser refuses (a retry of its budget): memseal's now.
            ToolCallPart("memory_fetch", '{"query": "\\ud800"}', tool_call_id="surrogate"),
            ToolCallPart("memory_fetch", "{not json", tool_call_id="not_json"),
            ToolCallPart("memory_fetch", '{"query": NaN}', tool_call_id="nan"),
            # The key non-object arguments ride under, sent by the model: refused, not unwrapped.
            ToolCallPart("memory_fetch", {"": '{"query": "a"}'}, tool_call_id="wrapper"),
            ToolCallPart(
                "memory_store", {"learning": {"text": "fixed"}}, tool_call_id="good_store"
            ),
        )
        # Eight failures, past the one retry Pydantic AI allows a tool by default.
        result = await Agent(model).run("go", toolsets=[tools])
    assert result.output == "done"
    parts = returned(result.all_messages())
    refused = ("bad_store", "null_args", "list_args", "smuggled", "surrogate", "not_json", "nan")
    for key in (*refused, "wrapper"):
        assert parts[key].outcome == "failed", key
        assert re.match(r"error: `?memory_", str(parts[key].content)), parts[key]
    assert "must be a JSON object" in str(parts["null_args"].content)
    assert "surrogates not allowed" in str(parts["surrogate"].content)
    assert "not valid JSON" in str(parts["not_json"].content)
    assert "not valid JSON" in str(parts["nan"].content)
    assert '`""` is not an argument' in str(parts["wrapper"].content)
    assert parts["missing"].outcome != "failed"  # an unknown id is an answer, not a mistake
    assert parts["good_store"].outcome != "failed"
    assert json.loads(str(parts["good_store"].content))["replayed"] is False
    calls = [(c.step, c.key, c.error) for c in await signed_calls(memory, "thread-1")]
    # Every call recorded once under its id; the refused ones as error-flagged calls.
    assert [key for _, key, _ in calls] == [
        "bad_store",
        "null_args",
        "list_args",
        "missing",
        "smuggled",
        "surrogate",
        "not_json",
        "nan",
        "wrapper",
        "good_store",
    ]
    assert [error for _, _, error in calls] == [*[True] * 3, False, *[True] * 5, False]
    await memory.ledger.verify(trust=memory.vkey)


async def test_the_memorys_recorded_tools_serve_pydantic_ai_with_memseals_schemas(
    memory: Memory,
) -> None:
    tools = memory.tools(SCOPE).toolset().to_pydantic_ai()
    assert [tool.name for tool in tools] == memory.tools(SCOPE).toolset().names()
    assert tools[0].tool_def.parameters_json_schema == memory.tools(SCOPE).specs()[0].parameters
    model = scripted(ToolCallPart("memory_list", {}, tool_call_id="c0"))
    result = await Agent(model).run("go", toolsets=[FunctionToolset(tools)])
    assert json.loads(str(returned(result.all_messages())["c0"].content)) == {"items": []}
