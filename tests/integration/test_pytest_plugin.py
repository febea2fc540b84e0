"""The memseal pytest plugin, run by pytester against the real bundles in tests/vectors/."""

from __future__ import annotations

import shutil
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# Once pyproject declares the `memseal` pytest11 entry point the plugin loads by itself;
# until then (and to never register it twice) it is named with -p.
PLUGIN = (
    ()
    if any(e.name == "memseal" for e in entry_points(group="pytest11"))
    else ("-p", "memseal.replay.pytest_plugin")
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests/vectors/bundles"
TRUST = (VECTORS / "trust.vkey").read_text().strip()


@pytest.fixture(autouse=True)
def _ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _sessions(pytester: pytest.Pytester, *names: str) -> Path:
    folder = pytester.path / "sessions"
    folder.mkdir()
    for name in names:
        shutil.copy(VECTORS / name, folder / name)
    return folder


def test_every_bundle_in_the_folder_becomes_a_passing_test(pytester: pytest.Pytester) -> None:
    folder = _sessions(pytester, "good.bundle", "divergent.bundle")
    result = pytester.runpytest(
        *PLUGIN,
        "--memseal-sessions",
        str(folder),
        "--memseal-trust",
        TRUST,
        "-v",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*memseal-session?good.bundle?*PASSED*"])


def test_a_bad_bundle_fails_with_its_error(pytester: pytest.Pytester) -> None:
    folder = _sessions(pytester, "good.bundle", "tampered.bundle", "truncated.bundle")
    result = pytester.runpytest(
        *PLUGIN,
        "--memseal-sessions",
        str(folder),
        "--memseal-trust",
        TRUST,
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*tampered.bundle: verification failed*payload hash*"])
    result.stdout.fnmatch_lines(["*truncated.bundle: verification failed*truncated*"])


def test_a_changed_ranking_fails_with_the_diff(pytester: pytest.Pytester) -> None:
    # In a subprocess: the conftest patches the engine's ranking for that process only.
    folder = _sessions(pytester, "good.bundle")
    pytester.makepyfile(
        conftest="""
import memseal.engine.engine as _engine

_fuse = _engine.fuse
_engine.fuse = lambda *a, **k: list(reversed(_fuse(*a, **k)))
"""
    )
    result = pytester.runpytest_subprocess(
        *PLUGIN,
        "--memseal-sessions",
        str(folder),
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*step 3 memory_fetch: changed*", "*hits: recorded order*"])


def test_the_fixture_loads_a_bundle_for_the_hosts_agent(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_agent=f"""
import asyncio

BUNDLE = {str(VECTORS / "good.bundle")!r}
TRUST = {TRUST!r}


STORES = [
    "the nightly report goes out at 6am",
    "the writer prefers dark mode in every editor",
    "deploys happen on Tuesdays after the report",
]


async def agent(run):
    for text in STORES:
        await run.call("memory_store", {{"learning": {{"text": text}}}})
    await run.call("memory_fetch", {{"query": "report"}})
    await run.call("memory_fetch", {{"query": "dark mode"}})
    await run.call("memory_list", {{}})
    return await run.call("memory_recall", {{"question": "when does the report go out?"}})


def test_agent(memseal_session):
    replayer = memseal_session(BUNDLE, trust=TRUST)
    output = asyncio.run(replayer.run(agent))
    assert "6am" in output["answer"]
"""
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
