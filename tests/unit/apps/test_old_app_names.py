"""The lifecycle answers to its name from before memseal.apps: memseal.tools.lifecycle."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import memseal.apps.lifecycle

MODULES = sorted(
    path.stem
    for path in Path(memseal.apps.lifecycle.__file__).parent.glob("*.py")
    if path.stem != "__init__"
)


def test_the_old_package_is_the_moved_package() -> None:
    # The old names are aliases the import system knows and mypy does not.
    import memseal.tools.lifecycle as old  # type: ignore[import-not-found]

    assert old is memseal.apps.lifecycle
    assert old.AgentMemory is memseal.apps.lifecycle.AgentMemory


@pytest.mark.parametrize("name", MODULES)
def test_each_old_module_name_is_the_moved_module(name: str) -> None:
    moved = importlib.import_module(f"memseal.apps.lifecycle.{name}")
    assert importlib.import_module(f"memseal.tools.lifecycle.{name}") is moved
    assert moved.__spec__ is not None and moved.__spec__.name == moved.__name__


def test_a_name_the_lifecycle_never_had_is_still_missing() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("memseal.tools.lifecycle.no_such_module")
    assert "memseal.tools.lifecycle.no_such_module" not in sys.modules


def test_from_import_of_the_old_names_works() -> None:
    from memseal.tools.lifecycle import Brain  # type: ignore[import-not-found]
    from memseal.tools.lifecycle.pack import holistic_recall  # type: ignore[import-not-found]

    assert Brain.__module__ == "memseal.apps.lifecycle.brain"
    assert holistic_recall.__module__ == "memseal.apps.lifecycle.pack"
