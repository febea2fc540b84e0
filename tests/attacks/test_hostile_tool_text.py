"""Hostile argument text handed to a toolset comes back as ``error:`` text, never raised.

What a model API returns as a call's arguments is untrusted text: nested
past the interpreter's recursion limit, not UTF-8, holding lone
surrogates. ``Toolset.call`` and ``AsyncToolset.call`` answer each with
``error:`` text the model can read, and write no memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import memseal

HOSTILE_TEXTS: list[str | bytes] = [
    "[" * 100_000 + "]" * 100_000,
    '{"query":' * 5_000 + "1" + "}" * 5_000,
    '{"a":' * 1_000 + "1" + "}" * 1_000,
    b'{"query": "dark \xff mode"}',
    b'{"learning": {"text": "\xed\xa0\x80"}}',
    '{"query": "\ud800"}',
    "\ud800",
]
SCOPE = memseal.ToolScope.placed_at("team:hostile/agent:text")


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
def test_hostile_argument_text_to_toolset_call_comes_back_as_error_text(
    tmp_path: Path, text: str | bytes
) -> None:
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.toolset(SCOPE)  # recorded: a run's refusal of the text, as in_run's
        for tool in ("memory_fetch", "memory_store"):
            answer = toolset.call(tool, text)
            assert answer.startswith(f"error: {tool}: "), answer
        in_run = memory.toolset(SCOPE, run_id="hostile-text")
        assert in_run.call("memory_store", text).startswith("error: memory_store: ")
        answer = toolset.call("memory_list", {})
        assert '"items":[]' in answer.replace(" ", ""), answer


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
async def test_hostile_argument_text_to_async_toolset_call_comes_back_as_error_text(
    tmp_path: Path, text: str | bytes
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.tools(SCOPE).toolset()
        for tool in ("memory_fetch", "memory_store"):
            answer = await toolset.call(tool, text)
            assert answer.startswith(f"error: {tool}: "), answer
        run = memory.run("hostile-text", SCOPE)
        try:
            answer = await run.toolset().call("memory_store", text)
            assert answer.startswith("error: memory_store: "), answer
        finally:
            await run.close(check=False)
