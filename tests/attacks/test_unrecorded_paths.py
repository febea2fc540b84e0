"""The tools a host hands its model leave no call unrecorded.

``memory.tools(scope)`` once ran its tools without recording them: a read
through it left no trace and could not be replayed, and a refused write left
nothing an auditor could see. Every call through it, its toolset and its
LangChain tools is now a signed ``memory_tool_call`` entry with its memo; a
refused call keeps no copy of its arguments, as a run's refused call does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

import memseal
from memseal.memory import Memory
from memseal.tools import ToolScope

PLACE = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(PLACE)
BIN = Path(sys.executable).parent


async def _entry_of(memory: Memory, run_id: str) -> tuple[dict[str, object], bytes]:
    rows = await memory.ledger.store.rows(
        "SELECT seq FROM memos WHERE run_id = ? AND step = 0", (run_id,)
    )
    assert len(rows) == 1, f"the call of {run_id} has no memo"
    record = await memory.ledger.read(int(rows[0][0]))
    entry = record.entry()
    assert entry.kind == "memory_tool_call"
    return msgspec.json.decode(bytes(entry.body)), bytes(record.payload or b"")


async def test_a_read_through_the_host_tools_leaves_a_signed_replayable_trace(
    memory: Memory,
) -> None:
    tools = memory.tools(SCOPE)
    await tools.call("memory_store", {"learning": {"text": "a secret the model read"}})
    found = await tools.call("memory_fetch", {"query": "secret", "mode": "exact"})
    ref = tools.last_call
    assert ref is not None and ref.tool == "memory_fetch"
    body, _ = await _entry_of(memory, ref.run_id)
    assert body["tool"] == "memory_fetch" and body["error"] is False
    await memory.verify(memory.trust_root)
    async with memory.run(ref.run_id, SCOPE, mode="strict") as replay:
        assert await replay.call("memory_fetch", {"query": "secret", "mode": "exact"}) == found


async def test_a_refused_write_through_the_host_toolset_is_recorded_without_its_text(
    memory: Memory,
) -> None:
    frozen = memory.tools(ToolScope.placed_at(PLACE, frozen=True)).toolset()
    text = "refused text that must not be kept " * 100
    answer = await frozen.call("memory_store", {"learning": {"text": text}})
    assert answer.startswith("error: ")
    ref = frozen.last_call
    assert ref is not None and isinstance(ref.error, memseal.Unsupported)
    body, payload = await _entry_of(memory, ref.run_id)
    assert body["error"] is True
    assert b"refused text" not in payload
    await memory.verify(memory.trust_root)


def test_a_host_tools_call_exports_and_replays_from_the_command_line(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    with memseal.open_sync(folder, embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.toolset(SCOPE)
        toolset.call("memory_store", {"learning": {"text": "exported from host tools"}})
        ref = toolset.last_call
        assert ref is not None
    bundle = tmp_path / "call.bundle"
    memseal_bin = str(BIN / "memseal")
    exported = subprocess.run(
        [memseal_bin, "export", "--data", str(folder), "--run", ref.run_id, "-o", str(bundle)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stderr
    replayed = subprocess.run(
        [memseal_bin, "replay", str(bundle)], capture_output=True, text=True, timeout=120
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
