"""The Replayer, the pytest plugin and ``memseal replay`` on real bundles recorded with call
keys through ``memory.run``: matched by key in any order, or by order without keys."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable, Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from bundle_support import memseal_cli

import memseal
from memseal import ToolScope
from memseal.engine import HashingEmbedder
from memseal.ledger.errors import InvalidRequest, ReplayDivergence
from memseal.ledger.keys import key_history
from memseal.replay.evidence.bundle import encode_bundle, export_bundle
from memseal.replay.regress.replayer import Replayer, ReplayRun

pytest_plugins = ["pytester"]

# As in test_pytest_plugin.py: named with -p until the pytest11 entry point loads it.
PLUGIN = (
    ()
    if any(e.name == "memseal" for e in entry_points(group="pytest11"))
    else ("-p", "memseal.replay.regress.pytest_plugin")
)

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
STORE = {"learning": {"text": "the nightly report goes out at 6am"}}
FETCH = {"query": "report"}
LIST: dict[str, Any] = {}
# (key, tool, arguments) in the order the recorded agent made them.
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("call_a", "memory_store", STORE),
    ("call_b", "memory_fetch", FETCH),
    ("call_c", "memory_list", LIST),
]


async def _record(folder: Path, keyed: bool, run_id: str) -> bytes:
    async with memseal.open(folder, embedder=HashingEmbedder(), checkpoint_interval=None) as memory:
        async with memory.run(run_id, SCOPE) as run:
            for key, tool, arguments in CALLS:
                await run.call(tool, arguments, key=key if keyed else None)
        bundle = await export_bundle(
            memory.ledger, key_history(folder), run_id, embedders=await memory.engine.embedders()
        )
    return encode_bundle(bundle)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One keyed and one unkeyed bundle of the same three calls, recorded now."""
    folder = tmp_path_factory.mktemp("keyed-bundles")
    keyed = asyncio.run(_record(folder / "keyed-data", True, "thread-1"))
    (folder / "keyed.bundle").write_bytes(keyed)
    plain = asyncio.run(_record(folder / "plain-data", False, "thread-2"))
    (folder / "plain.bundle").write_bytes(plain)
    return folder


Agent = Callable[[ReplayRun], Awaitable[Any]]


def _agent(order: list[int], keyed: bool, change: dict[str, Any] | None = None) -> Agent:
    async def agent(run: ReplayRun) -> list[Any]:
        out = []
        for i in order:
            key, tool, arguments = CALLS[i]
            if change is not None and key == "call_b":
                arguments = change
            out.append(await run.call(tool, arguments, key=key if keyed else None))
        return out

    return agent


def _replay(bundle: Path, agent: Agent) -> tuple[Replayer, Any]:
    replayer = Replayer.load(bundle)
    return replayer, asyncio.run(replayer.run(agent))


def test_a_keyed_bundle_replays_by_key_in_another_order(bundles: Path) -> None:
    replayer, (listed, fetched, stored) = _replay(bundles / "keyed.bundle", _agent([2, 1, 0], True))
    assert replayer.matched_by == "key"
    assert stored  # the recorded store's result, from its memo
    assert len(fetched["hits"]) == 1  # the fetch recorded after the store, not step 0's state
    assert listed["items"]


def test_a_key_called_again_gets_its_memo_again(bundles: Path) -> None:
    replayer, out = _replay(bundles / "keyed.bundle", _agent([0, 1, 1, 2], True))
    assert out[1] == out[2]
    assert replayer.matched_by == "key"


def test_a_changed_call_under_a_key_diverges_naming_it(bundles: Path) -> None:
    replayer = Replayer.load(bundles / "keyed.bundle")
    with pytest.raises(ReplayDivergence) as caught:
        asyncio.run(replayer.run(_agent([0, 1, 2], True, change={"query": "deploys"})))
    message = str(caught.value)
    assert "key 'call_b' was recorded with another call" in message
    assert "'report'" in message and "'deploys'" in message  # both calls
    assert "(calls matched by key)" in message
    assert caught.value.step == 1
    assert caught.value.recorded["key"] == "call_b"  # type: ignore[index]
    assert caught.value.attempted["key"] == "call_b"  # type: ignore[index]


def test_a_key_the_bundle_lacks_diverges_saying_so(bundles: Path) -> None:
    async def agent(run: ReplayRun) -> Any:
        return await run.call("memory_fetch", FETCH, key="call_zzz")

    with pytest.raises(ReplayDivergence, match="key 'call_zzz' is not in the bundle"):
        asyncio.run(Replayer.load(bundles / "keyed.bundle").run(agent))


def test_a_keyed_call_never_made_is_named_at_the_end(bundles: Path) -> None:
    with pytest.raises(ReplayDivergence, match=r"steps \[2\] \(keys \['call_c'\]\) were never"):
        asyncio.run(Replayer.load(bundles / "keyed.bundle").run(_agent([1, 0], True)))


@pytest.mark.parametrize("name", ["keyed.bundle", "plain.bundle"])
def test_unkeyed_replay_matches_by_order_as_before(bundles: Path, name: str) -> None:
    replayer, out = _replay(bundles / name, _agent([0, 1, 2], False))
    assert replayer.matched_by == "order"
    assert len(out[1]["hits"]) == 1
    with pytest.raises(ReplayDivergence, match=r"step 0: a different call.*matched by order"):
        asyncio.run(Replayer.load(bundles / name).run(_agent([2, 1, 0], False)))


