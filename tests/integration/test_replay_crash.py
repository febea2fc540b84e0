"""A scripted agent SIGKILLed at random steps resumes to the same results and the same memory.

The agent (``agent`` below, run as this file's ``__main__``) makes 61 tool calls
in one run, mode ``resume``: stores (learnings, a document, a conversation, one
duplicate), fetches, recalls, lists (paging with a cursor from an earlier
result), gets, explores, two forgets and a few invalid calls, which are recorded
as errors. Later arguments are taken from earlier results (ids, cursors), as a
real agent's would be. Every step's outcome is printed as one canonical JSON line.

The parent first runs it uninterrupted, in process, in a reference folder; then
against another folder (same keys, so item ids match; same fixed clock) as a
subprocess, SIGKILLed twelve times: after ten random steps spread over the
script, in order, and two steps inside the part already recorded (so those kills
land in a replay), each a random moment after the step's line (so some land
inside the next step's transaction, or between its commit and its line). Each
time the same script is run again, resuming the run; the last attempt finishes.
It checks (``MEMSEAL_CRASH_SEED`` replays a failing kill plan):

* **Replayed results.** The rule: the first printing of a step fixes its
  result. Every later printing is either byte-identical to it, or (only for a
  step recorded before a forget that erased its texts) the same result with its
  texts replaced by ``{"forgotten_at": n}`` markers, where ``n`` is the seq of
  a ``memory_forgotten`` entry written by a forget step *after* that step, and
  with none of the already forgotten memories' texts left in it (a forget
  erases per text, so the other memories' texts stay). Once a step prints in
  marker form, every later attempt prints it with at least those markers; and the steps that
  end in marker form are exactly those citing a memory a later step forgot (but
  stores, whose result holds no text).
* **The same results as an uninterrupted run.** The first printing of every
  step equals, byte for byte, what an uninterrupted run of the same script
  (same keys, same clock, fresh folder) returned live; replaying both completed
  runs once more prints identical bytes for every step.
* **Nothing written twice.** After every kill the ledger verifies; no step has
  two ``memory_tool_call`` entries or two memos; at the end each distinct
  stored content has exactly one ``memory_stored`` entry, and both folders'
  ledgers have the same number of entries of every kind.
* **The same memory.** Both folders' engine state hashes are equal (and equal
  to their recomputation from the projection rows), and the forgotten texts
  appear in no file of either data folder.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.memory import open_audit
from memseal.tools import ToolScope

pytestmark = pytest.mark.slow

FIXED = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
RUN_ID = "crash-agent"
PLACE = "team:acme/agent:writer"
MIN_KILLS = 10
BUDGET_S = 50.0  # the whole test, kills and the reference run included
ENCODER = msgspec.json.Encoder(order="deterministic")

# The memories the agent stores; the two forgets erase "dark mode" and the billing ones.
FACTS: list[tuple[str, str]] = [
    ("the deploy window is tuesday at ten", "ops"),
    ("alice prefers dark mode in every editor she uses", "ui"),
    ("invoices go out on the first working day of the month", "billing"),
    ("bob owns the payments service", "people"),
    ("the staging database is reset every night", "ops"),
    ("refunds above 500 euros need a second approver", "billing"),
    ("carol is on call during the deploy window", "people"),
    ("the mobile app uses a larger default font", "ui"),
    ("the incident channel is named war-room", "ops"),
    ("dave prefers written status updates", "people"),
    ("the billing export runs at midnight utc", "billing"),
    ("the design system lives in the ui-kit repository", "ui"),
]
FORGOTTEN_TEXTS = [FACTS[1][0], FACTS[2][0], FACTS[5][0], FACTS[10][0]]

# What an agent may legitimately get wrong: recorded, replayed as the same error.
RECORDED_ERRORS = (memseal.InvalidRequest, memseal.Unsupported, memseal.NotFound)


async def agent(folder: Path, emit: Callable[[int, Any], None]) -> None:
    """The scripted agent: deterministic given its results, as a replayed agent must be."""
    async with (
        memseal.open(folder, embedder=None, checkpoint_interval=None, clock=lambda: FIXED) as m,
        m.run(RUN_ID, ToolScope.placed_at(PLACE), mode="resume") as run,
    ):
        step = 0

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            nonlocal step
            try:
                outcome = await run.call(name, arguments)
            except RECORDED_ERRORS as exc:
                outcome = {"error": {"type": type(exc).__name__, "message": str(exc)}}
            emit(step, outcome)
            step += 1
            return outcome

        ids: list[str] = []
        for i, (text, tag) in enumerate(FACTS):
            stored = await call("memory_store", {"learning": {"text": text}, "tags": [tag]})
            ids.append(stored["id"])
            if i % 3 == 2:
                await call("memory_fetch", {"query": tag, "mode": "exact", "limit": 5})
                await call("memory_list", {"limit": 4})
        doc = await call(
            "memory_store",
            {"document": {"text": "runbook: restart the queue, then the workers", "title": "q"}},
        )
        await call(
            "memory_store",
            {
                "conversation": {
                    "turns": [
                        {"role": "user", "text": "can we move the deploy to wednesday"},
                        {"role": "assistant", "text": "only with carol's agreement"},
                    ]
                }
            },
        )
        # The same content again: a replayed store, which must not write a second memory.
        again = await call("memory_store", {"learning": {"text": FACTS[0][0]}, "tags": ["ops"]})
        assert again["id"] == ids[0]
        await call("memory_fetch", {"query": "", "mode": "exact"})  # invalid: empty query
        await call("memory_store", {"learning": {}})  # invalid: no text
        await call("memory_teleport", {"to": "mars"})  # invalid: no such tool
        await call("memory_get", {"ids": [ids[0], ids[1], doc["id"], "no-such-id"]})
        await call("memory_recall", {"question": "who prefers dark mode"})
        await call("memory_fetch", {"query": "dark mode", "mode": "exact"})
        await call("memory_explore", {"facet": "tag"})
        first = await call("memory_list", {"limit": 3})
        await call("memory_list", {"limit": 3, "cursor": first["next_cursor"]})
        await call("memory_fetch", {"query": "invoices", "mode": "exact"})
        await call("memory_recall", {"question": "when do invoices go out"})
        # Forget by id: every earlier step citing it is erased and replays as markers.
        await call("memory_forget", {"ids": [ids[1], "no-such-id"]})
        await call("memory_fetch", {"query": "dark mode", "mode": "exact"})
        await call("memory_get", {"ids": [ids[1], ids[3]]})
        await call("memory_forget", {})  # invalid: neither ids nor filter
        await call("memory_forget", {"filter": {}})  # invalid: an empty filter
        # Forget by filter: the billing memories.
        await call("memory_forget", {"filter": {"tags_any": ["billing"]}})
        await call("memory_explore", {"facet": "tag"})
        await call("memory_list", {"limit": 50})
        await call("memory_recall", {"question": "what happens on the first working day"})
        await call("memory_store", {"learning": {"text": "alice now prefers light mode"}})
        for word in ("deploy", "mode", "billing", "carol", "queue", "payments"):
            await call("memory_fetch", {"query": word, "mode": "exact", "limit": 3})
            await call("memory_explore", {"facet": "kind"})
        await call("memory_get", {"ids": ids[:6]})
        await call("memory_fetch", {"query": "x" * 2001})  # invalid: too long
        await call("memory_list", {"filter": {"kinds": ["document"]}})
        await call("memory_recall", {"question": "who is on call during the deploy window"})
        await call("memory_list", {"limit": 50})


def _print_step(step: int, outcome: Any) -> None:
    # One canonical line per completed step, flushed at once: the parent kills on these.
    sys.stdout.buffer.write(ENCODER.encode([step, outcome]) + b"\n")
    sys.stdout.buffer.flush()


# -- the parent ---------------------------------------------------------------------------------


def _collect(into: dict[int, bytes]) -> Callable[[int, Any], None]:
    """An ``emit`` for an in-process agent: each step's canonical bytes into ``into``."""

    def emit(step: int, outcome: Any) -> None:
        into[step] = ENCODER.encode(outcome)

    return emit


