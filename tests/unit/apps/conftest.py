"""The apps over a real engine on a fresh SQLite data folder, with a clock the tests move."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from clock import Clock

from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def engine(tmp_path: Path, clock: Clock) -> AsyncIterator[Engine]:
    """Every fetch mode served, by the deterministic hashing embedder."""
    async with open_engine(
        tmp_path / "data", create=True, clock=clock, embedder=HashingEmbedder(dim=64)
    ) as opened:
        yield opened
