"""Imports go one way: ledger <- engine <- tools <- replay <- memseal.apps <- memseal.

``memseal.apps`` (the lifecycle, the as-of views) is the floor of applications
above replay: it may import every layer below and itself, never the top
(``memseal.memory``, the service, the CLI, the integrations, the ``memseal``
package face), and nothing below imports it.

Inside replay, three floors go one way too: ``replay.runs`` <- ``replay.evidence``
<- ``replay.regress``. A floor may import the layers below replay, itself and
the floors below it; never a floor above, nor ``memseal.replay`` itself (the
package's face imports every floor). Every replay module lives on a floor.

Every import in a layer's files is read: module level or inside a function,
absolute or relative (resolved against the file's own package), and the
``importlib.import_module`` / ``__import__`` calls that name a module as a
constant. A layer may import only ``memseal.<itself>`` and the layers below
it; anything else under ``memseal`` (``memseal.memory``, ``memseal.cli``,
``memseal.errors``, the ``memseal`` package itself...) is the top layer, and
a bare ``ledger`` / ``engine`` / ``tools`` / ``replay`` is never the import
name (the design's one namespace is ``memseal``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ORDER = ["ledger", "engine", "tools", "replay", "apps"]
FLOORS = ["runs", "evidence", "regress"]  # inside replay/, the lowest first
WEB = {"fastapi", "uvicorn", "starlette", "httpx"}
_DYNAMIC = {"import_module", "__import__"}


def _folder(layer: str, root: Path = ROOT) -> Path:
    """Where ``layer``'s files are: a folder at the root, or memseal/apps for the apps."""
    return root / "memseal" / "apps" if layer == "apps" else root / layer


def _package_of(path: Path, layer: str, root: Path = ROOT) -> list[str]:
    """The dotted package a file of ``layer`` lives in, as the import system sees it."""
    parts = ["memseal", layer, *path.relative_to(_folder(layer, root)).parts]
    parts[-1] = parts[-1].removesuffix(".py")
    # A package's __init__ is the package; any other module's package is its parent.
    return parts[:-1]