def _marked(first: Any, later: Any, seqs: set[int]) -> bool:
    """Whether ``later`` is ``first`` with some strings replaced by forgotten markers."""
    if first == later:
        return True
    if isinstance(first, str) and isinstance(later, dict) and set(later) == {"forgotten_at"}:
        seqs.add(later["forgotten_at"])
        return True
    if isinstance(first, dict) and isinstance(later, dict):
        return set(first) == set(later) and all(_marked(first[k], later[k], seqs) for k in first)
    if isinstance(first, list) and isinstance(later, list):
        return len(first) == len(later) and all(
            _marked(a, b, seqs) for a, b in zip(first, later, strict=True)
        )
    return False


async def _attempt(
    folder: Path, kill_after: int | None, rng: random.Random, deadline: float
) -> tuple[dict[int, bytes], bool]:
    """Run the agent once; SIGKILL it a random moment after it prints step ``kill_after``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        str(folder),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    printed: dict[int, bytes] = {}
    sent = False
    try:
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), deadline - time.monotonic())
            if not line.endswith(b"\n"):
                break  # EOF, or a line cut short by the kill: that step was never printed
            step, outcome = msgspec.json.decode(line)
            printed[step] = ENCODER.encode(outcome)
            if kill_after is not None and step >= kill_after and not sent:
                # Sometimes at once, sometimes a moment later: mid-way through the next step.
                await asyncio.sleep(rng.choice([0.0, 0.0005, 0.002, 0.005]))
                proc.kill()
                sent = True
        err = await proc.stderr.read()
        code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # A kill sent after the last step may find the agent already finished (exit code 0).
    assert code == 0 or (sent and code == -9), (code, err.decode()[-3000:])
    return printed, code == -9


async def _redacted_seqs(folder: Path, vkey: str) -> set[int]:
    """Every seq a signed entry's ``redacts`` erased."""
    found: set[int] = set()
    async with open_audit(folder) as ledger:
        async for record in ledger.scan():
            found.update(record.entry().redacts)
    return found


