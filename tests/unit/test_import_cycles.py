"""No import circle among memseal's modules, however it is hidden.

Every ``import`` and ``from ... import`` of every module is read: at module
level and inside functions and methods (an import moved into a function still
closes a circle; it only postpones the failure to the first call), absolute or
relative, and ``importlib.import_module`` / ``__import__`` with a constant
name. ``from pkg import name`` counts as importing ``pkg.name`` when that is a
module, else ``pkg``. Imports under ``if TYPE_CHECKING:`` are left out: they
never run, they only name a type for mypy. Importing ``a.b.c`` also runs
``a/__init__`` and ``a/b/__init__``; those implied edges are not counted, so a
package's face may import its own modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("ledger", "engine", "tools", "replay")
_DYNAMIC = {"import_module", "__import__"}


def _modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Every memseal module: its dotted name -> (file, whether it is a package's __init__)."""
    found: dict[str, tuple[Path, bool]] = {}
    for top in ("memseal", *LAYERS):
        base = root / top
        if not base.is_dir() or base.is_symlink():
            continue
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if top == "memseal" and parts[0] in LAYERS:
                continue  # memseal/<layer> is a link to the layer folder, read once from there
            name = ["memseal", *([] if top == "memseal" else [top]), *parts]
            is_package = name[-1] == "__init__"
            found[".".join(name[:-1] if is_package else name)] = (path, is_package)
    return found


def _type_only(tree: ast.AST) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:``."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            named = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
            if named == "TYPE_CHECKING":
                hidden.update(id(inner) for part in node.body for inner in ast.walk(part))
    return hidden


def _targets(
    node: ast.AST, name: str, is_package: bool, known: Mapping[str, object]
) -> Iterator[str]:
    """The modules one import node names (resolved against the importing module)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        package = name.split(".") if is_package else name.split(".")[:-1]
        if node.level == 0:
            base = node.module or ""
        else:
            parent = package[: len(package) - (node.level - 1)]
            base = ".".join([*parent, *([node.module] if node.module else [])])
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            yield sub if sub in known else base
    elif isinstance(node, ast.Call) and node.args:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if called in _DYNAMIC and isinstance(first, ast.Constant) and isinstance(first.value, str):
            yield first.value


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each memseal module -> the memseal modules it imports anywhere in its body."""
    known = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        hidden = _type_only(tree)
        graph[name] = {
            target
            for node in ast.walk(tree)
            if id(node) not in hidden
            for target in _targets(node, name, is_package, known)
            if target in known and target != name
        }
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan), each
    as the path that closes it: ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a long chain of modules cannot hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return [_circle(graph, group) for group in groups]


def _circle(graph: Mapping[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    first = min(group)
    paths = {first: [first]}
    frontier = [first]
    while frontier:
        nxt = []
        for node in frontier:
            for target in sorted(graph[node] & group):
                if target == first:
                    return [*paths[node], first]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    nxt.append(target)
        frontier = nxt
    raise AssertionError(f"no circle through {sorted(group)}")  # Tarjan's groups have one


def test_no_import_circle_among_memseal_modules() -> None:
    found = [" -> ".join(circle) for circle in cycles(import_graph())]
    assert found == []


def test_the_graph_holds_every_layer_and_the_top() -> None:
    # A checker that read no files would pass: the graph must see every layer's modules
    # and the edges between them.
    graph = import_graph()
    for name in ("memseal.memory", "memseal.ledger.log", "memseal.replay.runs.run"):
        assert name in graph
    assert "memseal._memory" in graph["memseal.memory"]
    assert "memseal.replay.runs.run" in graph["memseal._memory"]


def _tree(tmp_path: Path, files: Mapping[str, str]) -> dict[str, set[str]]:
    for relative, source in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return import_graph(tmp_path)


def test_the_checker_finds_a_circle_hidden_inside_a_function(tmp_path: Path) -> None:
    graph = _tree(
        tmp_path,
        {
            "memseal/__init__.py": "",
            "replay/__init__.py": "",
            "replay/a.py": "from .b import x\n",
            "replay/b.py": "def f():\n    from memseal.replay.c import y\n",
            "replay/c.py": "import importlib\nimportlib.import_module('memseal.replay.a')\n",
        },
    )
    assert cycles(graph) == [
        ["memseal.replay.a", "memseal.replay.b", "memseal.replay.c", "memseal.replay.a"]
    ]


def test_the_checker_resolves_a_from_import_of_a_module(tmp_path: Path) -> None:
    graph = _tree(
        tmp_path,
        {
            "memseal/__init__.py": "",
            "memseal/memory.py": "from memseal.replay import runs\n",
            "replay/__init__.py": "from . import runs\n",
            "replay/runs.py": "from .. import memory\n",
        },
    )
    assert cycles(graph) == [["memseal.memory", "memseal.replay.runs", "memseal.memory"]]


def test_the_checker_leaves_type_only_imports_and_one_way_chains(tmp_path: Path) -> None:
    graph = _tree(
        tmp_path,
        {
            "memseal/__init__.py": "from .memory import open\n",
            "memseal/memory.py": "from memseal.replay.run import Run\n",
            "replay/__init__.py": "from .run import Run\n",
            "replay/run.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from memseal.memory import Memory\n"
            ),
        },
    )
    assert graph["memseal.replay.run"] == set()
    assert cycles(graph) == []
