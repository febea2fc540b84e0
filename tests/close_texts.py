"""A run of close texts: stores of a few words repeated, then full-text fetches of them.

On such texts SQLite's BM25 and PostgreSQL's ``ts_rank`` order the hits of an
exact or hybrid fetch otherwise, so a re-derivation (a read proof, a replay, a
view as of a point) that ranks with the wrong one shows it.
"""

from __future__ import annotations

import random
from typing import Any

import memseal
from memseal.replay.runs.run import Run

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:reader")
WORDS = ["alpha", "beta", "gamma", "delta", "ledger", "store", "memory", "proof"]
#: How many texts the run stores (steps 0 to STORES - 1) and fetches (the steps after).
STORES = 12
READS = 8


async def record_close(
    run: Run, *, seed: int = 5, mode: str = "exact"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Store the texts and fetch them: (each fetch's arguments, each one's result)."""
    rnd = random.Random(seed)
    for _ in range(STORES):
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 9)))
        await run.call("memory_store", {"learning": {"text": text}})
    asked: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []
    for _ in range(READS):
        query = " ".join(rnd.sample(WORDS, rnd.randint(1, 3)))
        asked.append({"query": query, "mode": mode, "limit": 20})  # one page: no cursor
        seen.append(await run.call("memory_fetch", asked[-1]))
    return asked, seen
