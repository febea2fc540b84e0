"""Shared test set-up: hypothesis profiles (``HYPOTHESIS_PROFILE=ci`` in CI), the store fixture."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, settings
from stores import ADAPTERS, drop_schemas, fresh_url

settings.register_profile("dev", deadline=None, max_examples=60)
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=40,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(params=ADAPTERS)
async def store_url(request: pytest.FixtureRequest) -> AsyncIterator[str | None]:
    """None (the data folder's SQLite file) or a fresh PostgreSQL schema's URL."""
    if request.param == "sqlite":
        yield None
        return
    url, schema = fresh_url(adapter=request.param)
    try:
        yield url
    finally:
        await drop_schemas([schema], request.param)
