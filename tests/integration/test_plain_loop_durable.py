"""A plain tool loop over the OpenAI or Anthropic SDK resumes exactly once, never stale.

examples/durable_plain_loop.py runs as a subprocess: the real ``openai`` and
``anthropic`` clients over a mock transport (a scripted model, no network), the
conversation saved to a file, each tool call (the SDK's own object) handed to
``toolset.call(tool_call)``. The first process SIGKILLs itself right after its
third tool call returns, before the result is saved; the second loads the
conversation, re-runs the call it lost (same id: its memo) and goes on. In
process: the SDK objects' ids are the keys, and a bad id is refused by name.
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
from anthropic.types import ToolUseBlock
from durable_support import audit_export_replay, hits, signed_calls_in
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)

import memseal
from memseal.memory import STORE_ENV

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "durable_plain_loop.py"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
STORED = ["the nightly report goes out at 6am", "the weekly report goes out on Mondays"]
PREFIX = {"openai": "call", "anthropic": "toolu"}


def _example(data: Path, sdk: str) -> subprocess.CompletedProcess[str]:
    drop = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", STORE_ENV)
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--data", str(data), "--sdk", sdk],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _tool_lines(out: str) -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^tool (\S+) memory_\w+: (.*)$", out, re.M)}


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_plain_loop_killed_after_the_third_call_resumes_each_call_exactly_once(
    tmp_path: Path, sdk: str
) -> None:
    data, run_id = tmp_path / "data", f"plain-{sdk}"
    ids = [f"{PREFIX[sdk]}_{n}" for n in range(4)]
    first = _example(data, sdk)
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    before = _tool_lines(first.stdout)
    assert list(before) == ids[:3]
    saved = json.loads((data / f"plain-{sdk}-conversation.json").read_text())
    # The last thing saved is the reply asking for the third call; its result was lost.
    assert saved[-1]["role"] == "assistant" and ids[2] in json.dumps(saved[-1])

    second = _example(data, sdk)
    assert second.returncode == 0, second.stdout + second.stderr
    after = _tool_lines(second.stdout)
    assert list(after) == ids[2:]  # the lost call, from the saved reply, then the next
    assert after[ids[2]] == before[ids[2]]  # its memo: the result it had
    # The fourth call's arguments equal the first's; its own id runs live and sees both.
    assert hits(before[ids[0]]) == [] and hits(after[ids[3]]) == STORED
    assert f"answer: From memory: {'; '.join(STORED)}." in second.stdout
    keys = [c.key for c in asyncio.run(signed_calls_in(data, run_id))]
    assert sorted(keys, key=str) == ids  # each key signed once

    audit_export_replay(second.stdout, data, run_id, tmp_path / "run.bundle")


# -- the SDK objects, in process --------------------------------------------------------------


@pytest.fixture
def store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _openai(name: str, arguments: dict[str, Any], call_id: Any) -> Any:
    function = Function(name=name, arguments=json.dumps(arguments))
    if isinstance(call_id, str):
        return ChatCompletionMessageFunctionToolCall(id=call_id, type="function", function=function)
    # What a hostile or broken server could hand a host: the SDK does not validate responses.
    return ChatCompletionMessageFunctionToolCall.model_construct(
        id=call_id, type="function", function=function
    )


def _anthropic(name: str, arguments: dict[str, Any], call_id: Any) -> Any:
    if isinstance(call_id, str):
        return ToolUseBlock(id=call_id, type="tool_use", name=name, input=arguments)
    return ToolUseBlock.model_construct(id=call_id, type="tool_use", name=name, input=arguments)


MAKERS = [pytest.param(_openai, id="openai"), pytest.param(_anthropic, id="anthropic")]


@pytest.mark.parametrize("make", MAKERS)
async def test_a_reissued_call_equal_to_step_0s_gets_its_own_result(
    tmp_path: Path, store: None, make: Any
) -> None:
    fetch = {"query": "report", "mode": "exact"}
    folder = tmp_path / "d"
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        async with memory.tools(SCOPE, run_id="loop") as tools:
            toolset = tools.toolset()
            empty = await toolset.call(make("memory_fetch", fetch, "id_0"))
            await toolset.call(make("memory_store", {"learning": {"text": STORED[0]}}, "id_1"))
        size = await memory.ledger.size()
        async with memory.tools(SCOPE, run_id="loop") as tools:
            toolset = tools.toolset()
            # The saved call, re-run: its memo (0 hits, as it had), nothing written.
            assert await toolset.call(make("memory_fetch", fetch, "id_0")) == empty
            assert await memory.ledger.size() == size
            # The model asks again with the same arguments and a new id: a live fetch.
            fresh = await toolset.call(make("memory_fetch", fetch, "id_2"))
            assert hits(empty) == [] and hits(fresh) == [STORED[0]]
            assert tools.last_call is not None and tools.last_call.step == 2


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("bad", [7, ["call_0"], "k" * 201, "", "tab\tkey"])
async def test_a_bad_tool_call_id_is_an_error_naming_key_and_writes_nothing(
    tmp_path: Path, store: None, make: Any, bad: Any
) -> None:
    async with (
        memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory,
        memory.tools(SCOPE, run_id="loop") as tools,
    ):
        toolset = tools.toolset()
        size = await memory.ledger.size()
        text = await toolset.call(make("memory_store", {"learning": {"text": STORED[0]}}, bad))
        assert text.startswith("error: `key`"), text
        assert await memory.ledger.size() == size and tools.last_call is None
