"""The agent memory loop: a scripted model, killed mid-turn, resumed, exported and replayed.

    python examples/agent_loop.py --data loop-data --out loop-out [--kill-at 4]

1. A child process runs the loop (the brain ingest, session start and brief,
   then each turn: pre-turn context, the model's answer, post-turn logging
   with its belief build queued; a compaction on turn 5) and is SIGKILLed in
   the middle of turn ``--kill-at``: after its pre-turn and the model's
   answer, before the turn is logged.
2. The loop runs again here from the top, as a restarted host would: every
   moment the child recorded comes back from its memo (the same brief, the
   same contexts; no turn logged twice, no job queued twice), the rest runs
   live. The background builds then run (``JobQueue.run_pending``).
3. CI's checks: the loop re-driven in ``strict`` mode (every call from its
   memo, nothing live), each job replayed strictly, ``memory.verify``, and
   each run exported (``memseal export``) and replayed (``memseal replay``).

The model is a script (no network, no key): it answers from the pre-turn
context and, on one turn, saves a note with its own memory tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import memseal
from memseal.apps.lifecycle import AgentMemory, Brain, ContextPack, JobQueue, MemoryLayout
from memseal.engine import HashingEmbedder

LAYOUT = MemoryLayout(tenant="acme")
AGENT, THREAD = "helper", "t1"
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
HANDBOOK = "# Relocation\n\nTell HR your new address within a week of moving.\n"

#: What the user says, one message a turn.
USER = [
    "Hi, my name is Ana.",
    "I live in Berlin.",
    "My favourite editor is vim.",
    "I moved to Lisbon last month.",
    "Where do I live?",
    "What do I do after moving?",
    "Which editor do I like?",
    "Thanks, that is all.",
]
COMPACT_AT = 5
RELATED = {"live": ("moved",)}


def model(message: str, context: ContextPack) -> str:
    """The scripted model: a question is answered from the context's first line that
    shares a word with it (or one the script relates: moving is where one lives now);
    a statement is acknowledged."""
    if not message.endswith("?"):
        return "Noted."
    words = {w.strip("?.,").casefold() for w in message.split() if len(w) > 3}
    words |= {related for w in words for related in RELATED.get(w, ())}
    for section in context.sections:
        for item in section.items:
            for line in item.text.splitlines():
                if words & {w.strip("?.,:").casefold() for w in line.split()}:
                    return f"From memory: {line.strip()}"
    return "I do not know yet."


async def loop(
    memory: memseal.Memory, mode: str, log: list[str], *, kill_at: int | None = None
) -> AgentMemory:
    """The host's loop, every moment a recorded call; ``log`` gets what the model saw."""

    def seen(line: str) -> None:
        log.append(line)
        if kill_at is not None:
            print(json.dumps(line), flush=True)

    if mode != "strict":
        brain = Brain(memory, LAYOUT.brain_writer("handbook"))
        await brain.ingest_text(HANDBOOK, source_id="relocation.md", run_id="ingest-handbook")
    queue = JobQueue(memory, LAYOUT.learnings_writer(AGENT))
    session = AgentMemory(memory, LAYOUT, agent=AGENT, thread=THREAD, mode=mode, jobs=queue)
    try:
        start = await session.start()
        seen(f"start: {start.markdown()}")
        seen(f"brief: {await session.briefing(pack=start)}")
        for turn, message in enumerate(USER):
            context = await session.pre_turn(message, turn=turn, at=AT)
            seen(f"pre {turn}: {context.markdown()}")
            answer = model(message, context)
            seen(f"answer {turn}: {answer}")
            if turn == 2:  # the model saves a note with its own tools (recorded, keyed)
                await session.tools.call(
                    "memory_store",
                    {"learning": {"text": "Ana is setting up her editor", "confidence": 0.7}},
                    key=f"model/{turn}",
                )
            if turn == kill_at:
                print("waiting to be killed", flush=True)
                await asyncio.sleep(3600)
            built = await session.post_turn(turn=turn, user=message, assistant=answer)
            seen(f"post {turn}: job {built.job}")
            if turn == COMPACT_AT:
                compacted = await session.compact(turn=turn, keep=2)
                seen(f"compact {turn}: folded {len(compacted.folded)} turns")
    except BaseException:
        await session.close(check=False)
        raise
    await session.close()
    return session


