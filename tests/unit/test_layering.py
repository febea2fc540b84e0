"""Imports go one way: ledger <- engine <- tools <- replay <- the as-of views <- the
memory facade <- the lifecycle <- memseal.

Seven layers, the lowest first, each a set of modules (a module belongs to the
layer whose name is its longest prefix):

* ``ledger``, ``engine``, ``tools``, ``replay``: the layer folders at the root;
* ``as_of``: ``memseal.apps`` less its lifecycle, that is the as-of views
  (``memseal.apps.as_of``, ``memseal.apps._as_of_build``) and the apps' package
  face. Importing the views runs that face, so were it to import the lifecycle,
  the facade would load the lifecycle, which imports the facade;
* ``facade``: the memory a host opens (``memseal.memory``, ``memseal._memory``,
  ``memseal._recorded_tools``, ``memseal._options``, ``memseal._sync_memory``).
  It serves as-of views, so it sits above them, and it never imports the
  lifecycle;
* ``lifecycle``: ``memseal.apps.lifecycle``, which works on the facade's
  ``Memory`` and ``RecordedTools`` by name.

Anything else under ``memseal`` (the service, the CLI, the integrations, the
witness, ``memseal.errors``, the ``memseal`` package face...) is the top: it may
import every layer, and no layer imports it. A layer may import only itself and
the layers below it; a module split out of the facade is the top until it is
listed in ``FACADE``, so the facade's import of it fails here until then. The
names the moved apps still answer to (``memseal.tools.lifecycle``,
``memseal.replay.as_of``...) are on the moved modules' layers. A bare ``ledger``
/ ``engine`` / ``tools`` / ``replay`` is never the import name (the design's one
namespace is ``memseal``).

Inside replay, three floors go one way too: ``replay.runs`` <- ``replay.evidence``
<- ``replay.regress``. A floor may import the layers below replay, itself and
the floors below it; never a floor above, nor ``memseal.replay`` itself (the
package's face imports every floor). Every replay module lives on a floor.

Every import in a layer's files is read: module level, inside a function or
under ``if TYPE_CHECKING:``, absolute or relative (resolved against the file's
own package), and the ``importlib.import_module`` / ``__import__`` calls that
name a module as a constant.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The layer folders at the root, linked into memseal/ (memseal/ledger -> ../ledger).
FOLDERS = ("ledger", "engine", "tools", "replay")
FACADE = (
    "memseal.memory",
    "memseal._memory",
    "memseal._recorded_tools",
    "memseal._options",
    "memseal._sync_memory",
)
LAYERS: dict[str, tuple[str, ...]] = {
    "ledger": ("memseal.ledger",),
    "engine": ("memseal.engine",),
    "tools": ("memseal.tools",),
    "replay": ("memseal.replay",),
    "as_of": ("memseal.apps",),  # less memseal.apps.lifecycle, a longer prefix above
    "facade": FACADE,
    "lifecycle": ("memseal.apps.lifecycle",),
}
ORDER = list(LAYERS)
TOP = len(ORDER)
BARE = {*FOLDERS, "apps"}
# The names the moved apps still answer to (made on demand by the tools' and replay's
# package faces): importing one runs the moved module, so it is on the moved module's layer.
MOVED = {
    "memseal.tools.lifecycle": "memseal.apps.lifecycle",
    "memseal.replay.as_of": "memseal.apps.as_of",
    "memseal.replay.evidence.as_of": "memseal.apps.as_of",
}
# Where a planted test file goes in a tree: a facade file has one of the facade's names.
PLANT = {
    **{folder: f"{folder}/planted.py" for folder in FOLDERS},
    "as_of": "memseal/apps/planted.py",
    "facade": "memseal/_memory.py",
    "lifecycle": "memseal/apps/lifecycle/planted.py",
}
FLOORS = ["runs", "evidence", "regress"]  # inside replay/, the lowest first
WEB = {"fastapi", "uvicorn", "starlette", "httpx"}
_DYNAMIC = {"import_module", "__import__"}


def _path(module: str, root: Path = ROOT) -> Path:
    """Where ``module`` is: a package's folder, or a module's file."""
    first, *rest = module.split(".")[1:]
    base = root / first if first in FOLDERS else root / "memseal" / first
    path = base.joinpath(*rest)
    return path if path.is_dir() else path.with_suffix(".py")


def _parts(path: Path, root: Path = ROOT) -> list[str]:
    """A file's dotted name, as the import system sees it (``__init__`` kept)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts if parts[0] == "memseal" else ["memseal", *parts]


