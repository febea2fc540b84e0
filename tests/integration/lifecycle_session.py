"""A scripted agent session over AgentMemory, run as a subprocess by test_agent_memory.

``python lifecycle_session.py DATA MODE OUT [PAUSE_AT]``: opens DATA, drives
one session (start, brief, twelve turns with a compaction every fifth) in
MODE, and appends each moment's result to OUT as a JSON line. With
PAUSE_AT, it stops after the pre-turn of that turn, prints ``PAUSED`` and
waits to be killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import TextIO

import memseal
from memseal.apps.lifecycle import AgentMemory, MemoryLayout
from memseal.engine import HashingEmbedder

MESSAGES = [
    "Hi, my name is Ana.",
    "I live in Berlin.",
    "I work at Siemens as a backend engineer.",
    "My favourite editor is vim.",
    "What did we talk about yesterday?",
    "I moved to Lisbon last month.",
    "Where do I live?",
    "I joined Google this week.",
    "Where do I work?",
    "My favourite editor is helix now.",
    "Which editor do I like?",
    "Thanks, that is all.",
]
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def main(data: str, mode: str, log: TextIO, pause_at: int | None) -> None:
    def note(moment: str, turn: int | None, value: object) -> None:
        log.write(json.dumps({"moment": moment, "turn": turn, "value": value}) + "\n")
        log.flush()

    async with memseal.open(data, embedder=HashingEmbedder(dim=64)) as memory:
        layout = MemoryLayout(tenant="acme")
        async with AgentMemory(memory, layout, agent="helper", thread="t1", mode=mode) as session:
            start = await session.start()
            note("start", None, start.markdown())
            note("brief", None, await session.briefing(pack=start))
            for turn, message in enumerate(MESSAGES):
                pack = await session.pre_turn(message, turn=turn, at=AT)
                note("pre", turn, pack.markdown())
                if turn == pause_at:
                    print("PAUSED", flush=True)
                    await asyncio.sleep(3600)
                built = await session.post_turn(
                    turn=turn, user=message, assistant=f"Noted: {message}"
                )
                note("post", turn, list(built.source_ids))
                if turn % 5 == 4:
                    compacted = await session.compact(turn=turn, keep=3)
                    note("compact", turn, list(compacted.folded))


if __name__ == "__main__":
    pause = int(sys.argv[4]) if len(sys.argv) > 4 else None
    with open(sys.argv[3], "a") as out:
        asyncio.run(main(sys.argv[1], sys.argv[2], out, pause))
