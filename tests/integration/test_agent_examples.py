"""examples/langchain_agent.py and examples/openai_agent.py run offline as written.

Each runs as a subprocess in an empty folder, with no data folder named (so in a
fresh temp folder, here kept under tmp_path), then again on the folder it made:
what it prints, the signed entries it left, and ``memseal verify`` on them.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal

ROOT = Path(__file__).resolve().parents[2]
MEMSEAL = Path(sys.executable).parent / "memseal"
STORED = "the nightly report goes out at 6am"

EXAMPLES = [
    pytest.param("langchain_agent.py", "langchain-agent", id="langchain"),
    pytest.param("openai_agent.py", "openai-agent", id="openai"),
]


def _run(script: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No key of anyone's: an example that reached a real API would fail here.
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["TMPDIR"] = str(cwd.parent / "tmp")
    env.pop("MEMSEAL_STORE", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def _tool_calls(folder: Path) -> tuple[int, list[dict[str, Any]]]:
    """The log's size and the bodies of its memory_tool_call entries, in log order."""
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        bodies = []
        async for record in memory.ledger.scan():
            entry = record.entry()
            if entry.kind == "memory_tool_call":
                bodies.append(msgspec.json.decode(bytes(entry.body)))
        return await memory.ledger.size(), bodies


@pytest.mark.parametrize(("script", "run_id"), EXAMPLES)
def test_agent_example_stores_fetches_records_and_verifies(
    tmp_path: Path, script: str, run_id: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "tmp").mkdir()

    done = _run(script, work)
    assert done.returncode == 0, done.stderr
    assert list(work.iterdir()) == []  # nothing left in the folder it ran in
    out = done.stdout
    assert f"answer: From memory: {STORED}." in out
    assert f"run '{run_id}': 2 step(s)" in out
    fetched = next(line for line in out.splitlines() if line.startswith("tool memory_fetch"))
    assert STORED in fetched and "error:" not in fetched
    audit = re.search(r"^audit it: memseal verify (\S+) --trust '(\S+)'$", out, re.M)
    assert audit is not None, out
    folder, trust = Path(audit[1]), audit[2]
    assert folder.parent == tmp_path / "tmp"  # the default: a fresh temp folder

    size, calls = asyncio.run(_tool_calls(folder))
    assert [(c["run_id"], c["step"], c["tool"]) for c in calls] == [
        (run_id, 0, "memory_store"),
        (run_id, 1, "memory_fetch"),
    ]
    assert size == 4  # genesis, the stored item, the two recorded calls

    verified = subprocess.run(
        [str(MEMSEAL), "verify", str(folder), "--trust", trust],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("ok: 4 entries verified")
    other = (ROOT / "tests/vectors/bundles/trust.vkey").read_text().strip()
    untrusted = subprocess.run(
        [str(MEMSEAL), "verify", str(folder), "--trust", other],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert untrusted.returncode == 1, untrusted.stdout  # the check above can fail

    # Again on the same folder: the run resumes, both steps answered from their memos.
    again = _run(script, work, "--data", str(folder))
    assert again.returncode == 0, again.stderr
    assert f"answer: From memory: {STORED}." in again.stdout
    assert asyncio.run(_tool_calls(folder)) == (size, calls)
