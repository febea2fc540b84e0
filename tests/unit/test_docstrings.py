"""Every public definition of memseal says what it is for.

A definition is public when neither it nor the class it sits in starts with
``_``: module-level functions and classes, and the methods of public classes.
Modules whose names start with ``_`` are internal, but their public names are
often re-exported, so they are checked too. Every module is checked: the four
layer packages, and everything else under ``memseal/`` (its own modules, the
CLI and the service). There is no allowlist: a new public name comes with its
docstring.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# ``memseal/ledger`` and the other layers are links to these folders: ``rglob`` does not
# follow them, so each module is read once, under its own folder.
PACKAGES = ("ledger", "engine", "tools", "replay", "memseal")

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _public(name: str) -> bool:
    return not name.startswith("_")


def _overload(node: Definition) -> bool:
    # @overload stubs and @property setters share the documented definition's name.
    for decorator in node.decorator_list:
        text = ast.unparse(decorator)
        if text in ("overload", "typing.overload") or text.endswith(".setter"):
            return True
    return False


def undocumented(source: str) -> list[str]:
    """The qualified names of the public definitions in ``source`` without a docstring."""
    missing: list[str] = []

    def check(node: Definition, qualname: str) -> None:
        if not _overload(node) and ast.get_docstring(node) is None:
            missing.append(qualname)

    for node in ast.parse(source).body:
        if isinstance(node, Definition) and _public(node.name):
            check(node, node.name)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and _public(
                        member.name
                    ):
                        check(member, f"{node.name}.{member.name}")
    return missing


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_public_definition_has_a_docstring(path: Path) -> None:
    assert undocumented(path.read_text(encoding="utf-8")) == [], "document these"


def test_every_module_of_the_package_is_checked() -> None:
    """What ``import memseal`` can reach (links followed) is checked, each module once."""
    shipped = {
        (Path(folder) / name).resolve()
        for folder, _, names in os.walk(ROOT / "memseal", followlinks=True)
        for name in names
        if name.endswith(".py")
    }
    checked = {p.resolve() for p in _modules()}
    assert sorted(map(str, shipped - checked)) == []
    assert len(checked) == len(_modules()), "a module is checked twice"


def test_the_check_catches_an_undocumented_method() -> None:
    source = (
        "class Shown:\n"
        '    """Documented."""\n'
        "    def bare(self) -> None:\n"
        "        pass\n"
        "    def _private(self) -> None:\n"
        "        pass\n"
        "def _hidden() -> None:\n"
        "    pass\n"
        "async def loose() -> None:\n"
        "    pass\n"
    )
    assert undocumented(source) == ["Shown.bare", "loose"]
