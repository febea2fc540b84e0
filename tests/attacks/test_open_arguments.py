"""Bad arguments to ``memseal.open``: each is an InvalidRequest naming the argument, and
nothing is created.

``embedder="hashing"`` (a name where an object belongs) got as far as the engine and
failed there with an AttributeError, after the folder and its keys were made; a
string ``answerer`` opened and waited for the first recall to fail; ``create="no"``
(truthy) made a folder and a key.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.engine import HashingEmbedder
from memseal.errors import InvalidRequest

BAD = [
    ("embedder", "hashing", ['"default"', "None", "HashingEmbedder()", "'hashing'"]),
    ("embedder", "Default", ['"default"', "'Default'"]),
    ("embedder", 42, ["Embedder", "int"]),
    ("embedder", HashingEmbedder, ["Embedder", "HashingEmbedder()"]),  # the class
    ("answerer", "extractive", ["None", "answer", "str"]),
    ("answerer", 42, ["answer", "int"]),
    ("create", "no", ["True or False", "'no'"]),
    ("create", 1, ["True or False"]),
]


@pytest.mark.parametrize(("name", "value", "said"), BAD, ids=lambda v: repr(v)[:24])
def test_a_bad_open_argument_is_refused_naming_it_and_creates_nothing(
    tmp_path: Path, name: str, value: Any, said: list[str]
) -> None:
    folder = tmp_path / "data"

    async def attempt() -> None:
        async with memseal.open(folder, store="sqlite", checkpoint_interval=None, **{name: value}):
            pass

    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(attempt())
    message = str(refused.value)
    assert f"`{name}`" in message, message
    for part in said:
        assert part in message, (part, message)
    assert not folder.exists(), "a refused open made the data folder"


@pytest.mark.parametrize(
    "embedder", [None, "default", HashingEmbedder()], ids=["none", "default", "hashing"]
)
def test_the_accepted_embedders_open(tmp_path: Path, embedder: Any) -> None:
    async def opened() -> list[str]:
        async with memseal.open(
            tmp_path / "data", store="sqlite", checkpoint_interval=None, embedder=embedder
        ) as memory:
            await memory.call("memory_store", {"learning": {"text": "ships on tuesdays"}})
            return await memory.engine.embedders()

    embedded = asyncio.run(opened())
    if isinstance(embedder, HashingEmbedder):
        assert embedded == [embedder.id]
