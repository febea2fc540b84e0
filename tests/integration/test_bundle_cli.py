"""Session bundles end to end: record (killed and resumed), export, verify in a fresh process
with only the vkey, replay (same: 0; ranking changed: 3 with a per-step diff)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bundle_support import REVERSE_RANKING, ROOT, memseal_cli, record_session

VECTORS = ROOT / "tests/vectors/bundles"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted agent's session: a child killed after 3 calls, resumed, exported."""
    work = tmp_path_factory.mktemp("durable")
    done = record_session(work)
    assert "child killed" in done.stdout
    assert "step 2 memory_store done" in done.stdout
    assert (work / "session.bundle").is_file()
    return work


def test_the_durable_example_resumes_without_writing_twice(session: Path) -> None:
    bundle = json.loads((session / "session.bundle").read_text())
    kinds = [
        json.loads(__import__("base64").b64decode(e["leaf"]))["kind"] for e in bundle["entries"]
    ]
    # Three stores, each written once, in spite of the kill and the resume.
    assert kinds.count("memory_stored") == 3
    assert kinds.count("memory_tool_call") == 7
    assert bundle["format"] == "memseal/bundle@v3"


def test_verify_in_a_fresh_process_with_only_the_vkey(session: Path, tmp_path: Path) -> None:
    alone = tmp_path / "session.bundle"
    alone.write_bytes((session / "session.bundle").read_bytes())
    vkey = (session / "agent-data/trust.vkey").read_text().strip()
    done = memseal_cli("verify", str(alone), "--trust", vkey, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "7 call(s)" in done.stdout
    # Another key: exit 1, naming the step.
    other = (VECTORS / "trust.vkey").read_text().strip()
    done = memseal_cli("verify", str(alone), "--trust", other, cwd=tmp_path)
    assert done.returncode == 1
    assert "unknown key" in done.stderr


@pytest.mark.parametrize("against", [False, True], ids=["bundle-only", "against"])
def test_replay_passes_then_fails_when_ranking_changes(
    session: Path, tmp_path: Path, against: bool
) -> None:
    extra = ["--against", str(session / "agent-data")] if against else []
    done = memseal_cli("replay", str(session / "session.bundle"), *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("exact:" in done.stdout) is against
    assert ("bundle only:" in done.stdout) is not against
    assert "re-executed step(s) match" in done.stdout

    (tmp_path / "sitecustomize.py").write_text(REVERSE_RANKING)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = memseal_cli("replay", str(session / "session.bundle"), *extra, cwd=tmp_path, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    out = done.stdout
    assert "step 3 memory_fetch: changed" in out
    assert "hits: recorded order" in out and "hits: new order" in out
    assert "moved from rank 1 to 3" in out
    assert "step 5 memory_list: same" in out  # listing is not a ranking
    assert "changed" in out.splitlines()[-1]


def test_replay_exit_codes_for_bad_bundles_and_usage(tmp_path: Path) -> None:
    done = memseal_cli("replay", str(VECTORS / "tampered.bundle"), cwd=tmp_path)
    assert done.returncode == 1 and "payload hash" in done.stderr
    done = memseal_cli("replay", str(VECTORS / "truncated.bundle"), cwd=tmp_path)
    assert done.returncode == 1 and "truncated" in done.stderr
    done = memseal_cli("replay", str(tmp_path / "missing.bundle"), cwd=tmp_path)
    assert done.returncode == 2
    done = memseal_cli("replay", cwd=tmp_path)
    assert done.returncode == 2


def test_replay_against_another_folder_fails(session: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    done = memseal_cli("demo", "--data", str(other), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    vkey = (session / "agent-data/trust.vkey").read_text().strip()
    done = memseal_cli(
        "replay",
        str(session / "session.bundle"),
        "--against",
        str(other),
        "--trust",
        vkey,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "not the folder" in done.stderr


def test_export_usage_errors(tmp_path: Path, session: Path) -> None:
    done = memseal_cli(
        "export", "--data", str(tmp_path / "none"), "--run", "x", "-o", "o", cwd=tmp_path
    )
    assert done.returncode == 2
    done = memseal_cli(
        "export",
        "--data",
        str(session / "agent-data"),
        "--run",
        "no-such-run",
        "-o",
        "o",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "no run 'no-such-run'" in done.stderr


def test_model_agent_example_skips_without_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/model_agent.py"), "--data", str(tmp_path / "d")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("skipped:")
