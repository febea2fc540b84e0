"""Every Python and shell example in docs/ runs as written, each in an empty folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _blocks(language: str) -> list[tuple[str, int, str]]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(rf"```{language}\n(.*?)```", text, re.S)):
            found.append((page.name, i, block))
    return found


PYTHON = _blocks("python")
SHELL = _blocks("sh")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty folder, as a reader's is: each block makes what it needs."""
    return tmp_path


@pytest.mark.parametrize(("page", "index", "code"), PYTHON, ids=[f"{p}-{i}" for p, i, _ in PYTHON])
def test_docs_python_example_runs(page: str, index: int, code: str, workdir: Path) -> None:
    script = workdir / "example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=workdir, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{page} block {index}: {done.stderr}"


@pytest.mark.parametrize(("page", "index", "code"), SHELL, ids=[f"{p}-{i}" for p, i, _ in SHELL])
def test_docs_shell_example_runs(page: str, index: int, code: str, workdir: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{page} block {index}: {done.stderr}"


def test_the_routes_table_shows_every_required_body_field(tmp_path: Path) -> None:
    from memseal.service.app import create_app

    spec = create_app(tmp_path / "data", embedder=None).openapi()
    page = (ROOT / "docs" / "service.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `POST (\S+)` \| [^|]+ \| (.*) \|$", page, re.M)
    }
    checked = 0
    for path, item in spec["paths"].items():
        body = item.get("post", {}).get("requestBody", {})
        schema = body.get("content", {}).get("application/json", {}).get("schema", {})
        shown = path.replace("{item_id}", "{id}")
        for name in schema.get("required", []):
            assert shown in rows, f"docs/service.md has no row for POST {shown}"
            assert re.search(rf"\b{name}\b", rows[shown]), f"POST {shown} row misses `{name}`"
            checked += 1
    assert checked >= 5  # role and place of a token, the reason of each trust change