def _dotted(path: Path, root: Path = ROOT) -> str:
    """A file's module name (a package's __init__ is the package)."""
    return ".".join(_parts(path, root)).removesuffix(".__init__")


def _package_of(path: Path, root: Path = ROOT) -> list[str]:
    """The dotted package a file lives in: a package's __init__ is the package, any other
    module's package is its parent."""
    return _parts(path, root)[:-1]


def _rank(name: str) -> int | None:
    """The layer ``name`` is on, as its index in ORDER (TOP: the top; None: not memseal)."""
    if name != "memseal" and not name.startswith("memseal."):
        return None
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            name = new + name[len(old) :]
    found = [
        (len(prefix), rank)
        for rank, layer in enumerate(ORDER)
        for prefix in LAYERS[layer]
        if name == prefix or name.startswith(prefix + ".")
    ]
    return max(found)[1] if found else TOP


def _files(layer: str, root: Path = ROOT) -> list[Path]:
    """The files of ``layer``: under its modules, less those of a layer more precisely named."""
    found: set[Path] = set()
    for module in LAYERS[layer]:
        path = _path(module, root)
        found.update(path.rglob("*.py") if path.is_dir() else [path] if path.is_file() else [])
    rank = ORDER.index(layer)
    return sorted(p for p in found if _rank(_dotted(p, root)) == rank)


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


def _offence(name: str, layer: str) -> str | None:
    """Why ``name`` may not be imported from ``layer`` (None: it may)."""
    if name.startswith("<"):
        return name[1:-1]
    if name.split(".")[0] in BARE:
        return "a bare layer name (the import name is memseal.<layer>)"
    rank = _rank(name)
    if rank is None or rank <= ORDER.index(layer):
        return None
    return "above this layer"


def _offenders(layer: str, root: Path = ROOT) -> list[str]:
    found = []
    for path in _files(layer, root):
        for name in sorted(_imports(path, _package_of(path, root))):
            why = _offence(name, layer)
            if why is not None:
                found.append(f"{path.relative_to(root).as_posix()} imports {name}: {why}")
    return found


@pytest.mark.parametrize("layer", ORDER)
def test_a_layer_imports_nothing_above_it(layer: str) -> None:
    assert _offenders(layer) == []


def test_every_layer_has_its_files() -> None:
    # A layer whose files moved away would pass the test above with nothing checked.
    for module in FACADE:
        assert _path(module).is_file(), module
    assert _path("memseal.apps.as_of") in _files("as_of")
    assert _path("memseal.apps.lifecycle.brain") in _files("lifecycle")
    assert not set(_files("as_of")) & set(_files("lifecycle"))
    for layer in ORDER:
        assert _files(layer) != [], layer


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
        for name in sorted(_imports(path, _package_of(path, root))):
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
        for name in _imports(path, _package_of(path))
        if name.split(".")[0] in WEB
    ]
    assert offenders == []


def _planted(tmp_path: Path, layer: str, source: str, where: str | None = None) -> list[str]:
    """Run the checker on a tree whose ``layer`` holds one file (at ``where``) of ``source``."""
    root = tmp_path / f"tree{len(list(tmp_path.iterdir()))}"
    path = root / (where or PLANT[layer])
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    return _offenders(layer, root)


