"""Imports go one way: ledger <- engine <- tools <- replay <- memseal."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ORDER = ["ledger", "engine", "tools", "replay"]
WEB = {"fastapi", "uvicorn", "starlette", "httpx"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _forbidden(layer: str) -> set[str]:
    above = ORDER[ORDER.index(layer) + 1 :]
    return {f"memseal.{name}" for name in above} | {"memseal"} | set(above)


@pytest.mark.parametrize("layer", ORDER)
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    forbidden = _forbidden(layer)
    offenders = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for name in _imports(path):
            top = ".".join(name.split(".")[:2]) if name.startswith("memseal.") else name
            if top in forbidden or name.split(".")[0] in (forbidden - {"memseal"}):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
            if name == "memseal":
                offenders.append(f"{path.relative_to(ROOT)} imports the memseal package")
    assert offenders == []


def test_the_ledger_imports_no_web_framework() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "ledger").rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in WEB
    ]
    assert offenders == []


def test_the_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from memseal.engine import x\nimport fastapi\n", encoding="utf-8")
    names = _imports(bad)
    assert "memseal.engine" in names
    assert "fastapi" in names
    assert "memseal.engine" in _forbidden("ledger")
