"""Engines over fresh data folders, with a clock the tests move."""

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
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def engine(data: Path, clock: Clock, store_url: str | None) -> AsyncIterator[Engine]:
    """Every mode served, by the deterministic hashing embedder; on each store."""
    async with open_engine(
        data, create=True, clock=clock, embedder=HashingEmbedder(), store=store_url
    ) as opened:
        yield opened


@pytest.fixture
async def exact_engine(data: Path, clock: Clock, store_url: str | None) -> AsyncIterator[Engine]:
    """No embedder: exact search only; on each store."""
    async with open_engine(data, create=True, clock=clock, store=store_url) as opened:
        yield opened
