"""The README's examples run as written, and what they make is ignored by git."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def test_the_readme_has_python_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"example_{index}.py"
    script.write_text(BLOCKS[index], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the example printed nothing"


SHELL = [
    block
    for block in re.findall(
        r"```sh\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S
    )
    if "make " not in block  # the two make commands are what CI itself runs
]


@pytest.mark.parametrize("index", range(len(SHELL)))
def test_readme_shell_example_runs(index: int, tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", SHELL[index]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ok:" in done.stdout


def test_what_the_readme_examples_make_is_ignored_by_git() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    made = set(re.findall(r"--(?:data|out) ([\w.-]+)", readme))
    assert {"memseal-data", "agent-data", "session.bundle"} <= made
    # A file inside each folder, and each file itself: none may show in `git status`.
    paths = [f"{name}/ledger.db" if "." not in name else name for name in sorted(made)]
    paths += [f"{name}/" for name in sorted(made) if "." not in name]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    unignored = [line for line in done.stdout.splitlines() if line.startswith("::")]
    assert not unignored, unignored
