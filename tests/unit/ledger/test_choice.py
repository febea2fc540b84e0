"""choose_store: each source of a store, their precedence, and each refusal naming its field."""

from __future__ import annotations

from pathlib import Path

import pytest

from memseal.ledger.choice import DATA_ENV, FOLDER_STORE, STORE_ENV, choose_store, given_store
from memseal.ledger.errors import InvalidRequest

A = "postgresql://ann:pw@db/a?schema=team_a"
B = "postgresql://bob@db/b"


def test_nothing_named_is_the_folders_own_file() -> None:
    choice = choose_store("data", env={})
    assert (choice.kind, choice.folder, choice.url, choice.source, choice.text) == (
        "sqlite",
        Path("data"),
        None,
        None,
        None,
    )
    assert choice.display == str(Path("data") / "ledger.db")


def test_the_argument_comes_before_the_environment() -> None:
    choice = choose_store("data", A, env={STORE_ENV: B})
    assert (choice.kind, choice.source, choice.text) == ("postgresql", "store", A)
    assert choice.url is not None and choice.url.schema == "team_a"
    assert choice.display == "postgresql://ann:***@db/a?schema=team_a"
    assert choice.location.folder == Path("data") and choice.location.url == choice.url


def test_the_environment_names_the_store_when_the_argument_does_not() -> None:
    choice = choose_store(Path("data"), env={STORE_ENV: B})
    assert (choice.kind, choice.source, choice.text) == ("postgresql", STORE_ENV, B)
    # An empty variable is unset, as a shell's `MEMSEAL_STORE= memseal ...` means.
    assert choose_store("data", env={STORE_ENV: ""}).kind == "sqlite"


def test_the_folder_word_beats_the_environment_but_not_on_the_command_line() -> None:
    choice = choose_store("data", FOLDER_STORE, env={STORE_ENV: B})
    assert (choice.kind, choice.source) == ("sqlite", "store")
    with pytest.raises(InvalidRequest, match=r"^`--store` must be a postgresql:// URL$"):
        choose_store("data", FOLDER_STORE, env={}, field="--store", folder_word=None)


def test_a_url_as_path_takes_its_keys_from_the_data_variable() -> None:
    choice = choose_store(A, env={STORE_ENV: B, DATA_ENV: "keys"})
    assert (choice.folder, choice.source, choice.text) == (Path("keys"), "path", A)
    assert choice.url is not None and choice.url.display.startswith("postgresql://ann:***@")


def test_an_audit_of_a_url_needs_no_folder() -> None:
    choice = choose_store(A, env={}, keys=False)
    assert (choice.folder, choice.source, choice.kind) == (Path("."), "path", "postgresql")
    # A folder is audited on the store the environment names, as it is opened.
    assert choose_store("data", env={STORE_ENV: B}, keys=False).text == B


@pytest.mark.parametrize(
    ("path", "store", "env", "field", "says"),
    [
        ("data", None, {STORE_ENV: "/elsewhere"}, "store", f"`{STORE_ENV}` must be a postgresql"),
        ("data", None, {STORE_ENV: "postgresql://db/m#x"}, "store", f"`{STORE_ENV}` postgresql"),
        ("data", "mysql://db/m", {}, "store", "`store` must be a postgresql:// URL"),
        ("data", "not-a-url", {STORE_ENV: B}, "--store", "`--store` must be a postgresql"),
        ("data", 42, {}, "store", "`store` must be a postgresql:// URL, not int"),
        (A, None, {}, "store", "`path` is a PostgreSQL URL; .* set MEMSEAL_DATA"),
        (A, B, {DATA_ENV: "keys"}, "store", "give the PostgreSQL URL once"),
        ("postgresql://db/m?schema=1a", None, {DATA_ENV: "k"}, "store", "`path` .*identifier"),
    ],
)
def test_each_refusal_names_what_gave_the_bad_value(
    path: str, store: object, env: dict[str, str], field: str, says: str
) -> None:
    with pytest.raises(InvalidRequest, match=says):
        choose_store(path, store, env=env, field=field, folder_word=None)


def test_an_audit_refuses_a_url_given_twice() -> None:
    with pytest.raises(InvalidRequest, match="once"):
        choose_store(A, B, env={}, keys=False)


def test_the_given_store_is_read_unchecked_for_hiding_its_password() -> None:
    assert given_store(None, {STORE_ENV: "postgresql://a:pw@h/x#"}) == (
        "postgresql://a:pw@h/x#",
        STORE_ENV,
    )
    assert given_store("x", {STORE_ENV: B}, field="--store") == ("x", "--store")
    assert given_store(None, {}) == (None, None)