def test_the_checker_catches_the_layer_above_and_the_top_inside_a_function(
    tmp_path: Path,
) -> None:
    for rank, layer in enumerate(ORDER):
        above = LAYERS[ORDER[rank + 1]][0] if rank + 1 < TOP else "memseal.service.app"
        source = f"def update():\n    import {above}\n    from memseal.cli import main\n"
        assert set(_planted(tmp_path, layer, source)) == {
            f"{PLANT[layer]} imports {name}: above this layer"
            for name in (above, "memseal.cli", "memseal.cli.main")
        }, layer


def test_the_checker_resolves_a_relative_import_that_climbs_out_of_the_layer(
    tmp_path: Path,
) -> None:
    # replay/planted.py is memseal.replay.planted: ".." is the memseal package itself.
    found = _planted(tmp_path, "replay", "async def f():\n    from ..memory import open\n")
    assert "replay/planted.py imports memseal.memory: above this layer" in found
    found = _planted(tmp_path, "engine", "from .. import cli\n", "engine/sub/deep.py")
    assert found == []  # engine/sub/deep.py: ".." is memseal.engine
    found = _planted(tmp_path, "engine", "from ... import cli\n", "engine/sub/deep.py")
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


def test_the_as_of_views_import_the_layers_below_and_themselves(tmp_path: Path) -> None:
    source = (
        "from memseal.ledger.entry import Entry\nfrom memseal.engine import Engine\n"
        "from memseal.tools import ToolScope\nfrom memseal.replay.runs import Run\n"
        "from memseal.replay.evidence._temp_log import parse_time\n"
        "from memseal.replay.regress import regress\nfrom memseal.apps.as_of import AsOfView\n"
        "from ._as_of_build import AS_OF_DDL\nfrom . import as_of\nimport memseal.apps\n"
    )
    assert _planted(tmp_path, "as_of", source) == []


def test_the_facade_imports_the_as_of_views_and_itself(tmp_path: Path) -> None:
    source = (
        "from memseal.apps.as_of import AsOfView\nfrom memseal.apps._as_of_build import AS_OF_DDL\n"
        "from memseal.replay.runs.run import Run\n"
        "from memseal._recorded_tools import RecordedTools\n"
        "from ._options import OpenOptions\nfrom .memory import Memory, _open\n"
        "from memseal._sync_memory import SyncMemory\n"
    )
    for module in FACADE:
        where = f"memseal/{module.split('.')[1]}.py"
        assert _planted(tmp_path, "facade", source, where) == [], where


def test_the_lifecycle_imports_every_layer_below_and_itself(tmp_path: Path) -> None:
    source = (
        "from memseal.ledger.entry import Entry\nfrom memseal.engine import Engine\n"
        "from memseal.tools import ToolScope\nfrom memseal.replay.runs import Run\n"
        "from memseal.replay.regress import regress\nfrom memseal.apps.as_of import AsOfView\n"
        "from memseal.memory import Memory, RecordedTools\nimport memseal._memory\n"
        "from memseal._recorded_tools import RecordedTools\nfrom memseal._options import Clock\n"
        "from memseal._sync_memory import SyncMemory\nfrom ..as_of import ViewCache\n"
        "from ...memory import Memory\nfrom . import brain\nfrom .pack import Recorder\n"
    )
    assert _planted(tmp_path, "lifecycle", source) == []


def test_the_checker_catches_the_lifecycle_reaching_the_top(tmp_path: Path) -> None:
    cases = {
        "import memseal\n": "memseal",
        "from memseal import open\n": "memseal",
        "from memseal.service.app import create_app\n": "memseal.service.app",
        "def f():\n    from memseal.cli import main\n": "memseal.cli",
        "from memseal.integrations import langchain\n": "memseal.integrations",
        "from memseal.errors import NotFound\n": "memseal.errors",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memseal import Memory\n": (
            "memseal"
        ),
        "from ... import witness\n": "memseal.witness",
    }
    for source, name in cases.items():
        found = _planted(tmp_path, "lifecycle", source)
        assert f"{PLANT['lifecycle']} imports {name}: above this layer" in found, (source, found)


