"""One process at a time records a run; the lease lapses as soon as its holder dies.

* Two processes resume the same run id at the same moment (both wait on their
  stdin for the parent's go): exactly one wins the lease and records its steps;
  the other gets :class:`memseal.Conflict` before recording anything (it prints
  the error and exits with code 3). Each step then has exactly one memo row and
  one ``memory_tool_call`` entry.
* The winner is SIGKILLed while still holding the lease (whose time, 60 s, is
  far from over). A third process resumes at once, because the holder's pid is
  gone on this host: it replays the winner's steps (same bytes), runs the rest
  live and completes; still one memo and one entry per step, and the ledger
  verifies.
* In one process, two :class:`memseal.Run` objects on one run id: the second's
  first call raises ``Conflict``, and nothing is recorded for it; once the
  first closes, its lease is released and a new Run takes the run over.

On each store: the folder's SQLite file, and PostgreSQL when the test server is
there. The store is named to every ``memseal.open`` here, the children's too, by
``MEMSEAL_STORE`` (set for the PostgreSQL case, unset for SQLite).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.memory import STORE_ENV
from memseal.tools import ToolScope

RUN_ID = "leased-run"
PLACE = "team:acme/agent:writer"
LEASE_TTL = 60.0  # far longer than the test: only the holder's death can free the lease
STEPS = 12
HELD_STEPS = 5  # the winner records these, then holds the lease until killed
TIMEOUT_S = 30.0
CONFLICT_EXIT = 3
ENCODER = msgspec.json.Encoder(order="deterministic")


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store for this process's opens and its children's."""
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _script() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for i in range(STEPS // 2):
        calls.append(("memory_store", {"learning": {"text": f"lease fact number {i}"}}))
        calls.append(("memory_fetch", {"query": f"number {i}", "mode": "exact"}))
    return calls


async def _child(folder: Path, steps: int) -> int:
    """Wait for go, then record ``steps`` steps of the script; hold the lease until killed."""
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        run = memory.run(RUN_ID, ToolScope.placed_at(PLACE), mode="resume", lease_ttl=LEASE_TTL)
        try:
            await run.__aenter__()
        except memseal.Conflict as exc:
            print(ENCODER.encode({"conflict": str(exc)}).decode(), flush=True)
            return CONFLICT_EXIT
        for step, (name, arguments) in enumerate(_script()[:steps]):
            result = await run.call(name, arguments)
            print(ENCODER.encode([step, result]).decode(), flush=True)
        if steps < STEPS:
            print("holding", flush=True)
            await asyncio.sleep(3600)  # until SIGKILLed, lease held
        await run.__aexit__(None, None, None)
    return 0


async def _spawn(folder: Path, steps: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        str(folder),
        str(steps),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _line(proc: asyncio.subprocess.Process) -> bytes:
    assert proc.stdout is not None
    return await asyncio.wait_for(proc.stdout.readline(), TIMEOUT_S)


async def _go(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    await proc.stdin.drain()


async def _recorded(folder: Path) -> tuple[Counter[int], list[int], int]:
    """memory_tool_call entries per step of the run, its memo steps, and the ledger size."""
    per_step: Counter[int] = Counter()
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        summary = await memory.ledger.verify(trust=memory.vkey)
        async for record in memory.ledger.scan():
            entry = record.entry()
            if entry.kind == "memory_tool_call":
                body = msgspec.json.decode(bytes(entry.body))
                assert body["run_id"] == RUN_ID
                per_step[body["step"]] += 1
        rows = await memory.ledger.store.rows(
            "SELECT step FROM memos WHERE run_id = ? ORDER BY step", (RUN_ID,)
        )
    return per_step, [row[0] for row in rows], summary.size


@pytest.mark.slow
async def test_two_processes_one_lease_then_a_restart_resumes(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    async with memseal.open(folder, embedder=None, checkpoint_interval=None):
        pass  # keys and database first, so neither child creates them
    procs = [await _spawn(folder, HELD_STEPS) for _ in range(2)]
    try:
        for proc in procs:
            assert await _line(proc) == b"ready\n"
        # Both go at once: their lease requests race in the writer.
        await asyncio.gather(*(_go(proc) for proc in procs))
        firsts = await asyncio.gather(*(_line(proc) for proc in procs))
        losers = [i for i, line in enumerate(firsts) if line.startswith(b'{"conflict"')]
        assert len(losers) == 1, firsts
        loser, winner = procs[losers[0]], procs[1 - losers[0]]
        assert await asyncio.wait_for(loser.wait(), TIMEOUT_S) == CONFLICT_EXIT
        message = msgspec.json.decode(firsts[losers[0]])["conflict"]
        assert "another process" in message and str(winner.pid) in message, message

        held: dict[int, bytes] = {}
        line = firsts[1 - losers[0]]
        while line != b"holding\n":
            step, result = msgspec.json.decode(line)
            held[step] = ENCODER.encode(result)
            line = await _line(winner)
        assert sorted(held) == list(range(HELD_STEPS))
        per_step, memos, _ = await _recorded(folder)
        assert per_step == Counter(range(HELD_STEPS)) and memos == list(range(HELD_STEPS))

        # The holder dies with its lease's time far from over: a restart resumes at once.
        winner.kill()
        assert await winner.wait() == -9
        started = time.monotonic()
        third = await _spawn(folder, STEPS)
        procs.append(third)
        assert await _line(third) == b"ready\n"
        await _go(third)
        out, err = await asyncio.wait_for(third.communicate(), TIMEOUT_S)
        assert third.returncode == 0, err.decode()[-3000:]
        assert time.monotonic() - started < LEASE_TTL / 2
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    resumed = {}
    for raw in out.splitlines():
        step, result = msgspec.json.decode(raw)
        resumed[step] = ENCODER.encode(result)
    assert sorted(resumed) == list(range(STEPS))
    assert all(resumed[step] == held[step] for step in held), "a replayed step changed"
    per_step, memos, _ = await _recorded(folder)
    assert per_step == Counter(range(STEPS)), "a step was recorded twice, or not at all"
    assert memos == list(range(STEPS))


async def test_a_second_run_object_on_the_same_run_id_conflicts(tmp_path: Path) -> None:
    scope = ToolScope.placed_at(PLACE)
    async with memseal.open(tmp_path / "data", embedder=None, checkpoint_interval=None) as memory:
        first = memory.run(RUN_ID, scope)
        second = memory.run(RUN_ID, scope)
        await first.call("memory_store", {"learning": {"text": "held by the first run"}})
        size = (await memory.ledger.head()).size
        # Not "another process": the message names the Run object this memory holds.
        with pytest.raises(memseal.Conflict, match="already open in this memory"):
            await second.call("memory_store", {"learning": {"text": "from the second run"}})
        # The refused call wrote nothing, and the first run still holds the run.
        assert (await memory.ledger.head()).size == size
        await first.call("memory_fetch", {"query": "held", "mode": "exact"})
        await second.close()
        await first.close()
        # Released on close: a new Run resumes it (replays step 0 without writing).
        size = (await memory.ledger.head()).size
        async with memory.run(RUN_ID, scope, mode="strict") as third:
            replayed = await third.call(
                "memory_store", {"learning": {"text": "held by the first run"}}
            )
            assert replayed["replayed"] is False
            await third.call("memory_fetch", {"query": "held", "mode": "exact"})
        assert (await memory.ledger.head()).size == size


if __name__ == "__main__":
    sys.exit(asyncio.run(_child(Path(sys.argv[1]), int(sys.argv[2]))))
