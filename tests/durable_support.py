"""What the durable-runtime tests read back: a run's signed calls, the CLI, tool outputs.

Each runtime's test (LangGraph, the Agents SDK, Pydantic AI, the plain loop) asks
the same questions of a data folder after a kill and a resume: which signed
``memory_tool_call`` entries the run has (one per key, none twice), whether
``memseal verify`` passes, and what the tools returned, less what differs between
two folders. They are answered here once.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import memseal
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call

MEMSEAL = Path(sys.executable).with_name("memseal")
#: Fields of a tool output that differ between two folders holding the same calls.
PER_FOLDER = frozenset({"id", "ledger_ref", "observed_at"})


class SignedCall(NamedTuple):
    """One signed ``memory_tool_call`` entry, as the tests compare it."""

    run_id: str
    step: int
    key: str | None
    tool: str
    error: bool


async def signed_calls(memory: memseal.Memory, run_id: str | None = None) -> list[SignedCall]:
    """The signed calls of ``run_id`` (of every run with None), in log order."""
    found: list[SignedCall] = []
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind != TOOL_CALL:
            continue
        call = decode_tool_call(bytes(entry.body))
        if run_id is None or call.run_id == run_id:
            key = call.key if isinstance(call.key, str) else None
            found.append(SignedCall(call.run_id, call.step, key, call.tool, bool(call.error)))
    return found


async def signed_calls_in(folder: Path, run_id: str | None = None) -> list[SignedCall]:
    """:func:`signed_calls` of the data folder at ``folder``, opened for the reading."""
    async with open_folder(folder) as memory:
        return await signed_calls(memory, run_id)


def open_folder(folder: Path) -> Any:
    """The folder's memory as a test reads it back: no embedder, no timed checkpoints."""
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


def memseal_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``memseal ARGS`` in a process of its own."""
    return subprocess.run(
        [str(MEMSEAL), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def verify_folder(folder: Path) -> None:
    """The folder's ledger verifies, in this process and by ``memseal verify``."""

    async def trust() -> str:
        async with open_folder(folder) as memory:
            await memory.ledger.verify(trust=memory.trust_root)
            return str(memory.trust_root)

    done = memseal_cli("verify", str(folder), "--trust", asyncio.run(trust()), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def audit_export_replay(printed: str, folder: Path, run_id: str, bundle: Path) -> str:
    """What an auditor does after a durable example ran: ``memseal verify`` the folder
    with the key the example printed, export the run, verify the bundle and replay it.
    Each step must pass; the replay's output is returned for the caller's own checks."""
    audit = re.search(r"^audit it: memseal verify (\S+) --trust '(\S+)'$", printed, re.M)
    assert audit is not None, printed
    trust = audit[2]
    verified = memseal_cli("verify", str(folder), "--trust", trust)
    assert verified.returncode == 0 and verified.stdout.startswith("ok: "), (
        verified.stdout + verified.stderr
    )
    exported = memseal_cli("export", "--data", str(folder), "--run", run_id, "-o", str(bundle))
    assert exported.returncode == 0, exported.stderr
    checked = memseal_cli("verify", str(bundle), "--trust", trust)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    replayed = memseal_cli("replay", str(bundle))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    return replayed.stdout


def hits(text: str) -> list[str]:
    """The texts of a fetch result's hits, sorted."""
    return sorted(hit["text"] for hit in json.loads(text)["hits"])


def plain(value: Any) -> Any:
    """A tool output without what differs between two folders (ids, ledger places, times)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in PER_FOLDER}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
