"""A scripted agent (no model) that records a durable run, is killed, resumes, and exports it.

    python examples/durable_agent.py --data agent-data --out session.bundle

1. A child process runs the agent in a fresh run and is SIGKILLed after its
   third call (mid-run, its lease still held).
2. The agent runs again in this process: the calls the child made are served
   from their signed memos (nothing is written twice), the rest run live.
3. The run is exported as a session bundle (``memseal export``), which CI
   can verify (``memseal verify``) and replay (``memseal replay``).

``--embedder hashing`` (default) uses memseal's deterministic hashing
embedder; ``none`` serves exact search only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import memseal
from memseal.engine import HashingEmbedder

RUN_ID = "nightly-report"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")

#: The agent's calls, in order: what a model would have decided, scripted.
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("memory_store", {"learning": {"text": "the nightly report goes out at 6am"}}),
    ("memory_store", {"learning": {"text": "the writer prefers dark mode in every editor"}}),
    ("memory_store", {"learning": {"text": "deploys happen on Tuesdays after the report"}}),
    ("memory_fetch", {"query": "report"}),
    ("memory_fetch", {"query": "dark mode"}),
    ("memory_list", {}),
    ("memory_recall", {"question": "when does the report go out?"}),
]


def _embedder(name: str) -> HashingEmbedder | None:
    return HashingEmbedder() if name == "hashing" else None


async def play(run: Any, *, crash_after: int | None = None) -> Any:
    """The agent itself: the script, on anything with ``call(name, args)`` (a memseal run, or a
    :class:`memseal.replay.Replayer`'s run); returns its final output (the recall)."""
    result: Any = None
    for i, (name, args) in enumerate(SCRIPT):
        result = await run.call(name, args)
        print(f"step {i} {name} done", flush=True)
        if crash_after is not None and i + 1 >= crash_after:
            print("waiting to be killed", flush=True)
            await asyncio.sleep(3600)
    return result


async def agent(memory: memseal.Memory, *, crash_after: int | None = None) -> Any:
    """Run the script in the durable run RUN_ID (resumed from its memos if it was begun)."""
    async with memory.run(RUN_ID, SCOPE) as run:
        return await play(run, crash_after=crash_after)


async def child(data: Path, embedder: str, crash_after: int) -> None:
    async with memseal.open(data, embedder=_embedder(embedder)) as memory:
        await agent(memory, crash_after=crash_after)


def run_and_kill(data: Path, embedder: str, crash_after: int) -> None:
    """Start the agent in a child process and SIGKILL it once it made `crash_after` calls."""
    argv = [sys.executable, __file__, "--data", str(data), "--embedder", embedder]
    proc = subprocess.Popen([*argv, "--child", str(crash_after)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        print(f"  child: {line.rstrip()}")
        if line.startswith("waiting"):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"child killed (exit {proc.returncode}) after {crash_after} calls")


async def resume(data: Path, embedder: str) -> Any:
    async with memseal.open(data, embedder=_embedder(embedder)) as memory:
        before = await memory.ledger.size()
        output = await agent(memory)
        print(f"resumed: the log grew from {before} to {await memory.ledger.size()} entries")
        print(f"trust root: {memory.trust_root}")
        (data / "trust.vkey").write_text(memory.trust_root + "\n", encoding="utf-8")
        return output


def export(data: Path, out: Path) -> None:
    memseal_bin = Path(sys.executable).parent / "memseal"
    command = [str(memseal_bin)] if memseal_bin.exists() else [sys.executable, "-m", "memseal.cli"]
    subprocess.run(
        [*command, "export", "--data", str(data), "--run", RUN_ID, "-o", str(out)], check=True
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="agent-data", type=Path)
    parser.add_argument("--out", default="session.bundle", type=Path)
    parser.add_argument("--embedder", choices=["hashing", "none"], default="hashing")
    parser.add_argument("--crash-after", type=int, default=3)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        asyncio.run(child(args.data, args.embedder, args.child))
        return 0
    run_and_kill(args.data, args.embedder, args.crash_after)
    output = asyncio.run(resume(args.data, args.embedder))
    print(f"agent output: {output.get('answer') if isinstance(output, dict) else output}")
    export(args.data, args.out)
    print(f"session exported to {args.out}; the trust root is in {args.data / 'trust.vkey'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
