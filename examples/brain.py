"""The brain: ingest a folder of docs, re-ingest after an edit, ask with memory_recall.

    python examples/brain.py --data brain-data

Writes a small handbook folder beside the data folder (``<data>-docs``),
ingests it into ``team:acme/brain:handbook``, edits one character of one
file and ingests again (only the changed chunk is stored, its old version
forgotten), then asks an agent's ``memory_recall`` a question whose answer
is in the edited chunk, and verifies the ledger.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import memseal
from memseal.apps.lifecycle import Brain
from memseal.engine import Reach

BRAIN = memseal.ToolScope.placed_at("team:acme/brain:handbook")
# An agent that reads the whole brain (and writes nothing of its own here).
AGENT = memseal.ToolScope.placed_at(
    "team:acme/agent:helper", reach=Reach.subtree("team:acme/brain:handbook"), writes=False
)
DOCS = {
    "leave.md": "# Leave\n\nEveryone gets 25 days of paid leave a year.\n\n"
    "## Carry-over\n\nUp to five unused days carry over to the next year.\n",
    "tools/stack.md": "# Stack\n\nThe service runs on uvicorn.\n\n```sh\nmake test\n```\n",
    "onboarding.txt": "Ask your lead for a laptop on day one.\n\nBadges come from reception.\n",
}


async def main(data: Path) -> None:
    docs = data.with_name(data.name + "-docs")
    for name, text in DOCS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    async with memseal.open(data, embedder=None) as memory:
        brain = Brain(memory, BRAIN, budget=200)
        first = await brain.ingest(docs)
        print(f"first ingest: {first.line()}")
        again = await brain.ingest(docs)
        print(f"unchanged re-ingest: {again.stored} stored, {again.forgotten} forgotten")
        leave = docs / "leave.md"
        leave.write_text(leave.read_text(encoding="utf-8").replace("25 days", "27 days"))
        edited = await brain.ingest(docs)
        print(f"re-ingest after the edit: {edited.stored} stored, {edited.forgotten} forgotten")
        answer = await memory.tools(AGENT).call(
            "memory_recall", {"question": "how many days of paid leave"}
        )
        print(f"recall: {answer['answer']}")
        assert "27 days" in answer["answer"] and "25 days" not in answer["answer"]
        await memory.verify(deep=True)
        print(f"verified: memseal verify {data} --trust '{memory.trust_root}'")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="brain-data", type=Path, help="the data folder")
    asyncio.run(main(parser.parse_args().data))
