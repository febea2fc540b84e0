"""Online key rotation refuses nothing: writers on the rotated folder go on signing.

The attack (an accident, seen under load): ``memseal keys rotate`` while ``serve``
writes. A writer that looked for the new key between the rotation's two renames
found the new private key beside the old public key, took the pair for broken, found
no pending key either, and refused the write ("holds the retired key ... restart
it"). Here the window between the renames is held open on purpose, a rotation runs
again and again, and eight writers append throughout: not one write may be refused.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from _scale import SCALE

import memseal
from memseal.engine import Learning
from memseal.ledger import keys as key_files
from memseal.ledger.errors import MemsealError

PLACE = "user:rotation"
ROTATIONS = 4 * SCALE
WRITERS = 8


async def test_rotations_under_concurrent_writers_refuse_no_write(
    tmp_path: Path, store_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = key_files._move
    loop = asyncio.get_running_loop()
    gate = asyncio.Event()
    gate.set()

    def slow_move(source: Path, target: Path) -> None:
        moved(source, target)
        if target.name == "ledger.skey":
            # The new private key is in place, its public half not yet: let the writers in.
            loop.call_soon_threadsafe(gate.set)
            time.sleep(0.3)

    monkeypatch.setattr(key_files, "_move", slow_move)
    folder = tmp_path / "data"
    refused: list[str] = []
    written = 0
    async with (
        memseal.open(folder, store=store_url, embedder=None) as rotator,
        memseal.open(folder, store=store_url, embedder=None) as server,
    ):
        done = asyncio.Event()

        async def writer(n: int) -> None:
            nonlocal written
            i = 0
            while not done.is_set():
                await gate.wait()
                try:
                    await server.engine.store(Learning(text=f"w{n} {i}"), namespace=PLACE)
                    written += 1
                except MemsealError as exc:
                    refused.append(str(exc))
                i += 1
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(writer(n)) for n in range(WRITERS)]
        try:
            for _ in range(ROTATIONS):
                await asyncio.sleep(0.05)
                gate.clear()
                await asyncio.sleep(0.1)  # writes in flight land before the rotation
                await rotator.rotate_key()
                gate.set()
            await asyncio.sleep(0.05)
        finally:
            done.set()
            await asyncio.gather(*tasks)
        assert refused == [], f"{len(refused)} of {len(refused) + written} writes refused"
        assert written > 0
        summary = await server.ledger.verify(server.trust_root)
        assert len(summary.keys) == ROTATIONS + 1
        assert server.vkey == rotator.vkey
