"""Choosing the store: URLs, the environment variable, refusals that leave nothing behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from stores import POSTGRES, drop_schemas, fresh_url

import memseal
from memseal.ledger.errors import InvalidRequest, KeyFileError, StorageError
from memseal.ledger.location import hide_password, parse_database_url
from memseal.memory import DATA_ENV, STORE_ENV, open_audit

needs_postgres = pytest.mark.skipif(
    POSTGRES is None, reason="no PostgreSQL test server (MEMSEAL_TEST_POSTGRES; .ci/postgres.sh)"
)


def test_a_url_splits_into_the_driver_dsn_and_memseal_schema() -> None:
    url = parse_database_url("postgresql://ann:pw@db:5433/mem?sslmode=disable&schema=team_a")
    assert url.dsn == "postgresql://ann:pw@db:5433/mem?sslmode=disable"
    assert url.schema == "team_a"
    assert url.display == "postgresql://ann:***@db:5433/mem?sslmode=disable&schema=team_a"
    assert parse_database_url("postgres://db/mem").schema is None
    hidden = parse_database_url("postgresql://ann@db/mem?password=pw").display
    assert "pw" not in hidden.replace("postgresql", "")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://db/mem?schema=1abc", "plain identifier"),
        ("postgresql://db/mem?schema=a-b", "plain identifier"),
        ("postgresql://db/mem?schema=a&schema=b", "more than once"),
        ("postgresql://db/mem#frag", "fragment"),
        ("mysql://db/mem", "postgresql:// URL"),
    ],
)
def test_malformed_urls_are_refused_naming_the_field(url: str, says: str) -> None:
    with pytest.raises(InvalidRequest, match=says) as caught:
        parse_database_url(url)
    assert str(caught.value).startswith("`store`")


def test_a_password_is_hidden_as_typed_and_as_decoded() -> None:
    url = "postgresql://ann:s3%2Fcret@db/mem"
    said = 'bad token "s3%2Fcret" near "s3/cret"'
    assert hide_password(said, url) == 'bad token "***" near "***"'
    assert hide_password("x", "postgresql://db/mem") == "x"


async def test_an_unreachable_store_is_a_storage_error_that_creates_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "data"
    with pytest.raises(StorageError, match="cannot reach the store") as caught:
        await memseal.open(folder, store="postgresql://ann:hunter2@127.0.0.1:1/mem")
    assert "hunter2" not in str(caught.value)
    assert not folder.exists()


async def test_the_environment_variable_must_be_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "elsewhere"))
    with pytest.raises(InvalidRequest, match=STORE_ENV):
        await memseal.open(tmp_path / "data")
    assert not (tmp_path / "data").exists()


async def test_a_url_as_path_needs_a_folder_for_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_ENV, raising=False)
    with pytest.raises(InvalidRequest, match="local data folder"):
        await memseal.open("postgresql://db/mem")
    with pytest.raises(InvalidRequest, match="once"):
        await memseal.open("postgresql://db/mem", store="postgresql://db/mem")
    with pytest.raises(InvalidRequest, match="`store` must be"):
        await memseal.open("data", store=42)  # type: ignore[arg-type]


@needs_postgres
async def test_the_store_is_chosen_by_argument_environment_or_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, schema = fresh_url("sel")
    try:
        folder = tmp_path / "data"
        async with memseal.open(folder, store=url, embedder=None) as memory:
            assert memory.ledger.store.dialect == "postgresql"
            assert "***" in memory.location or "@" not in memory.location
            await memory.call("memory_store", {"learning": {"text": "kept in PostgreSQL"}})
            size = await memory.ledger.size()
        assert not (folder / "ledger.db").exists()  # the folder holds the keys only
        monkeypatch.setenv(STORE_ENV, url)
        async with memseal.open(folder, embedder=None) as memory:
            assert await memory.ledger.size() == size
        monkeypatch.delenv(STORE_ENV)
        monkeypatch.setenv(DATA_ENV, str(folder))
        async with memseal.open(url, embedder=None) as memory:
            assert await memory.ledger.size() == size
        async with open_audit(url) as ledger:  # an audit needs no keys, only the URL
            summary = await ledger.verify(memory.trust_root)
            assert summary.size == size
    finally:
        await drop_schemas([schema])


@needs_postgres
async def test_another_ledgers_keys_or_none_are_refused(tmp_path: Path) -> None:
    url, schema = fresh_url("sel")
    try:
        async with memseal.open(tmp_path / "a", store=url, embedder=None) as memory:
            await memory.engine.store(memseal.engine.Learning(text="first"), namespace="user:ann")
        # A folder without keys: the ledger exists, so no new key is made, and no folder.
        with pytest.raises(KeyFileError, match="has a ledger but"):
            await memseal.open(tmp_path / "b", store=url, embedder=None)
        assert not (tmp_path / "b").exists()
        # A folder with another ledger's keys.
        async with memseal.open(tmp_path / "c", embedder=None):
            pass
        shutil.rmtree(tmp_path / "c" / "ledger.db", ignore_errors=True)
        with pytest.raises(KeyFileError, match="not this ledger's"):
            await memseal.open(tmp_path / "c", store=url, embedder=None)
    finally:
        await drop_schemas([schema])


@needs_postgres
async def test_a_folder_whose_ledger_is_its_file_does_not_start_a_second_one(
    tmp_path: Path,
) -> None:
    url, schema = fresh_url("sel")
    try:
        folder = tmp_path / "data"
        async with memseal.open(folder, embedder=None) as memory:
            await memory.engine.store(memseal.engine.Learning(text="here"), namespace="user:a")
        # The same key would sign a new, empty ledger there: a fork of this one.
        with pytest.raises(StorageError, match="memseal migrate"):
            await memseal.open(folder, store=url, embedder=None)
        assert (folder / "ledger.location").read_text().startswith("sqlite\n")
        async with memseal.open(folder, embedder=None) as memory:  # still fine at home
            assert await memory.ledger.size() > 0
    finally:
        await drop_schemas([schema])


@needs_postgres
async def test_a_folder_never_signs_a_second_ledger_on_another_store(tmp_path: Path) -> None:
    a_url, a_schema = fresh_url("sel")
    b_url, b_schema = fresh_url("sel")
    try:
        folder = tmp_path / "data"
        async with memseal.open(folder, store=a_url, embedder=None) as memory:
            await memory.engine.store(memseal.engine.Learning(text="in A"), namespace="user:a")
        marker = (folder / "ledger.location").read_text()
        # Store B is empty: the folder's key would start a second ledger there.
        with pytest.raises(StorageError, match="would be signed by the same key"):
            await memseal.open(folder, store=b_url, embedder=None)
        # Store B holds another ledger: refused, and the folder still points at A.
        async with memseal.open(tmp_path / "other", store=b_url, embedder=None) as other:
            await other.engine.store(memseal.engine.Learning(text="in B"), namespace="user:b")
        with pytest.raises((StorageError, KeyFileError), match=r"another ledger|not this"):
            await memseal.open(folder, store=b_url, embedder=None)
        assert (folder / "ledger.location").read_text() == marker
        async with memseal.open(folder, store=a_url, embedder=None) as memory:
            assert await memory.ledger.size() > 0
    finally:
        await drop_schemas([a_schema, b_schema])


@needs_postgres
async def test_a_refused_open_leaves_the_folder_at_home(tmp_path: Path) -> None:
    url, schema = fresh_url("sel")
    try:
        async with memseal.open(tmp_path / "other", store=url, embedder=None) as other:
            await other.engine.store(memseal.engine.Learning(text="theirs"), namespace="user:b")
        folder = tmp_path / "data"
        async with memseal.open(folder, embedder=None) as memory:
            await memory.engine.store(memseal.engine.Learning(text="ours"), namespace="user:a")
        with pytest.raises(StorageError, match="another ledger"):
            await memseal.open(folder, store=url, embedder=None)
        assert (folder / "ledger.location").read_text().startswith("sqlite\n")
        async with memseal.open(folder, embedder=None) as memory:
            assert await memory.ledger.size() > 0
    finally:
        await drop_schemas([schema])


@pytest.mark.parametrize("password", ["pa#ss", "s3?cret", "s3/cret"])
def test_a_password_the_url_would_split_is_refused_without_showing_it(password: str) -> None:
    url = f"postgresql://memseal:{password}@127.0.0.1:5432/mem?schema=a"
    with pytest.raises(InvalidRequest, match="percent-encode") as caught:
        parse_database_url(url)
    assert password not in str(caught.value)
    assert hide_password(f"said {password}", url) == "said ***"
    # Encoded, it is fine, and still hidden.
    encoded = url.replace(password, password.replace("#", "%23").replace("?", "%3F"))
    assert password not in parse_database_url(encoded.replace("/cret", "%2Fcret")).display
