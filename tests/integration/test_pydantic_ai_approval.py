"""A Pydantic AI call that needs a human's approval is recorded exactly once.

The memseal tools from ``run.toolset().to_pydantic_ai()`` sit in a
``FunctionToolset`` whose ``approval_required`` wrapper defers ``memory_store``.
The model asks, in one turn, for a ``memory_fetch`` and a ``memory_store``: the
fetch runs, the run ends with ``DeferredToolRequests`` and its message history
is saved to a file. A human approves the store (``DeferredToolResults``) and the
run resumes from the saved history, in the same process or in a new one on the
same memory folder. Either way every call key has one signed entry, the tools
return what a run without the approval returns, and the folder verifies.
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
from durable_support import open_folder, plain, signed_calls_in, verify_folder
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelMessagesTypeAdapter,
    ToolApproved,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import memseal
from memseal.memory import STORE_ENV

RUN_ID = "approval-1"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TEXT = "the nightly report goes out at 6am"
FETCH = {"query": "report", "mode": "exact"}

#: The model's turns: each response's tool calls, then an answer.
TURNS = [
    [
        ToolCallPart("memory_fetch", FETCH, tool_call_id="call_0"),
        ToolCallPart("memory_store", {"learning": {"text": TEXT}}, tool_call_id="call_1"),
    ],
    [ToolCallPart("memory_fetch", FETCH, tool_call_id="call_2")],
]

# The resume in a new process: the same tools, the saved history, the human's approval.
RESUME = """
import asyncio, json, sys
from pathlib import Path
import memseal
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, str(Path(sys.argv[3]).parent))  # tests/: durable_support
import test_pydantic_ai_approval as t

async def main() -> None:
    folder, saved = Path(sys.argv[1]), Path(sys.argv[2])
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        async with memory.run(t.RUN_ID, t.SCOPE) as run:
            outputs, final = await t.approve(run.toolset(), saved.read_bytes())
    print(json.dumps({"outputs": outputs, "final": final}))

asyncio.run(main())
"""


# The unapproved baseline's turns: the fetch and the store of the first turn in turns of
# their own. In one turn Pydantic AI runs them side by side, and whether the fetch sees the
# store is a race; with approval the store waits for the human, so the fetch always runs
# first, and so it does here.
APART = [[TURNS[0][0]], [TURNS[0][1]], *TURNS[1:]]


def _model(turns: list[list[ToolCallPart]]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # Stateless, from the conversation: a new process's model picks up where it was.
        made = sum(isinstance(message, ModelResponse) for message in messages)
        if made < len(turns):
            return ModelResponse(parts=list(turns[made]))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def agent(
    toolset: Any, *, approval: bool, turns: list[list[ToolCallPart]] = TURNS
) -> Agent[None, str | DeferredToolRequests]:
    """The agent on ``toolset``: its ``memory_store`` needs approval when ``approval``."""
    tools = FunctionToolset(toolset.to_pydantic_ai())
    return Agent(
        _model(turns),
        output_type=[str, DeferredToolRequests],
        toolsets=[
            tools.approval_required(
                lambda ctx, tool, args: approval and tool.name == "memory_store"
            )
        ],
    )


def outputs(messages: list[ModelMessage]) -> dict[str, str]:
    """Every tool output in the history, by call id."""
    return {
        part.tool_call_id: str(part.content)
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


async def approve(toolset: Any, saved: bytes) -> tuple[dict[str, str], str]:
    """Approves every deferred call of the saved history and runs on to the answer."""
    history = ModelMessagesTypeAdapter.validate_json(saved)
    # The calls the model made that have no result yet: the ones a human has to approve.
    asked = [
        part
        for message in history
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.tool_call_id not in outputs(history)
    ]
    results = DeferredToolResults(approvals={part.tool_call_id: ToolApproved() for part in asked})
    result = await agent(toolset, approval=True).run(
        message_history=history, deferred_tool_results=results
    )
    assert isinstance(result.output, str)
    return outputs(result.all_messages()), result.output


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
        result = await agent(run.toolset(), approval=False, turns=APART).run("remember it")
    assert isinstance(result.output, str)
    return outputs(result.all_messages()), result.output


async def _deferred(folder: Path, saved: Path) -> None:
    """Runs up to the deferred call and saves the history, as a host waiting on a human."""
    async with open_folder(folder) as memory, memory.run(RUN_ID, SCOPE) as run:
        result = await agent(run.toolset(), approval=True).run("remember it")
        assert isinstance(result.output, DeferredToolRequests)
        assert [part.tool_call_id for part in result.output.approvals] == ["call_1"]
        saved.write_bytes(ModelMessagesTypeAdapter.dump_json(result.all_messages()))


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
    folder, saved = tmp_path / "data", tmp_path / "history.json"
    asyncio.run(_deferred(folder, saved))
    # Only the call that needed no approval ran.
    assert asyncio.run(_keys(folder)) == {"call_0": 1}

    async def resume() -> tuple[dict[str, str], str]:
        async with open_folder(folder) as memory, memory.run(RUN_ID, SCOPE) as run:
            return await approve(run.toolset(), saved.read_bytes())

    got, final = asyncio.run(resume())
    _check(tmp_path, folder, got, final)


def test_an_approved_call_resumed_in_a_new_process_is_recorded_once(
    tmp_path: Path, sqlite_only: None
) -> None:
    folder, saved = tmp_path / "data", tmp_path / "history.json"
    asyncio.run(_deferred(folder, saved))
    env = {k: v for k, v in os.environ.items() if k != STORE_ENV}
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
