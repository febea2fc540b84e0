"""The session the read-proof tests prove reads of, recorded on a real data folder.

Another tenant stores memories the run cannot reach; then run ``r1``, placed at
``team:acme/agent:writer``, stores two memories, a second agent of the same
place stores one outside the run (a write the run's reads see but never made),
and the run reads: an exact (BM25) fetch (step 2), a list (step 3), a semantic fetch
with the hashing embedder (step 4), a recall (step 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import msgspec

import memseal
from memseal import ToolScope
from memseal.engine import HashingEmbedder
from memseal.replay.evidence.read_proof import ReadProof, decode_read_proof, encode_read_proof

PLACE = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(PLACE)
OTHER = ToolScope.placed_at("team:other/agent:x")
RUN = "r1"
#: The steps of the reads, by tool.
FETCH, LIST, SEMANTIC, RECALL = 2, 3, 4, 5
#: What the other tenant stored: out of the run's reach, yet in BM25's corpus statistics.
OTHER_TEXTS = (
    "deploy notes for the other team",
    "the other team's lunch menu",
    "the other team's holiday calendar",
)
#: The text the second agent stored: a write the fetch saw that the run did not make.
SEEN_WRITE = "the deploy key rotates every month"


def _store(text: str) -> dict[str, Any]:
    return {"learning": {"text": text}}


class Recorded(NamedTuple):
    """The recorded folder, its trusted key, and the seq of the write the fetch saw."""

    folder: Path
    vkey: str
    seen_write: int
    results: dict[int, Any]


async def record(folder: Path) -> Recorded:
    """Record the session (module docstring) in ``folder``."""
    results: dict[int, Any] = {}
    async with memseal.open(folder, embedder=HashingEmbedder(), checkpoint_interval=None) as memory:
        for text in OTHER_TEXTS:
            await memory.call("memory_store", _store(text), scope=OTHER)
        async with memory.run(RUN, SCOPE) as run:
            await run.call("memory_store", _store("the deploy key lives in vault path ops/deploy"))
            await run.call("memory_store", _store("never deploy on a friday afternoon"))
            await memory.call("memory_store", _store(SEEN_WRITE), scope=SCOPE)
            seen = -1
            async for entry in memory.ledger.scan():
                if entry.entry().kind == "memory_stored":
                    seen = entry.seq
            results[FETCH] = await run.call(
                "memory_fetch", {"query": "deploy key", "mode": "exact"}
            )
            results[LIST] = await run.call("memory_list", {})
            results[SEMANTIC] = await run.call(
                "memory_fetch", {"query": "vault path for the key", "mode": "semantic"}
            )
            results[RECALL] = await run.call("memory_recall", {"question": "where is the key?"})
        vkey = memory.vkey
    return Recorded(folder=folder, vkey=vkey, seen_write=seen, results=results)


async def prove(folder: Path, step: int, **options: Any) -> bytes:
    """The read proof of ``step`` of the run, from the folder."""
    async with memseal.open(folder, embedder=None, checkpoint_interval=None, create=False) as m:
        return await m.prove_read(RUN, step, **options)


def edit(data: bytes, **fields: Any) -> bytes:
    """``data`` (a proof) with ``fields`` replaced, re-encoded canonically."""
    proof = decode_read_proof(data)
    return encode_read_proof(msgspec.structs.replace(proof, **fields))


def without(data: bytes, seq: int) -> bytes:
    """The proof with entry ``seq`` left out of its prefix."""
    proof: ReadProof = decode_read_proof(data)
    return edit(data, prefix=tuple(e for e in proof.prefix if e.seq != seq))
