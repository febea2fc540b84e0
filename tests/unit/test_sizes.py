"""The package keeps to the style's sizes: a module at most 600 lines, a function at most 80.

A module that outgrows the limit holds more than one concept; a function that does
is more than one step. The test reads every module under ``memseal/`` (not tests,
benchmarks or the console's JavaScript) and names each offender with its size.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memseal"
# The layers live at the repository root (memseal/<layer> links to them); a walk of
# memseal/ alone does not follow those links, so each layer's folder is walked itself.
FOLDERS = [PACKAGE, *(ROOT / layer for layer in ("ledger", "engine", "tools", "replay"))]
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in folder.rglob("*.py"))


def _too_long_functions(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            # Decorators are part of what a reader takes in; end_lineno is always set here.
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - first + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def test_no_module_is_over_600_lines() -> None:
    over = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for path in _modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert over == []


def test_no_function_is_over_80_lines() -> None:
    over = [name for path in _modules() for name in _too_long_functions(path)]
    assert over == [], "functions over 80 lines"


def test_the_walk_reaches_every_layer() -> None:
    walked = {path.relative_to(ROOT).parts[0] for path in _modules()}
    assert walked == {"memseal", "ledger", "engine", "tools", "replay"}


def test_the_checks_see_an_offender(tmp_path: Path) -> None:
    # The walk must find a long function nested in a class, or the test above proves nothing.
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"class A:\n    def long(self) -> None:\n{body}\n"
    module = tmp_path / "probe.py"
    module.write_text(source, encoding="utf-8")
    assert _too_long_functions(module, tmp_path) == ["probe.py:2 long"]
    module.write_text(source.replace("        x0 = 0\n", ""), encoding="utf-8")
    assert _too_long_functions(module, tmp_path) == []
