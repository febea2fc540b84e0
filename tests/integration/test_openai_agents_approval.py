"""An OpenAI Agents SDK call that needs a human's approval is recorded exactly once.

The model asks, in one turn, for a ``memory_fetch`` (no approval) and a
``memory_store`` built with ``to_openai_agents(needs_approval=True)``; the run
stops with an interruption and its ``RunState`` is saved to a file. A human then
approves it and the run resumes from that file, in the same process or in a new
one on the same memory folder. Either way every call key has one signed entry,
the tools return what a run without the approval returns, and the folder verifies.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, RunState
from agents.testing import ScriptedModel, assistant_message, function_call
from durable_support import open_folder, plain, signed_calls_in, verify_folder

import memseal
from memseal.memory import STORE_ENV

RUN_ID = "approval-1"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TEXT = "the nightly report goes out at 6am"
FETCH = {"query": "report", "mode": "exact"}
CONFIG = RunConfig(tracing_disabled=True)

#: The turns after the one that needs approval (a new process's model starts here).
LATER = [
    [function_call("memory_fetch", FETCH, call_id="call_2")],
    [assistant_message("done")],
]
FIRST = [
    function_call("memory_fetch", FETCH, call_id="call_0"),
    function_call("memory_store", {"learning": {"text": TEXT}}, call_id="call_1"),
]

# The resume in a new process: the same tools, the saved state, the human's approval.
RESUME = """
import asyncio, json, sys
from pathlib import Path
from agents import Agent, RunConfig, Runner, RunState
from agents.testing import ScriptedModel
import memseal
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, str(Path(sys.argv[3]).parent))  # tests/: durable_support
import test_openai_agents_approval as t

async def main() -> None:
    folder, saved = Path(sys.argv[1]), Path(sys.argv[2])
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        async with memory.run(t.RUN_ID, t.SCOPE) as run:
            agent = t.agent(run.toolset(), ScriptedModel(t.LATER), approval=True)
            state = await RunState.from_string(agent, saved.read_text())
            for item in state.get_interruptions():
                state.approve(item)
            result = await Runner.run(agent, state, run_config=RunConfig(tracing_disabled=True))
    print(json.dumps({"outputs": t.outputs(result), "final": result.final_output}))

asyncio.run(main())
"""


def agent(toolset: Any, model: ScriptedModel, *, approval: bool) -> Agent[Any]:
    """The agent on ``toolset``: its ``memory_store`` needs approval when ``approval``."""
    tools: list[FunctionTool] = toolset.to_openai_agents()
    gated = {t.name: t for t in toolset.to_openai_agents(needs_approval=approval)}
    return Agent(
        name="w",
        model=model,
        tools=[gated[t.name] if t.name == "memory_store" else t for t in tools],
    )


def outputs(result: Any) -> dict[str, str]:
    """Every tool output in the run's items, by call id."""
    return {
        item["call_id"]: item["output"]
        for item in result.to_input_list()
        if item.get("type") == "function_call_output"
    }


@pytest.fixture
def sqlite_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # The new process opens the folder by itself: no store URL is handed on.
    monkeypatch.delenv(STORE_ENV, raising=False)


async def _keys(folder: Path) -> Counter[str | None]:
    """How many signed memory_tool_call entries each key of the run has."""
    return Counter(call.key for call in await signed_calls_in(folder, RUN_ID))


async def _unapproved(folder: Path) -> tuple[dict[str, str], str]:
    """The same calls without any approval: what the approved runs must return."""
    async with open_folder(folder) as memory, memory.run(RUN_ID, SCOPE) as run:
        # The fetch and the store of FIRST in turns of their own: in one turn the SDK runs
        # them side by side, and whether the fetch sees the store is a race. With approval
        # the store waits for the human, so the fetch always runs first; so does it here.
        model = ScriptedModel([[FIRST[0]], [FIRST[1]], *LATER])
        result = await Runner.run(
            agent(run.toolset(), model, approval=False), "remember it", run_config=CONFIG
        )
    return outputs(result), str(result.final_output)


async def _interrupted(folder: Path, saved: Path) -> None:
    """Runs up to the interruption and saves the RunState, as a host waiting on a human."""
    async with open_folder(folder) as memory, memory.run(RUN_ID, SCOPE) as run:
        model = ScriptedModel([FIRST])
        result = await Runner.run(
            agent(run.toolset(), model, approval=True), "remember it", run_config=CONFIG
        )
        assert [i.name for i in result.interruptions] == ["memory_store"]
        assert result.final_output is None
        saved.write_text(result.to_state().to_string())


def _check(tmp_path: Path, folder: Path, got: dict[str, str], final: str) -> None:
    want, want_final = asyncio.run(_unapproved(tmp_path / "unapproved"))
    assert {k: plain(json.loads(v)) for k, v in got.items()} == {
        k: plain(json.loads(v)) for k, v in want.items()
    }
    assert final == want_final == "done"
    assert TEXT in got["call_2"] and TEXT not in got["call_0"]  # the store ran, once
    assert asyncio.run(_keys(folder)) == {"call_0": 1, "call_1": 1, "call_2": 1}
    verify_folder(folder)


def test_an_approved_call_resumed_in_the_same_process_is_recorded_once(
    tmp_path: Path, sqlite_only: None
) -> None:
    folder, saved = tmp_path / "data", tmp_path / "state.json"
    asyncio.run(_interrupted(folder, saved))
    # Only the call that needed no approval ran.
    assert asyncio.run(_keys(folder)) == {"call_0": 1}

    async def resume() -> tuple[dict[str, str], str]:
        async with open_folder(folder) as memory, memory.run(RUN_ID, SCOPE) as run:
            resumed = agent(run.toolset(), ScriptedModel(LATER), approval=True)
            state = await RunState.from_string(resumed, saved.read_text())
            for item in state.get_interruptions():
                state.approve(item)
            result = await Runner.run(resumed, state, run_config=CONFIG)
        return outputs(result), str(result.final_output)

    got, final = asyncio.run(resume())
    _check(tmp_path, folder, got, final)


def test_an_approved_call_resumed_in_a_new_process_is_recorded_once(
    tmp_path: Path, sqlite_only: None
) -> None:
    folder, saved = tmp_path / "data", tmp_path / "state.json"
    asyncio.run(_interrupted(folder, saved))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", STORE_ENV)}
    done = subprocess.run(
        [sys.executable, "-c", RESUME, str(folder), str(saved), str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    _check(tmp_path, folder, printed["outputs"], printed["final"])
