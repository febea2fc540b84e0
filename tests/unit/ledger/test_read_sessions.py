"""The store's read sessions (the snapshot pool the engine's queries run on)."""

from __future__ import annotations

from pathlib import Path

import memseal


async def test_snapshot_reads_go_through_a_memory_map(tmp_path: Path) -> None:
    # A ranked search reads one projection row per match; through the map a page missed
    # in SQLite's own cache is no read() call and copy (exact fetch p95 at 10^5 items).
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        pool = memory.ledger.store.snapshots()  # type: ignore[attr-defined]
        try:
            rows = await pool.rows("PRAGMA mmap_size")
        finally:
            await pool.close()
    assert rows[0][0] >= 1 << 30
