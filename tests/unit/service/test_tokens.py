"""The tokens module is the service's part the CLI uses without the web framework."""

from __future__ import annotations

import subprocess
import sys

# `memseal tokens add` on a host without FastAPI (or where importing it is slow) must work:
# the CLI, the service package and its tokens module import no web framework.
PROBE = """
import sys
import memseal.cli
import memseal.service
from memseal.service.tokens import TokenStore, scope_from

scope = scope_from(role="agent", place="team:a", read_only=True)
assert scope.place == "team:a" and not scope.writes, scope
web = sorted(m for m in sys.modules if m.split(".")[0] in ("fastapi", "starlette", "pydantic"))
print(",".join(web))
"""


def test_the_cli_imports_no_web_framework() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported: {done.stdout.strip()}"


def test_the_probe_sees_fastapi_when_it_is_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("import memseal.cli", "import memseal.service.app")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "fastapi" in done.stdout.split(",")
