"""examples/agent_loop.py runs as written: a scripted model's session SIGKILLed
mid-turn, resumed identically, its jobs built, replayed strictly, exported and
replayed with ``memseal replay``; then its data holds each turn and job once.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import memseal
from memseal.apps.lifecycle import JobQueue, MemoryLayout
from memseal.engine import Reach
from memseal.memory import STORE_ENV

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = MemoryLayout(tenant="acme")


async def _held(data: Path) -> tuple[int, int, int]:
    async with memseal.open(data, embedder=None, checkpoint_interval=None) as memory:
        turns = await memory.engine.list(
            filter={"kinds": ["conversation"]},
            reach=Reach.exact(LAYOUT.thread("helper", "t1")),
            limit=50,
        )
        status = await JobQueue(memory, LAYOUT.learnings_writer("helper")).status()
        return len(turns.items), len(status.pending), len(status.done)


def test_the_agent_loop_example_is_killed_resumed_and_replayed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", STORE_ENV)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_loop.py"), "--kill-at", "4"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "child killed (exit -9) in turn 4" in out
    assert "resumed identically: the 16 moments" in out
    answers = {line.split(":")[0]: line for line in out.splitlines() if line.startswith("answer")}
    assert "Lisbon" in answers["answer 4"] and "Berlin" not in answers["answer 4"]
    assert "new address" in answers["answer 5"]  # from the brain
    assert "vim" in answers["answer 6"]
    assert "strict replay: 27 moments and 8 jobs" in out
    for run in ("thread", "own", "team", "brain", "model", "queue"):
        assert f"replayed helper.t1/{run}: the same results" in out
    assert "belief: The user's favourite editor is vim." in out
    assert not any(line.startswith("belief:") and "Berlin" in line for line in out.splitlines())
    # Eight turns logged once each, eight jobs queued once each, all built.
    assert asyncio.run(_held(tmp_path / "loop-data")) == (8, 0, 8)
    assert len(list((tmp_path / "loop-out").glob("*.bundle"))) == 7