def test_the_checker_catches_the_facade_importing_the_lifecycle_or_the_top(
    tmp_path: Path,
) -> None:
    cases = {
        ("_memory.py", "from memseal.apps.lifecycle import Brain\n"): "memseal.apps.lifecycle",
        ("memory.py", "def open():\n    from .apps.lifecycle.agent_memory import AgentMemory\n"): (
            "memseal.apps.lifecycle.agent_memory"
        ),
        (
            "_recorded_tools.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from memseal.apps.lifecycle.jobs import JobQueue\n",
        ): "memseal.apps.lifecycle.jobs",
        ("_sync_memory.py", "from .apps import lifecycle\n"): "memseal.apps.lifecycle",
        ("_options.py", "import importlib\nimportlib.import_module('memseal.apps.lifecycle')\n"): (
            "memseal.apps.lifecycle"
        ),
        ("memory.py", "import memseal.tools.lifecycle.pack\n"): "memseal.tools.lifecycle.pack",
        ("memory.py", "from memseal.cli import main\n"): "memseal.cli",
        ("_memory.py", "import memseal\n"): "memseal",
        ("_memory.py", "from memseal.errors import NotFound\n"): "memseal.errors",
        # A module split out of the facade is the top until FACADE lists it.
        ("_memory.py", "from ._memory_runs import open_run\n"): "memseal._memory_runs",
    }
    for (file, source), name in cases.items():
        found = _planted(tmp_path, "facade", source, f"memseal/{file}")
        assert f"memseal/{file} imports {name}: above this layer" in found, (source, found)


def test_the_checker_catches_the_as_of_views_reaching_up(tmp_path: Path) -> None:
    cases = {
        ("as_of.py", "from memseal.memory import Memory\n"): "memseal.memory",
        ("as_of.py", "def f():\n    from memseal._recorded_tools import RecordedTools\n"): (
            "memseal._recorded_tools"
        ),
        ("_as_of_build.py", "from .lifecycle import Brain\n"): "memseal.apps.lifecycle",
        # The apps' package face runs whenever the facade imports the views.
        ("__init__.py", "from . import lifecycle\n"): "memseal.apps.lifecycle",
        ("as_of.py", "from memseal import open\n"): "memseal",
    }
    for (file, source), name in cases.items():
        found = _planted(tmp_path, "as_of", source, f"memseal/apps/{file}")
        assert f"memseal/apps/{file} imports {name}: above this layer" in found, (source, found)


def test_the_checker_catches_a_lower_layer_importing_the_apps_or_the_facade(
    tmp_path: Path,
) -> None:
    cases = [
        (
            "tools",
            "from memseal.apps.lifecycle.pack import ContextPack\n",
            "memseal.apps.lifecycle.pack",
        ),
        # The old names are the moved modules still.
        ("tools", "import memseal.tools.lifecycle\n", "memseal.tools.lifecycle"),
        ("replay", "from memseal.replay.evidence import as_of\n", "memseal.replay.evidence.as_of"),
        ("replay", "def f():\n    from memseal.apps.as_of import AsOfView\n", "memseal.apps.as_of"),
        ("engine", "import memseal.apps\n", "memseal.apps"),
        (
            "ledger",
            "import importlib\nimportlib.import_module('memseal.apps.lifecycle')\n",
            "memseal.apps.lifecycle",
        ),
        (
            "replay",
            "from memseal._recorded_tools import RecordedTools\n",
            "memseal._recorded_tools",
        ),
        ("tools", "def f():\n    from memseal.memory import Memory\n", "memseal.memory"),
    ]
    for layer, source, name in cases:
        found = _planted(tmp_path, layer, source)
        assert f"{PLANT[layer]} imports {name}: above this layer" in found, (source, found)


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
