"""Tools over real engines on fresh SQLite data folders, with a clock the tests move."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from clock import Clock

from memseal.cli.engine import open_engine
from memseal.engine import Engine, HashingEmbedder
from memseal.tools import MemoryTools, ToolScope

PLACE = "team:acme/agent:writer"


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


@pytest.fixture
async def exact_engine(tmp_path: Path, clock: Clock) -> AsyncIterator[Engine]:
    """No embedder: exact search only."""
    async with open_engine(tmp_path / "exact", create=True, clock=clock) as opened:
        yield opened


@pytest.fixture
def tools(engine: Engine) -> MemoryTools:
    """An agent placed at team:acme/agent:writer."""
    return MemoryTools(engine, ToolScope.placed_at(PLACE))
