"""Key files: made once, mode 0600, never silently replaced, clear errors when damaged."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import memseal
from memseal.ledger.errors import KeyFileError
from memseal.ledger.keys import create_keys, load_keys
from memseal.ledger.note import parse_vkey


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_are_made_private_and_load_back(tmp_path: Path) -> None:
    keys = create_keys(tmp_path, "memseal-test")
    assert _mode(tmp_path / "keys") == 0o700
    assert _mode(tmp_path / "keys" / "ledger.skey") == 0o600
    assert _mode(tmp_path / "keys" / "instance.secret") == 0o600
    loaded = load_keys(tmp_path)
    assert loaded.vkey == keys.vkey
    assert loaded.secret == keys.secret
    assert parse_vkey(keys.vkey).name == "memseal-test"
    assert (tmp_path / "keys" / "ledger.vkey").read_text().strip() == keys.vkey


def test_the_private_half_never_shows_in_repr(tmp_path: Path) -> None:
    keys = create_keys(tmp_path, "memseal-test")
    skey = (tmp_path / "keys" / "ledger.skey").read_text().strip()
    secret_hex = keys.secret.hex()
    for text in (repr(keys), str(keys), repr(keys.signer), str(keys.signer)):
        assert skey.split("+", 4)[-1] not in text  # base64 may itself hold a "+"
        assert secret_hex not in text


def test_existing_keys_are_never_overwritten(tmp_path: Path) -> None:
    create_keys(tmp_path, "memseal-test")
    with pytest.raises(KeyFileError, match="never overwrites"):
        create_keys(tmp_path, "memseal-other")


@pytest.mark.parametrize("name", ["ledger.skey", "ledger.vkey", "instance.secret"])
def test_a_missing_key_file_is_an_error_not_a_new_key(tmp_path: Path, name: str) -> None:
    create_keys(tmp_path, "memseal-test")
    (tmp_path / "keys" / name).unlink()
    with pytest.raises(KeyFileError, match="missing"):
        load_keys(tmp_path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("ledger.skey", b"PRIVATE+KEY+nonsense", "malformed"),
        ("ledger.skey", b"\xff\xfe", "malformed"),
        ("ledger.vkey", b"not a vkey", "malformed"),
        ("instance.secret", b"short", "32"),
    ],
)
def test_a_malformed_key_file_is_a_clear_error(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    create_keys(tmp_path, "memseal-test")
    (tmp_path / "keys" / name).write_bytes(content)
    with pytest.raises(KeyFileError, match=message):
        load_keys(tmp_path)


def test_a_vkey_of_another_key_is_refused(tmp_path: Path) -> None:
    create_keys(tmp_path / "a", "memseal-a")
    other = create_keys(tmp_path / "b", "memseal-b")
    (tmp_path / "a" / "keys" / "ledger.vkey").write_text(other.vkey + "\n")
    with pytest.raises(KeyFileError, match="does not match"):
        load_keys(tmp_path / "a")


def test_an_unreadable_key_file_is_a_clear_error(tmp_path: Path) -> None:
    create_keys(tmp_path, "memseal-test")
    skey = tmp_path / "keys" / "ledger.skey"
    skey.unlink()
    skey.mkdir()  # a folder where the file should be: unreadable as a file, even for root
    with pytest.raises(KeyFileError, match="unreadable"):
        load_keys(tmp_path)


async def test_open_refuses_a_ledger_whose_keys_are_gone(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    async with memseal.open(folder, embedder=None) as memory:
        await memory.ledger.append("note", {"a": 1})
    for path in (folder / "keys").iterdir():
        path.unlink()
    with pytest.raises(KeyFileError, match="no keys"):
        async with memseal.open(folder, embedder=None):
            pass
    assert list((folder / "keys").iterdir()) == []
