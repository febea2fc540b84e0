"""A witness cosigns a checkpoint whose consistency proof came from a static tile mirror.

A monitor that follows the log through ``memseal tiles`` (no access to the service)
builds the proof the witness asks for out of the hash tiles alone, and the witness
(``memseal witness``'s own code, over HTTP) cosigns it; a mirror with an edited tile
yields a proof the witness refuses.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from witness_support import WitnessThread, follow, grow, new_witness, vkey_of

import memseal
from memseal.ledger.errors import NotFound
from memseal.ledger.merkle import consistency_proof
from memseal.ledger.tiles_store import export_tiles
from memseal.ledger.tiles_verify import TileHashReader


async def _export(folder: Path, out: Path) -> int:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        note = await memory.ledger.checkpoint()
        await export_tiles(memory.ledger.store, note, out)
        return await memory.ledger.size()


def _proof_from_tiles(out: Path, old: int, new: int) -> list[bytes]:
    def fetch(path: str) -> bytes:
        try:
            return (out / path).read_bytes()
        except FileNotFoundError as exc:
            raise NotFound(path) from exc

    return consistency_proof(old, new, TileHashReader(new, fetch))


def test_a_witness_cosigns_with_a_proof_built_from_tiles(tmp_path: Path) -> None:
    log, out, wit = tmp_path / "log", tmp_path / "mirror", tmp_path / "witness"
    first, old = asyncio.run(grow(log, 300, "a"))
    new_witness(wit)
    follow(wit, asyncio.run(vkey_of(log)))
    second, new = asyncio.run(grow(log, 700, "b"))
    assert asyncio.run(_export(log, out)) == new
    with WitnessThread(wit) as witness:
        assert witness.add(0, [], first).status_code == 200
        proof = _proof_from_tiles(out, old, new)
        # An edited hash tile on the mirror: the proof no longer leads to the signed root.
        tile = out / "tile/0/001"
        good = tile.read_bytes()
        tile.write_bytes(good[:40] + bytes([good[40] ^ 1]) + good[41:])
        bad = _proof_from_tiles(out, old, new)
        tile.write_bytes(good)
        assert bad != proof
        refused = witness.add(old, bad, second)
        assert refused.status_code == 422, refused.text
        cosigned = witness.add(old, proof, second)
        assert cosigned.status_code == 200, cosigned.text
        assert cosigned.text.startswith("\u2014 witness.test/w1 ")
