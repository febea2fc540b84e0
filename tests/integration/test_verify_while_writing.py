"""``verify`` of a live ledger: entries appended while it runs are not stray rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import memseal
from memseal.tools import ToolScope

SCOPE = ToolScope.placed_at("team:acme/agent:writer")


async def test_a_store_committed_during_verify_does_not_fail_it(tmp_path: Path) -> None:
    async with memseal.open(tmp_path, embedder=None, checkpoint_interval=None) as memory:
        await memory.call("memory_store", {"learning": {"text": "pg-7 is staging"}}, scope=SCOPE)
        store = memory.ledger.store
        real = store.stray_rows
        sizes: list[int] = []

        async def store_then_look(size: int) -> Any:
            # A real store commits after verify read the log and before it looks for rows
            # outside it: its payload, mentions and tree hashes lie past the verified size.
            sizes.append(size)
            if len(sizes) == 1:
                await memory.call(
                    "memory_store", {"learning": {"text": "pg-9 is prod"}}, scope=SCOPE
                )
            return await real(size)

        store.stray_rows = store_then_look  # type: ignore[method-assign]
        summary = await memory.ledger.verify(trust=memory.trust_root)
        assert summary.size == sizes[0] and sizes[1] > sizes[0]
        del store.stray_rows
        assert (await memory.ledger.verify(trust=memory.trust_root)).size == sizes[1]
