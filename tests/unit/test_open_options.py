"""OpenOptions: ``memseal.open``'s keywords as one object, and what they reach below."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal._options import OpenOptions
from memseal.engine import HashingEmbedder, Learning
from memseal.ledger.errors import InvalidRequest, StorageError

AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def _at() -> datetime:
    return AT


def test_the_object_carries_every_keyword_of_open_with_its_default() -> None:
    # open's signature is the documented API; the object below it must not drift from it.
    params = inspect.signature(memseal.open).parameters
    fields = {f.name: f.default for f in msgspec.structs.fields(OpenOptions)}
    below = {name: p.default for name, p in params.items() if name != "path"}
    assert below == {name: fields[name] for name in below}
    assert set(fields) - set(below) == {"ranks_as"}  # open_sync's, not open's


def test_the_object_round_trips() -> None:
    options = OpenOptions(store="sqlite", key_name="k", clock=_at, embedder=None, ann=None)
    again = OpenOptions(**msgspec.structs.asdict(options))
    assert again == options
    assert msgspec.structs.replace(options, ann=5) != options
    with pytest.raises(TypeError):
        OpenOptions(nonsense=1)  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        options.ann = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("origin", " "),
        ("checkpoint_every", 0),
        ("clock", "now"),
        ("progress", 3),
        ("ann", -1),
        ("key_name", 7),
        ("currency", "yes"),
        ("zone", "Europe/Paris"),
        ("embedder", "minilm"),
        ("answerer", 3),
    ],
)
def test_a_bad_option_is_refused_naming_it(option: str, value: object) -> None:
    kwargs: dict[str, Any] = {option: value}
    options = OpenOptions(**kwargs)  # built unchecked, as open builds it
    field = option if option != "checkpoint_every" else "every"
    with pytest.raises(InvalidRequest, match=field):
        options.check()


async def test_a_refused_option_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="`ann`"):
        await memseal.open(tmp_path / "data", ann=-1)
    assert not (tmp_path / "data").exists()


async def test_the_options_reach_the_ledger_and_the_engine(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with pytest.raises(StorageError, match="no memseal data folder"):
        await memseal.open(folder, create=False, embedder=None)
    assert not folder.exists()
    async with memseal.open(
        folder,
        store="sqlite",
        key_name="opt-key",
        origin="example.org/opt",
        clock=_at,
        embedder=HashingEmbedder(),
        checkpoint_interval=None,
    ) as memory:
        await memory.engine.store(Learning(text="kept"), namespace="user:a")
        assert memory.vkey.startswith("opt-key+")
        assert (await memory.ledger.checkpoint()).startswith("example.org/opt\n")
        assert (await memory.ledger.store.read(0)).entry().at == "2030-01-02T03:04:05.000000Z"
        assert await memory.engine.embedders() == [HashingEmbedder().id]


def test_open_sync_takes_the_same_options(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    with memseal.open_sync(folder, key_name="sync-key", clock=_at, embedder=None) as memory:
        assert memory.vkey.startswith("sync-key+")
        memory.call("memory_store", {"learning": {"text": "kept"}})
        assert memory.memory.folder == folder
    with pytest.raises(TypeError, match="nonsense"):
        memseal.open_sync(folder, nonsense=1)
