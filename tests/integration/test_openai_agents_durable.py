"""The OpenAI Agents SDK on memseal's tools resumes exactly once, never with a stale memo.

examples/durable_openai_agents.py runs as a subprocess: the SDK's ``Runner`` and
``Agent``, its scripted test model (no network, no LLM), the tools from
``run.toolset().to_openai_agents()``. The first process SIGKILLs itself right
after its third tool call returns; a second process resumes by ``SQLiteSession``,
by ``result.to_input_list()`` or by a re-run from the start. Then the signed
entries are counted per call key, and the CLI verifies the folder and replays a
bundle exported from the resumed run. In-process tests check the adapter itself:
the schema strict mode takes, the key it passes, errors as text, the sync toolset.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from durable_support import audit_export_replay, hits, signed_calls, signed_calls_in

import memseal
from memseal.memory import STORE_ENV
from memseal.tools.specs import openai_strict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "durable_openai_agents.py"
RUN_ID = "agents-sdk-nightly"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
STORED = ["the nightly report goes out at 6am", "the weekly report goes out on Mondays"]
CONFIG = RunConfig(tracing_disabled=True)


def _example(data: Path, resume: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", STORE_ENV)}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--data", str(data), "--resume", resume],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _tool_lines(out: str) -> dict[str, str]:
    """What each tool call returned, by call id, as the example printed it."""
    return {m[1]: m[2] for m in re.finditer(r"^tool (\S+) memory_\w+: (.*)$", out, re.M)}


def _items(result: Any) -> list[Any]:
    """``result.to_input_list()`` as plain items (its TypedDict union says little here)."""
    return list(result.to_input_list())


@pytest.mark.parametrize("resume", ["session", "input-list", "rerun"])
def test_agents_sdk_killed_after_the_third_call_resumes_each_call_exactly_once(
    tmp_path: Path, resume: str
) -> None:
    data = tmp_path / "data"
    first = _example(data, resume)
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    assert "killed after the third tool call" in first.stdout
    before = _tool_lines(first.stdout)
    assert list(before) == ["call_0", "call_1", "call_2"]
    assert [c.key for c in asyncio.run(signed_calls_in(data, RUN_ID))] == [
        "call_0",
        "call_1",
        "call_2",
    ]

    second = _example(data, resume)
    assert second.returncode == 0, second.stdout + second.stderr
    after = _tool_lines(second.stdout)
    # The session and the input list keep the first turn; a re-run re-issues every call.
    reissued = ["call_0", "call_1", "call_2"] if resume == "rerun" else ["call_2"]
    assert list(after) == [*reissued, "call_3"]
    for key in reissued:
        assert after[key] == before[key], key  # its memo: the result it had
    # call_3's arguments equal call_0's, but it is another call: live, it sees both stores.
    assert hits(before["call_0"]) == [] and hits(after["call_3"]) == STORED
    assert f"answer: From memory: {'; '.join(STORED)}." in second.stdout

    keys = [c.key for c in asyncio.run(signed_calls_in(data, RUN_ID))]
    assert sorted(keys, key=str) == ["call_0", "call_1", "call_2", "call_3"]  # none twice

    audit_export_replay(second.stdout, data, RUN_ID, tmp_path / "run.bundle")


# -- the adapter, in process -----------------------------------------------------------------


@pytest.fixture
def store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


def _context(tool: FunctionTool, call_id: Any, arguments: str) -> ToolContext[Any]:
    return ToolContext(
        context=None, tool_name=tool.name, tool_call_id=call_id, tool_arguments=arguments
    )


async def test_function_tools_carry_the_strict_schema_the_sdk_keeps_as_it_is(
    tmp_path: Path, store: None
) -> None:
    async with _open(tmp_path / "d") as memory, memory.run("r", SCOPE) as run:
        toolset = run.toolset()
        tools = toolset.to_openai_agents()
        assert [t.name for t in tools] == toolset.names()
        for tool, plain in zip(tools, toolset, strict=True):
            assert isinstance(tool, FunctionTool) and tool.strict_json_schema
            # The SDK's own strict rewrite ran on it and changed nothing.
            assert tool.params_json_schema == openai_strict(plain.parameters)
            assert tool.description == plain.description
        loose = toolset.to_openai_agents(strict=False)
        assert [t.params_json_schema for t in loose] == [t.parameters for t in toolset]
        assert not any(t.strict_json_schema for t in loose)
        # Strict mode sends every property, the optional ones as null: the tools take that.
        fetch = next(t for t in tools if t.name == "memory_fetch")
        nulls = dict.fromkeys(fetch.params_json_schema["properties"])
        arguments = json.dumps({**nulls, "query": "report", "mode": "exact"})
        text = await fetch.on_invoke_tool(_context(fetch, "call_n", arguments), arguments)
        assert json.loads(text)["hits"] == []
        assert run.step_of("call_n") == 0


async def test_the_sdk_call_id_is_the_key_and_a_session_resume_answers_from_memos(
    tmp_path: Path, store: None
) -> None:
    script = [
        [function_call("memory_store", {"learning": {"text": STORED[0]}}, call_id="c_store")],
        [function_call("memory_fetch", {"query": "report", "mode": "exact"}, call_id="c_fetch")],
        [assistant_message("done")],
    ]
    session = SQLiteSession("thread-1", str(tmp_path / "session.db"))
    async with _open(tmp_path / "d") as memory:
        async with memory.run("thread-1", SCOPE) as run:
            agent = Agent(
                name="w", model=ScriptedModel(script), tools=run.toolset().to_openai_agents()
            )
            result = await Runner.run(agent, "remember it", session=session, run_config=CONFIG)
            assert result.final_output == "done"
        assert [c.key for c in await signed_calls(memory, "thread-1")] == ["c_store", "c_fetch"]
        size = await memory.ledger.size()
        saved = _items(result)
        outputs = [i["output"] for i in saved if i.get("type") == "function_call_output"]
        # A second process re-issues the same calls (the model's ids), in another order.
        async with memory.run("thread-1", SCOPE) as run:
            tools = {t.name: t for t in run.toolset().to_openai_agents()}
            calls = [i for i in saved if i.get("type") == "function_call"]
            again = {}
            for item in reversed(calls):
                tool = tools[item["name"]]
                context = _context(tool, item["call_id"], item["arguments"])
                again[item["call_id"]] = await tool.on_invoke_tool(context, item["arguments"])
            assert [again["c_store"], again["c_fetch"]] == outputs
        assert await memory.ledger.size() == size  # nothing written twice
        await memory.ledger.verify(trust=memory.trust_root)
    session.close()


async def test_an_error_the_model_can_act_on_comes_back_as_the_tools_text(
    tmp_path: Path, store: None
) -> None:
    script = [
        [function_call("memory_list", {"limit": 500}, call_id="c_bad")],
        [function_call("memory_list", {"limit": 5}, call_id="c_good")],
        [assistant_message("listed")],
    ]
    async with _open(tmp_path / "d") as memory, memory.run("r", SCOPE) as run:
        agent = Agent(name="w", model=ScriptedModel(script), tools=run.toolset().to_openai_agents())
        result = await Runner.run(agent, "list", run_config=CONFIG)
        assert result.final_output == "listed"
        outputs = [i["output"] for i in _items(result) if "output" in i]
        assert outputs[0].startswith("error: ") and "limit" in outputs[0]
        assert json.loads(outputs[1])["items"] == []
        # The refusal is recorded too, at its own step, under its key.
        assert (run.step_of("c_bad"), run.step_of("c_good")) == (0, 1)


def test_the_sync_toolset_runs_under_the_sdks_own_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite only: the store fixture's PostgreSQL schema is made on the test's event loop.
    monkeypatch.delenv(STORE_ENV, raising=False)
    script = [
        [function_call("memory_store", {"learning": {"text": STORED[0]}}, call_id="c0")],
        [function_call("memory_fetch", {"query": "report", "mode": "exact"}, call_id="c1")],
        [assistant_message("done")],
    ]
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.toolset(SCOPE, run_id="sync-1")
        agent = Agent(name="w", model=ScriptedModel(script), tools=toolset.to_openai_agents())
        # asyncio.run, not Runner.run_sync, which leaves its event loop open for reuse.
        result = asyncio.run(Runner.run(agent, "remember it", run_config=CONFIG))
        assert result.final_output == "done"
        fetched = [i["output"] for i in _items(result) if "output" in i][-1]
        assert hits(fetched) == [STORED[0]]
        assert toolset.last_call is not None and toolset.last_call.step == 1
        size = memory.ledger.size()
        # The same ids again (a re-run from the start): memos, nothing written.
        again = asyncio.run(
            Runner.run(
                Agent(name="w", model=ScriptedModel(script), tools=toolset.to_openai_agents()),
                "remember it",
                run_config=CONFIG,
            )
        )
        assert again.to_input_list() == result.to_input_list()
        assert memory.ledger.size() == size
