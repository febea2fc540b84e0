"""The attack tests' shared fixture: a memory on each store, no embedder, no timed checkpoints."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import memseal
from memseal.memory import Memory


@pytest.fixture
async def memory(tmp_path: Path, store_url: str | None) -> AsyncIterator[Memory]:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=None, checkpoint_interval=None
    ) as opened:
        yield opened
