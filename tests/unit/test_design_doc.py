"""docs/design.md, the map of the code, names every module (issue 40).

A module missing from the map is a room a newcomer cannot find. A module counts as
named when one line of the page holds its file name in code quotes and, on the same
line, its folder's path (the table's rows say ``engine/_fetch.py`` whole, or
``memseal/apps/lifecycle/layout.py``, ``pack.py`` with the folder once).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
# memseal/<layer> are links to the root folders, which pathlib's walk does not follow.
FOLDERS = [ROOT / name for name in ("memseal", "ledger", "engine", "tools", "replay")]


def _modules() -> list[Path]:
    found = (path for folder in FOLDERS for path in folder.rglob("*.py"))
    # A package's __init__ is named by its folder, a __main__ by its package.s row.
    return sorted(p for p in found if p.name not in ("__init__.py", "__main__.py"))


def _unnamed(modules: list[Path], page: str) -> list[str]:
    lines = page.splitlines()
    missing = []
    for path in modules:
        folder = path.parent.relative_to(ROOT).as_posix() + "/"
        name = path.name
        named = any(
            folder in line and (f"`{name}`" in line or f"{folder}{name}`" in line) for line in lines
        )
        if not named:
            missing.append(path.relative_to(ROOT).as_posix())
    return missing


def test_every_module_is_on_the_map() -> None:
    assert _unnamed(_modules(), DESIGN.read_text(encoding="utf-8")) == []


def test_the_walk_finds_the_layers() -> None:
    top = {path.relative_to(ROOT).parts[0] for path in _modules()}
    assert top == {"memseal", "ledger", "engine", "tools", "replay"}


def test_a_module_named_without_its_folder_is_missing(tmp_path: Path) -> None:
    # The check must see an offender, or the test above proves nothing.
    module = ROOT / "engine" / "_fetch.py"
    assert _unnamed([module], "| a fetch | `engine/_fetch.py` |") == []
    assert _unnamed([module], "| a fetch | `engine/_ranking.py`, `_fetch.py` |") == []
    assert _unnamed([module], "| a fetch | `_fetch.py` |") == ["engine/_fetch.py"]
    assert _unnamed([module], "| a fetch | `tools/_fetch.py` |") == ["engine/_fetch.py"]