def _open(data: Path) -> Any:
    return memseal.open(data, embedder=HashingEmbedder(dim=64), checkpoint_interval=None)


async def child(data: Path, kill_at: int) -> None:
    async with _open(data) as memory:
        await loop(memory, "resume", [], kill_at=kill_at)


def run_and_kill(data: Path, kill_at: int) -> list[str]:
    """The loop in a child process, SIGKILLed mid-turn; what it saw before it died."""
    argv = [sys.executable, __file__, "--data", str(data), "--child", str(kill_at)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    saw: list[str] = []
    for line in proc.stdout:
        if line.startswith("waiting"):
            break
        saw.append(json.loads(line))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"child killed (exit {proc.returncode}) in turn {kill_at}, after {len(saw)} moments")
    return saw


def _memseal() -> list[str]:
    found = Path(sys.executable).parent / "memseal"
    return [str(found)] if found.exists() else [sys.executable, "-m", "memseal.cli"]


def export_and_replay(data: Path, out: Path, run_ids: list[str]) -> None:
    """``memseal export`` each run to a bundle, then ``memseal replay`` it against the data."""
    out.mkdir(parents=True, exist_ok=True)
    for run_id in run_ids:
        bundle = out / (run_id.replace("/", "_") + ".bundle")
        subprocess.run(
            [*_memseal(), "export", "--data", str(data), "--run", run_id, "-o", str(bundle)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        replayed = subprocess.run(
            [*_memseal(), "replay", str(bundle), "--against", str(data)],
            capture_output=True,
            text=True,
        )
        if replayed.returncode != 0:
            raise SystemExit(f"replay of {run_id} failed: {replayed.stdout}{replayed.stderr}")
        print(f"replayed {run_id}: the same results")


async def resume(data: Path, out: Path) -> list[str]:
    async with _open(data) as memory:
        before = await memory.ledger.size()
        saw: list[str] = []
        session = await loop(memory, "resume", saw)
        print(f"resumed: the log grew from {before} to {await memory.ledger.size()} entries")
        queue = JobQueue(memory, LAYOUT.learnings_writer(AGENT))
        outcomes = await queue.run_pending()
        for outcome in outcomes:
            print(
                f"job {outcome.id}: {outcome.state}, {len(outcome.learned)} learned, "
                f"{len(outcome.superseded)} superseded"
            )
        beliefs = await memory.tools(LAYOUT.learnings_writer(AGENT)).call(
            "memory_list", {"filter": {"tags_any": ["belief"]}, "limit": 50}
        )
        for item in sorted(beliefs["items"], key=lambda i: i["text"]):
            print(f"belief: {item['text']}")
        # CI: the whole conversation again, strictly from its memos.
        strict: list[str] = []
        await loop(memory, "strict", strict)
        assert strict == saw, "the strict replay saw something else"
        done = (await queue.status()).done
        for job in done:
            replayed = await queue.replay_job(job)
            assert replayed.state == "done", replayed.error
        print(f"strict replay: {len(strict)} moments and {len(done)} jobs, all from their memos")
        await memory.verify(memory.trust_root)
        print(f"verified; trust root: {memory.trust_root}")
        # The session's runs and the ingest (the jobs were replayed strictly above).
        run_ids = [*session.run_ids, "ingest-handbook"]
    export_and_replay(data, out, run_ids)
    return saw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="loop-data", type=Path)
    parser.add_argument("--out", default="loop-out", type=Path)
    parser.add_argument("--kill-at", type=int, default=4, help="the turn the child dies in")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        asyncio.run(child(args.data, args.child))
        return 0
    if not 0 <= args.kill_at < len(USER):
        parser.error(f"--kill-at must be a turn from 0 to {len(USER) - 1}")
    before = run_and_kill(args.data, args.kill_at)
    saw = asyncio.run(resume(args.data, args.out))
    if saw[: len(before)] != before:
        print("the resumed loop saw something else than the killed one", file=sys.stderr)
        return 1
    print(f"resumed identically: the {len(before)} moments the child saw came back the same")
    for line in saw:
        if line.startswith("answer"):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