def test_a_run_mixing_keyed_and_unkeyed_calls_is_refused(bundles: Path) -> None:
    async def keyed_first(run: ReplayRun) -> Any:
        await run.call("memory_store", STORE, key="call_a")
        return await run.call("memory_fetch", FETCH)

    async def unkeyed_first(run: ReplayRun) -> Any:
        await run.call("memory_store", STORE)
        return await run.call("memory_fetch", FETCH, key="call_b")

    for agent in (keyed_first, unkeyed_first):
        with pytest.raises(ReplayDivergence, match="never a mix"):
            asyncio.run(Replayer.load(bundles / "keyed.bundle").run(agent))


def test_a_keyed_replay_of_an_unkeyed_bundle_says_to_replay_by_order(bundles: Path) -> None:
    with pytest.raises(ReplayDivergence, match=r"key 'call_a' is not in the bundle"):
        asyncio.run(Replayer.load(bundles / "plain.bundle").run(_agent([0, 1, 2], True)))


@pytest.mark.parametrize("key", [7, "", "k" * 201, b"call_a"])
def test_a_bad_key_is_invalid_request_naming_key(bundles: Path, key: Any) -> None:
    run = ReplayRun(Replayer.load(bundles / "keyed.bundle").verified)
    with pytest.raises(InvalidRequest, match="`key`"):
        run.call("memory_fetch", FETCH, key=key)
    assert run.steps_issued == 0 and run.matched_by is None  # nothing taken


def test_the_toolset_replays_tool_calls_by_their_ids(bundles: Path) -> None:
    async def agent(run: ReplayRun) -> Any:
        tools = run.toolset()
        texts = []
        for key, tool, arguments in reversed(CALLS):
            function = {"name": tool, "arguments": json.dumps(arguments)}
            call = {"id": key, "type": "function", "function": function}
            texts.append(await tools.call(call))
        return texts

    replayer, texts = _replay(bundles / "keyed.bundle", agent)
    assert replayer.matched_by == "key"
    assert all(not t.startswith("error:") for t in texts)


def test_memseal_replay_names_the_matching(bundles: Path, tmp_path: Path) -> None:
    done = memseal_cli("replay", str(bundles / "keyed.bundle"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "calls: all 3 keyed (matched by key" in done.stdout
    assert "step 1 memory_fetch key 'call_b': same" in done.stdout
    done = memseal_cli("replay", str(bundles / "plain.bundle"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "calls: unkeyed (matched by order)" in done.stdout
    assert "step 1 memory_fetch: same" in done.stdout


def test_the_plugin_replays_a_keyed_bundle_by_key(pytester: pytest.Pytester, bundles: Path) -> None:
    shutil.copy(bundles / "keyed.bundle", pytester.path / "keyed.bundle")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_agent=f"""
import asyncio

CALLS = {CALLS!r}


async def agent(run, order, query="report"):
    for i in order:
        key, tool, arguments = CALLS[i]
        if key == "call_b":
            arguments = {{"query": query}}
        await run.call(tool, arguments, key=key)


def test_reordered(memseal_session):
    replayer = memseal_session("keyed.bundle")
    asyncio.run(replayer.run(lambda run: agent(run, [1, 2, 0])))
    assert replayer.matched_by == "key"


def test_changed(memseal_session):
    replayer = memseal_session("keyed.bundle")
    asyncio.run(replayer.run(lambda run: agent(run, [0, 1, 2], "deploys")))
"""
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*key 'call_b' was recorded with another call*matched by key*"])


def test_replay_update_keeps_the_keys(bundles: Path, tmp_path: Path) -> None:
    updated = tmp_path / "keyed.updated.bundle"
    done = memseal_cli(
        "replay", str(bundles / "keyed.bundle"), "--update", "-o", str(updated), cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    replayer, out = _replay(updated, _agent([2, 0, 1], True))
    assert replayer.matched_by == "key"
    assert len(out[2]["hits"]) == 1


async def _record_mixed(folder: Path) -> bytes:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        async with memory.run("mixed", SCOPE) as run:
            await run.call("memory_store", STORE, key="call_a")
            await run.call("memory_fetch", FETCH)
            await run.call("memory_list", LIST, key="call_c")
        bundle = await export_bundle(memory.ledger, key_history(folder), "mixed")
    return encode_bundle(bundle)


def test_a_bundle_mixing_keyed_and_unkeyed_calls_replays_by_order_only(tmp_path: Path) -> None:
    path = tmp_path / "mixed.bundle"
    path.write_bytes(asyncio.run(_record_mixed(tmp_path / "data")))

    async def keyed(run: ReplayRun) -> Any:
        return await run.call("memory_store", STORE, key="call_a")

    with pytest.raises(
        ReplayDivergence, match=r"steps \[1\] have no key.*replay this run by order"
    ):
        asyncio.run(Replayer.load(path).run(keyed))
    replayer, _ = _replay(path, _agent([0, 1, 2], False))
    assert replayer.matched_by == "order"
    done = memseal_cli("replay", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "calls: 2 of 3 keyed, the rest not (matched by order" in done.stdout


def test_the_plugin_session_of_a_keyed_bundle_passes(
    pytester: pytest.Pytester, bundles: Path
) -> None:
    folder = pytester.path / "sessions"
    folder.mkdir()
    shutil.copy(bundles / "keyed.bundle", folder / "keyed.bundle")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest(*PLUGIN, "--memseal-sessions", str(folder), "-v")
    result.assert_outcomes(passed=1)