async def _ledger_facts(
    folder: Path, vkey: str
) -> tuple[Counter[str], Counter[int], int, dict[int, Any]]:
    """Kinds of entries, tool-call entries per step, memo rows, and the tool-call bodies.

    Read-only (no private key, nothing finished on the agent's behalf), after verifying
    the whole ledger against the instance's key.
    """
    kinds: Counter[str] = Counter()
    per_step: Counter[int] = Counter()
    calls: dict[int, Any] = {}
    async with open_audit(folder) as ledger:
        await ledger.verify(trust=vkey)
        async for record in ledger.scan():
            entry = record.entry()
            kinds[entry.kind] += 1
            if entry.kind == "memory_tool_call":
                body = msgspec.json.decode(bytes(entry.body))
                per_step[body["step"]] += 1
                calls[record.seq] = body
        memos = await ledger.store.rows("SELECT count(*) FROM memos WHERE run_id = ?", (RUN_ID,))
    return kinds, per_step, memos[0][0], calls


async def _state(folder: Path) -> tuple[str, str]:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        return await memory.engine.state_hash(), await memory.engine.recompute_state_hash()


def _files_containing(folder: Path, text: str) -> list[str]:
    needle = text.encode()
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_sigkilled_agent_resumes_to_the_same_results_and_state(tmp_path: Path) -> None:
    deadline = time.monotonic() + BUDGET_S
    # Random kill points, reproducible from the seed printed with any failure.
    seed = int(os.environ.get("MEMSEAL_CRASH_SEED") or int.from_bytes(os.urandom(4), "big"))
    rng = random.Random(seed)
    seed_note = f"(MEMSEAL_CRASH_SEED={seed})"
    crashed, reference = tmp_path / "crashed", tmp_path / "reference"
    async with memseal.open(crashed, embedder=None, checkpoint_interval=None) as memory:
        vkey = memory.vkey  # keys first, so the reference folder can share them
    shutil.copytree(crashed / "keys", reference / "keys")

    # The uninterrupted run first, in this process, same keys and clock: it fixes the length.
    live: dict[int, bytes] = {}
    await agent(reference, _collect(live))
    total = len(live)
    assert total >= 60 and sorted(live) == list(range(total))

    # Kill points spread over the whole script (forgets included), in order, plus two that
    # fall inside the part already recorded, so those kills land in a replay.
    plan = sorted(rng.sample(range(total - 1), MIN_KILLS))
    for _ in range(2):
        at = rng.randrange(1, len(plan))
        plan.insert(at + 1, rng.randint(0, plan[at]))
    attempts: list[dict[int, bytes]] = []
    kills = 0
    for kill_after in [*plan, None]:
        printed, killed = await _attempt(crashed, kill_after, rng, deadline)
        attempts.append(printed)
        kills += killed
        kinds, per_step, memos, _ = await _ledger_facts(crashed, vkey)  # verifies the ledger
        assert all(n == 1 for n in per_step.values()), f"a step recorded twice {seed_note}"
        assert memos == len(per_step), seed_note
        assert kinds["run_started"] == 1, seed_note
    assert kills >= MIN_KILLS, f"{kills} kills {seed_note}"
    assert sorted(attempts[-1]) == list(range(total)), seed_note

    kinds, per_step, memos, calls = await _ledger_facts(crashed, vkey)
    ref_kinds, _, ref_memos, _ = await _ledger_facts(reference, vkey)
    # The seq of each entry a call wrote -> the step that wrote it (forgets among them).
    written_by = {seq: body["step"] for body in calls.values() for seq in body["wrote"]}
    stored_ids = {
        body["result"]["id"]
        for body in calls.values()
        if body["tool"] == "memory_store" and not body["error"]
    }

    # Both completed runs, replayed once more in full (no live call left), print the same bytes.
    again: dict[str, dict[int, bytes]] = {}
    for name, folder in (("crashed", crashed), ("reference", reference)):
        again[name] = {}
        await agent(folder, _collect(again[name]))
    assert again["crashed"] == again["reference"]

    # The replay rule (see the module docstring), step by step across attempts, the full
    # replay last.
    first: dict[int, bytes] = {}
    first_attempt: dict[int, int] = {}
    marked: dict[int, bytes] = {}
    # A forget erases per text (each forgotten memory's texts, nothing else): the first
    # forget takes "dark mode", the second the billing memories.
    forget_steps = sorted(
        body["step"]
        for body in calls.values()
        if body["tool"] == "memory_forget" and not body["error"]
    )
    assert len(forget_steps) == 2, forget_steps
    texts_of = {forget_steps[0]: [FACTS[1][0]], forget_steps[1]: FORGOTTEN_TEXTS[1:]}
    for number, printed in enumerate([*attempts, again["crashed"]]):
        # The forgets already recorded when this attempt replayed its steps.
        gone = [
            t for f in forget_steps if first_attempt.get(f, number) < number for t in texts_of[f]
        ]
        for step, outcome in sorted(printed.items()):
            where = f"step {step}, attempt {number} {seed_note}"
            if step not in first:
                first[step] = outcome
                first_attempt[step] = number
                assert outcome == live[step], f"{where}: differs from the uninterrupted run"
                continue
            if outcome == first[step]:
                assert step not in marked, f"{where}: forgotten texts came back"
                continue
            seqs: set[int] = set()
            before, after = msgspec.json.decode(first[step]), msgspec.json.decode(outcome)
            assert _marked(before, after, seqs), f"{where}: changed beyond forgotten markers"
            for seq in seqs:
                assert seq in written_by and written_by[seq] > step, (
                    f"{where}: marker {seq} is not the entry of a later step's forget"
                )
            if step in marked:
                # A later forget marks more of the same result, never less.
                earlier = msgspec.json.decode(marked[step])
                assert _marked(earlier, after, set()), f"{where}: a forgotten text came back"
            assert not any(t in outcome.decode() for t in gone), where
            marked[step] = outcome
    assert len(first) == total
    # Exactly the steps that cited a memory some later step forgot replay as markers, but
    # for stores: their result ({"id", "replayed"}) holds no text, only their arguments did.
    tool_of = {body["step"]: body["tool"] for body in calls.values()}
    erased = {
        body["step"]
        for forget in calls.values()
        if forget["tool"] == "memory_forget" and not forget["error"]
        for body in calls.values()
        if body["step"] < forget["step"] and set(body["cites"]) & set(forget["result"]["forgotten"])
    }
    assert {1, 2} <= erased  # the stores of the first two forgotten facts, at least
    # A forget also erases recorded explores that showed a forgotten item's facet values
    # (tags): the ledger's own redactions are the full list, the cited ids a subset.
    redacted = await _redacted_seqs(crashed, vkey)
    by_ledger = {body["step"] for seq, body in calls.items() if seq in redacted}
    assert erased <= by_ledger
    assert all(tool_of[s] in ("memory_explore",) for s in by_ledger - erased), sorted(by_ledger)
    assert set(marked) == {s for s in by_ledger if tool_of[s] != "memory_store"}, (
        sorted(marked),
        sorted(by_ledger),
    )

    # Nothing written twice; both ledgers hold the same entries, kind by kind.
    # Twelve facts, a document, a conversation and the new "light mode" learning; the
    # duplicate store named an existing memory.
    assert len(stored_ids) == len(FACTS) + 3
    assert kinds["memory_stored"] == len(stored_ids)
    assert kinds == ref_kinds
    assert per_step == Counter(range(total)) and memos == ref_memos == total
    # The same memory, and the forgotten texts gone from both folders.
    crashed_state, reference_state = await _state(crashed), await _state(reference)
    assert crashed_state[0] == crashed_state[1] == reference_state[0] == reference_state[1]
    for text in FORGOTTEN_TEXTS:
        assert not _files_containing(crashed, text), text
        assert not _files_containing(reference, text), text
    assert time.monotonic() < deadline


if __name__ == "__main__":
    asyncio.run(agent(Path(sys.argv[1]), _print_step))
