"""What the bundle tests share: the CLI in a subprocess, the scripted agent's session, a
test-only sitecustomize that reverses every ranking ("the ranking code changed"), and a
run's bundle (or an updated one) exported and verified as CI receives it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memseal.replay.evidence.bundle import (
    VerifiedBundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)

if TYPE_CHECKING:
    from memseal import Memory
    from memseal.replay.regress._update import Updated

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Imported at interpreter start (sitecustomize on PYTHONPATH) by a replay subprocess: it
# reverses every ranking a fetch makes (engine/_fetch.py), without touching engine code.
REVERSE_RANKING = """
import memseal.engine._fetch as _engine

_exact, _fuse = _engine.exact, _engine.fuse
_engine.exact = lambda *a, **k: list(reversed(_exact(*a, **k)))
_engine.fuse = lambda *a, **k: list(reversed(_fuse(*a, **k)))
"""


def memseal_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memseal.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def record_session(work: Path) -> subprocess.CompletedProcess[str]:
    """Run examples/durable_agent.py in ``work``: a child killed, resumed, exported."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/durable_agent.py")],
        cwd=work,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


async def run_bundle(memory: Memory, run_id: str) -> VerifiedBundle:
    """Run ``run_id`` of ``memory`` exported and verified with the memory's own vkey."""
    exported = await export_bundle(memory.ledger, await memory.key_history(), run_id)
    return verify_bundle(encode_bundle(exported), memory.vkey)


def updated_bundle(updated: Updated) -> VerifiedBundle:
    """The bundle ``replay --update`` made, verified with the local key it was signed by."""
    return verify_bundle(encode_bundle(updated.bundle), updated.vkey)
