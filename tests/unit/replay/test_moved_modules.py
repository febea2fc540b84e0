"""The replay layer's public modules answer to their names from before the floors."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import memseal.replay
from memseal.replay import _MOVED


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
    assert public == set(_MOVED.values())


def test_regress_is_the_floor_and_keeps_its_function() -> None:
    from memseal.replay.regress import RegressReport, regress

    assert callable(regress) and RegressReport.__module__.startswith("memseal.replay.regress")
    assert memseal.replay.regress is regress
