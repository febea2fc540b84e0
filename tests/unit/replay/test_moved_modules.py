"""The replay layer's public modules answer to their names from before the floors."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import memseal.replay
from memseal.replay import _LIFTED, _MOVED

_NEW = {"evidence.source"}


@pytest.mark.parametrize("old", sorted(set(_MOVED) - {"regress"}))
def test_an_old_module_name_is_the_moved_module(old: str) -> None:
    moved = importlib.import_module(f"memseal.replay.{_MOVED[old]}")
    assert importlib.import_module(f"memseal.replay.{old}") is moved


def test_the_old_names_are_every_public_module_on_a_floor() -> None:
    root = Path(memseal.replay.__file__).parent
    public = {
        f"{floor}.{path.stem}"
        for floor in ("runs", "evidence", "regress")
        for path in (root / floor).glob("*.py")
        if not path.stem.startswith("_")
    }
    # Modules made on a floor since the split had no name before it.
    assert public - _NEW == set(_MOVED.values())


def test_regress_is_the_floor_and_keeps_its_function() -> None:
    from memseal.replay.regress import RegressReport, regress

    assert callable(regress) and RegressReport.__module__.startswith("memseal.replay.regress")
    assert memseal.replay.regress is regress


@pytest.mark.parametrize("old", sorted(_LIFTED))
def test_a_module_lifted_out_of_replay_answers_to_its_old_name(old: str) -> None:
    moved = importlib.import_module(_LIFTED[old])
    aliased = importlib.import_module(f"memseal.replay.{old}")
    assert aliased is moved
    # The alias leaves the module its own spec (a reload or a tool reading it sees the file).
    assert aliased.__spec__ is not None and aliased.__spec__.name == _LIFTED[old]


def test_the_lifted_as_of_keeps_its_public_names() -> None:
    from memseal.apps.as_of import AsOfView
    from memseal.replay.evidence.as_of import AsOfView as old  # type: ignore[import-not-found]

    assert old is AsOfView
