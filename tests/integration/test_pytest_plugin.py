"""The memseal pytest plugin, run by pytester against the real bundles in tests/vectors/."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from memseal.replay.evidence.bundle import encode_bundle

pytest_plugins = ["pytester"]

# Once pyproject declares the `memseal` pytest11 entry point the plugin loads by itself;
# until then (and to never register it twice) it is named with -p.
PLUGIN = (
    ()
    if any(e.name == "memseal" for e in entry_points(group="pytest11"))
    else ("-p", "memseal.replay.regress.pytest_plugin")
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests/vectors/bundles"
TRUST = (VECTORS / "trust.vkey").read_text().strip()


@pytest.fixture(autouse=True)
def _ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted agent's session recorded now, with the current code (the checked-in
    vectors pass or fail verification whatever the engine does; replaying them is exactly
    what should fail once ranking code changes, until they are re-recorded)."""
    spec = importlib.util.spec_from_file_location(
        "make_bundle_vectors", ROOT / "tests/vectors/make_bundle_vectors.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder = tmp_path_factory.mktemp("fresh")
    example = module._example()
    bundle = asyncio.run(module.record(folder / "data", list(example.SCRIPT)))
    (folder / "fresh.bundle").write_bytes(encode_bundle(bundle))
    (folder / "trust.vkey").write_text(bundle.keys[0])
    return folder


def _sessions(pytester: pytest.Pytester, *names: str, fresh: Path | None = None) -> Path:
    folder = pytester.path / "sessions"
    folder.mkdir()
    for name in names:
        shutil.copy(VECTORS / name, folder / name)
    if fresh is not None:
        shutil.copy(fresh / "fresh.bundle", folder / "fresh.bundle")
    return folder


def test_every_bundle_in_the_folder_becomes_a_passing_test(
    pytester: pytest.Pytester, fresh: Path
) -> None:
    folder = _sessions(pytester, fresh=fresh)
    shutil.copy(fresh / "fresh.bundle", folder / "again.bundle")
    result = pytester.runpytest(
        *PLUGIN,
        "--memseal-sessions",
        str(folder),
        "--memseal-trust",
        (fresh / "trust.vkey").read_text(),
        "-v",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*memseal-session?fresh.bundle?*PASSED*"])


def test_a_bad_bundle_fails_with_its_error(pytester: pytest.Pytester, fresh: Path) -> None:
    folder = _sessions(pytester, "tampered.bundle", "truncated.bundle", fresh=fresh)
    result = pytester.runpytest(
        *PLUGIN,
        "--memseal-sessions",
        str(folder),
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*tampered.bundle: verification failed*payload hash*"])
    result.stdout.fnmatch_lines(["*truncated.bundle: verification failed*truncated*"])


def test_a_changed_ranking_fails_with_the_diff(pytester: pytest.Pytester, fresh: Path) -> None:
    # In a subprocess: the conftest patches the engine's ranking for that process only.
    folder = _sessions(pytester, fresh=fresh)
    pytester.makepyfile(
        conftest="""
import memseal.engine._fetch as _engine

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
    result.stdout.fnmatch_lines(
        [
            "*calls: unkeyed (matched by order)*",
            "*step 3 memory_fetch: changed*",
            "*hits: recorded order*",
        ]
    )


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
