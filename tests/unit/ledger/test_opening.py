"""open_log: a ledger's store opened from its location, with its identity checked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memseal.ledger.entry import Draft
from memseal.ledger.errors import InvalidRequest, KeyFileError
from memseal.ledger.folder import DataFolder
from memseal.ledger.keys import load_keys
from memseal.ledger.opening import (
    LogLocation,
    choose_location,
    genesis,
    log_store,
    open_log,
    read_location,
    record_location,
)
from memseal.ledger.store import WriteTxn

ROOT = Path(__file__).resolve().parents[3]


def _where(folder: Path, url: str | None) -> LogLocation:
    return choose_location(folder, url)


async def _append_one(where: LogLocation) -> None:
    opened = await open_log(where, key_name="memseal-test")
    try:

        def command(txn: WriteTxn) -> None:
            txn.append(Draft(kind="test_entry", body=b"{}"))

        await opened.store.run(command)
        await record_location(where, opened.store)
    finally:
        await opened.store.close()


async def test_a_new_ledger_gets_keys_its_origin_and_its_identity(
    tmp_path: Path, store_url: str | None
) -> None:
    where = _where(tmp_path / "data", store_url)
    assert genesis(where) is None
    opened = await open_log(where, key_name="memseal-test")
    await opened.store.close()
    assert opened.origin == "memseal-test"
    assert opened.history == [load_keys(where.folder).verifier]
    await _append_one(where)
    first = genesis(where)
    assert first is not None
    said = read_location(where.folder)
    assert said is not None and said.genesis == first.hex()


async def test_a_later_open_cannot_change_the_origin(tmp_path: Path, store_url: str | None) -> None:
    where = _where(tmp_path / "data", store_url)
    opened = await open_log(where, key_name="memseal-test", origin="first.example/log")
    await opened.store.close()
    with pytest.raises(InvalidRequest, match=r"this ledger.s origin is .first\.example/log."):
        await open_log(where, origin="second.example/log")


async def test_a_ledger_without_its_keys_gets_no_new_key(
    tmp_path: Path, store_url: str | None
) -> None:
    where = _where(tmp_path / "data", store_url)
    await _append_one(where)
    for path in DataFolder(root=where.folder).keys.iterdir():
        path.unlink()
    with pytest.raises(KeyFileError, match="never makes a new key for an existing ledger"):
        await open_log(where)


async def test_a_read_only_store_opens_where_the_ledger_lives(
    tmp_path: Path, store_url: str | None
) -> None:
    where = _where(tmp_path / "data", store_url)
    await _append_one(where)
    store = log_store(where)
    await store.open()
    try:
        assert (await store.head()).size == 1
    finally:
        await store.close()


def test_a_url_as_path_needs_the_data_folder() -> None:
    with pytest.raises(InvalidRequest, match="stays in a local data folder"):
        choose_location("postgresql://u@h/db")
    where = choose_location("postgresql://u:pw@h/db?schema=s", data="keys-here")
    assert where.folder == Path("keys-here")
    assert where.url is not None and where.display == "postgresql://u:***@h/db?schema=s"


def _reads_environment(source: str) -> list[int]:
    """The lines of ``source`` that read the process environment."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb")
    ]


def test_the_check_catches_a_layer_reading_the_environment() -> None:
    assert _reads_environment('import os\nstore = os.environ.get("MEMSEAL_STORE")\n') == [2]


@pytest.mark.parametrize("package", ["ledger", "engine", "tools", "replay"])
def test_no_lower_layer_reads_the_environment(package: str) -> None:
    # The store and data folder are chosen at the edge (memseal.open, the CLI, the service)
    # and passed down; a layer that read MEMSEAL_STORE would pick a store behind its caller.
    for path in sorted((ROOT / package).glob("*.py")):
        lines = _reads_environment(path.read_text(encoding="utf-8"))
        assert not lines, f"{path.relative_to(ROOT)} reads the environment at lines {lines}"