def _resolve(node: ast.ImportFrom, package: list[str]) -> list[str]:
    """The absolute module names a ``from ... import ...`` reaches."""
    if node.level == 0:
        base = node.module or ""
    else:
        if node.level - 1 > len(package):
            return ["<relative import above the top package>"]
        parent = package[: len(package) - (node.level - 1)]
        base = ".".join([*parent, *([node.module] if node.module else [])])
    # ``from pkg import name`` may import the submodule pkg.name: count both.
    return [base, *(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")]


def _imports(path: Path, package: list[str] | None = None) -> set[str]:
    """Every module a file imports, anywhere in it (``package``: to resolve relative ones)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and package is None:
                names.add("<unresolved relative import>")
            else:
                names.update(_resolve(node, package or []))
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in _DYNAMIC and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
    return names


def _allowed(layer: str) -> set[str]:
    return {f"memseal.{name}" for name in ORDER[: ORDER.index(layer) + 1]}


def _offence(name: str, layer: str) -> str | None:
    """Why ``name`` may not be imported from ``layer`` (None: it may)."""
    top = name.split(".")[0]
    if name.startswith("<"):
        return name[1:-1]
    if top in ORDER:
        return "a bare layer name (the import name is memseal.<layer>)"
    if top != "memseal":
        return None
    if any(name == ok or name.startswith(ok + ".") for ok in _allowed(layer)):
        return None
    return "above this layer"


def _offenders(layer: str, root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(_folder(layer, root).rglob("*.py")):
        for name in sorted(_imports(path, _package_of(path, layer, root))):
            why = _offence(name, layer)
            if why is not None:
                found.append(f"{path.relative_to(root)} imports {name}: {why}")
    return found


@pytest.mark.parametrize("layer", ORDER)
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    assert _offenders(layer) == []


def _floor_offence(name: str, floor: str) -> str | None:
    """Why a module on ``floor`` may not import ``name`` (None: it may, as far as floors go;
    the layer check above judges everything outside memseal.replay)."""
    if name != "memseal.replay" and not name.startswith("memseal.replay."):
        return None
    allowed = [f"memseal.replay.{f}" for f in FLOORS[: FLOORS.index(floor) + 1]]
    if any(name == ok or name.startswith(ok + ".") for ok in allowed):
        return None
    return "above this floor"


def _floor_offenders(floor: str, root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / "replay" / floor).rglob("*.py")):
        for name in sorted(_imports(path, _package_of(path, "replay", root))):
            why = _floor_offence(name, floor)
            if why is not None:
                found.append(f"{path.relative_to(root)} imports {name}: {why}")
    return found


@pytest.mark.parametrize("floor", FLOORS)
def test_a_replay_floor_imports_no_floor_above_it(floor: str) -> None:
    assert (ROOT / "replay" / floor / "__init__.py").is_file()
    assert _floor_offenders(floor) == []


def test_every_replay_module_lives_on_a_floor() -> None:
    # A module dropped beside the floors would belong to none, and no check would hold it.
    loose = sorted(p.name for p in (ROOT / "replay").glob("*.py") if p.name != "__init__.py")
    folders = sorted(
        p.name for p in (ROOT / "replay").iterdir() if p.is_dir() and p.name != "__pycache__"
    )
    assert loose == []
    assert folders == sorted(FLOORS)


def test_the_ledger_imports_no_web_framework() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "ledger").rglob("*.py"))
        for name in _imports(path, _package_of(path, "ledger"))
        if name.split(".")[0] in WEB
    ]
    assert offenders == []


def _planted(tmp_path: Path, layer: str, source: str, name: str = "planted.py") -> list[str]:
    """Run the checker on a tree whose ``layer`` holds one file, ``name``, of ``source``."""
    root = tmp_path / f"tree{len(list(tmp_path.iterdir()))}"
    path = _folder(layer, root) / name
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    return _offenders(layer, root)


def test_the_checker_catches_the_top_layer_imported_inside_a_function(tmp_path: Path) -> None:
    source = "def update():\n    from memseal.memory import open\n    return open\n"
    for layer in ORDER:
        where = _folder(layer, Path()).as_posix()
        assert _planted(tmp_path, layer, source) == [
            f"{where}/planted.py imports memseal.memory: above this layer",
            f"{where}/planted.py imports memseal.memory.open: above this layer",
        ]


def test_the_checker_resolves_a_relative_import_that_climbs_out_of_the_layer(
    tmp_path: Path,
) -> None:
    # replay/planted.py is memseal.replay.planted: ".." is the memseal package itself.
    found = _planted(tmp_path, "replay", "async def f():\n    from ..memory import open\n")
    assert "replay/planted.py imports memseal.memory: above this layer" in found
    found = _planted(tmp_path, "engine", "from .. import cli\n", name="sub/deep.py")
    assert found == []  # engine/sub/deep.py: ".." is memseal.engine
    found = _planted(tmp_path, "engine", "from ... import cli\n", name="sub/deep.py")
    assert "engine/sub/deep.py imports memseal.cli: above this layer" in found
    assert _planted(tmp_path, "ledger", "from ....... import x\n") != []


def test_the_checker_catches_every_kind_of_upward_import(tmp_path: Path) -> None:
    cases = {
        "import memseal\n": "memseal",
        "import memseal.errors\n": "memseal.errors",
        "from memseal import open\n": "memseal",
        "from memseal.service.app import create_app\n": "memseal.service.app",
        "from memseal.replay import Run\n": "memseal.replay",
        "import tools\n": "tools",
        "from replay.run import Run\n": "replay.run",
        "import importlib\nimportlib.import_module('memseal.cli')\n": "memseal.cli",
        "class C:\n    def m(self):\n        import memseal.tools.args\n": "memseal.tools.args",
    }
    for source, name in cases.items():
        found = _planted(tmp_path, "engine", source)
        assert any(f" imports {name}:" in line for line in found), (source, found)


def test_the_checker_lets_a_layer_import_itself_and_the_layers_below(tmp_path: Path) -> None:
    source = (
        "from memseal.ledger.entry import Entry\nfrom memseal.engine import Engine\n"
        "from memseal.tools.args import MAX_BATCH\nfrom . import calls\nfrom .run import Run\n"
        "import msgspec\n"
    )
    assert _planted(tmp_path, "replay", source) == []
    assert _planted(tmp_path, "tools", "from memseal.replay import Run\n") != []


def test_the_apps_import_every_layer_below_and_themselves(tmp_path: Path) -> None:
    assert (ROOT / "memseal" / "apps" / "__init__.py").is_file()
    source = (
        "from memseal.ledger.entry import Entry\nfrom memseal.engine import Engine\n"
        "from memseal.tools import ToolScope\nfrom memseal.replay.runs import Run\n"
        "from memseal.replay.evidence._temp_log import parse_time\n"
        "from memseal.replay.regress import regress\nfrom memseal.apps.as_of import AsOfView\n"
        "from .as_of import ViewCache\nfrom . import lifecycle\n"
    )
    assert _planted(tmp_path, "apps", source) == []
    assert _planted(tmp_path, "apps", "from ..as_of import AsOfView\n", "lifecycle/x.py") == []


def test_the_checker_catches_the_apps_reaching_the_top(tmp_path: Path) -> None:
    cases = {
        "from memseal.memory import Memory\n": "memseal.memory",
        "from memseal._memory import Memory\n": "memseal._memory",
        "import memseal\n": "memseal",
        "from memseal import open\n": "memseal",
        "from memseal.service.app import create_app\n": "memseal.service.app",
        "def f():\n    from memseal.cli import main\n": "memseal.cli",
        "from memseal.integrations import langchain\n": "memseal.integrations",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memseal import Memory\n": (
            "memseal"
        ),
        "from ...memory import Memory\n": "memseal.memory",
    }
    for source, name in cases.items():
        found = _planted(tmp_path, "apps", source, "lifecycle/planted.py")
        assert any(f" imports {name}:" in line for line in found), (source, found)


def test_the_checker_catches_a_lower_layer_importing_the_apps(tmp_path: Path) -> None:
    cases = {
        "tools": "from memseal.apps.lifecycle.pack import ContextPack\n",
        "replay": "def f():\n    from memseal.apps.as_of import AsOfView\n",
        "engine": "import memseal.apps\n",
        "ledger": "import importlib\nimportlib.import_module('memseal.apps.lifecycle')\n",
    }
    for layer, source in cases.items():
        found = _planted(tmp_path, layer, source)
        assert any(" imports memseal.apps" in line for line in found), (layer, found)


def _planted_floor(tmp_path: Path, floor: str, source: str) -> list[str]:
    root = tmp_path / f"floors{len(list(tmp_path.iterdir()))}"
    path = root / "replay" / floor / "planted.py"
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    return _floor_offenders(floor, root)


def test_the_checker_catches_a_floor_importing_one_above(tmp_path: Path) -> None:
    cases = {
        ("runs", "from memseal.replay.evidence.bundle import Bundle\n"): (
            "memseal.replay.evidence.bundle"
        ),
        ("runs", "def f():\n    from ..regress import regress\n"): "memseal.replay.regress",
        ("runs", "from memseal.replay import Run\n"): "memseal.replay",
        ("evidence", "from ..regress._reexec import Cursors\n"): "memseal.replay.regress._reexec",
        ("evidence", "import memseal.replay.regress.regress\n"): "memseal.replay.regress.regress",
    }
    for (floor, source), name in cases.items():
        found = _planted_floor(tmp_path, floor, source)
        assert f"replay/{floor}/planted.py imports {name}: above this floor" in found, found


def test_the_checker_lets_a_floor_import_itself_and_the_floors_below(tmp_path: Path) -> None:
    source = (
        "from memseal.replay.runs.calls import TOOL_CALL\nfrom ..runs import Run\n"
        "from . import bundle\nfrom .bundle import Bundle\nfrom memseal.tools import ToolScope\n"
    )
    assert _planted_floor(tmp_path, "evidence", source) == []
    assert _planted_floor(tmp_path, "regress", source) == []
    assert _planted_floor(tmp_path, "runs", "from .calls import TOOL_CALL\n") == []
