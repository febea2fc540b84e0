"""Attacks on the memo table: it is a projection of the signed calls, and held to them.

The attacker can write the store's tables but holds no key. Each attack is
caught by ``memseal verify`` (exit 1, naming the memo), by ``Memory.verify``,
and by a resumed run, which never runs live a step that has a signed entry.
Every test runs on each store.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from attack_db import rows, run

from memseal import ProvenanceError, ToolScope
from memseal.cli import main
from memseal.ledger.errors import VerificationError
from memseal.memory import STORE_ENV, Memory

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("memory_store", {"learning": {"text": "the deploy key lives in vault path ops/deploy"}}),
    ("memory_fetch", {"query": "deploy key"}),
    ("memory_store", {"learning": {"text": "staging deploys need a second reviewer"}}),
    ("memory_store", {"learning": {"text": "rotate the deploy key every ninety days"}}),
    ("memory_fetch", {"query": "deploy"}),
]
RUN = "run-1"


async def record(memory: Memory, run_id: str = RUN, mode: str = "resume") -> list[Any]:
    async with memory.run(run_id, SCOPE, mode=mode) as durable:
        return [await durable.call(name, args) for name, args in CALLS]


def tool_calls(memory: Memory) -> int:
    # Entry kinds are inside the signed bytes; a call's body names its run.
    found = rows(memory, "SELECT leaf FROM entries ORDER BY seq")
    return sum(b'"kind":"memory_tool_call"' in bytes(r[0]) for r in found)


async def cli_verify(memory: Memory, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    store: Any = memory.ledger.store
    if store.dialect == "postgresql":
        monkeypatch.setenv(STORE_ENV, memory.location)
        monkeypatch.setenv(STORE_ENV, _url(memory))
    argv = ["verify", str(memory.folder), "--trust", memory.trust_root, *extra]
    return await asyncio.to_thread(main, argv)


def _url(memory: Memory) -> str:
    store: Any = memory.ledger.store
    joiner = "&" if "?" in store.dsn else "?"
    return f"{store.dsn}{joiner}schema={store.schema}"


async def test_deleted_memo_row_fails_verify(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    await record(memory)
    await memory.verify()
    assert await cli_verify(memory, monkeypatch) == 0
    run(memory, "DELETE FROM memos WHERE run_id = ? AND step = 3", (RUN,))
    with pytest.raises(VerificationError, match="step 3 of run 'run-1' is recorded") as caught:
        await memory.verify()
    assert caught.value.step == "memo"
    capsys.readouterr()
    assert await cli_verify(memory, monkeypatch) == 1
    assert "step 3 of run 'run-1'" in capsys.readouterr().err


async def test_deleted_memo_row_is_restored_on_resume_not_run_live(memory: Memory) -> None:
    first = await record(memory)
    calls = tool_calls(memory)
    run(memory, "DELETE FROM memos WHERE run_id = ? AND step = 3", (RUN,))
    async with memory.run(RUN, SCOPE) as durable:
        again = [await durable.call(name, args) for name, args in CALLS]
        assert durable.restored == [3]
    assert again == first
    assert tool_calls(memory) == calls  # nothing ran live: no new signed call
    await memory.verify()  # the row is back, pointing at the step's signed call


async def test_deleted_memo_row_is_restored_in_strict_mode(memory: Memory) -> None:
    first = await record(memory)
    run(memory, "DELETE FROM memos WHERE run_id = ? AND step = 4", (RUN,))
    assert await record(memory, mode="strict") == first
    await memory.verify()


async def test_every_memo_row_deleted_replays_the_whole_run(memory: Memory) -> None:
    first = await record(memory)
    calls = tool_calls(memory)
    run(memory, "DELETE FROM memos")
    assert await record(memory) == first
    assert tool_calls(memory) == calls


async def test_memo_pointed_at_another_steps_call_fails_verify_and_resume(
    memory: Memory,
) -> None:
    await record(memory)
    other = rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 2", (RUN,))[0][0]
    run(memory, "UPDATE memos SET seq = ? WHERE run_id = ? AND step = 3", (other, RUN))
    with pytest.raises(VerificationError, match="not at the step's current call"):
        await memory.verify()
    with pytest.raises(ProvenanceError):
        await record(memory)


async def test_memo_rolled_back_to_a_superseded_call_fails_verify_and_is_repointed(
    memory: Memory,
) -> None:
    # The old call verifies on its own (same run, step and key, signed): only the
    # signed supersedes chain shows it is not the step's current result.
    await record(memory)
    old = rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 1", (RUN,))[0][0]
    async with memory.run(RUN, SCOPE) as durable:
        for step, (name, args) in enumerate(CALLS):
            await durable.call(name, args, revalidate=step == 1)
    current = rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 1", (RUN,))[0][0]
    await memory.verify()  # the revalidated call supersedes the old one
    run(memory, "UPDATE memos SET seq = ? WHERE run_id = ? AND step = 1", (old, RUN))
    with pytest.raises(VerificationError, match="not at the step's current call"):
        await memory.verify()
    async with memory.run(RUN, SCOPE) as durable:
        assert durable.restored == [1]
    assert rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 1", (RUN,)) == [
        (current,)
    ]
    await memory.verify()


async def test_forged_memo_row_for_an_unrecorded_step_fails_verify(memory: Memory) -> None:
    await record(memory)
    seq = rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 4", (RUN,))[0][0]
    key = rows(memory, "SELECT memo_key FROM memos WHERE run_id = ? AND step = 4", (RUN,))[0][0]
    run(
        memory,
        "INSERT INTO memos (run_id, step, memo_key, seq) VALUES (?, ?, ?, ?)",
        (RUN, 9, key, seq),
    )
    with pytest.raises(VerificationError, match="another step's memo key"):
        await memory.verify()


async def test_rerun_after_deleting_run_and_memos_leaves_two_calls_per_step_and_fails_verify(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deleting the run's row and its memos makes the run look new; its steps run live
    # again beside their signed first calls. Verify names the doubled step.
    await record(memory)
    run(memory, "DELETE FROM memos")
    run(memory, "DELETE FROM runs")
    await record(memory)
    with pytest.raises(VerificationError, match="step 0 of run 'run-1' has 2 unsuperseded"):
        await memory.verify()
    assert await cli_verify(memory, monkeypatch) == 1


async def test_moved_run_start_is_refused_on_resume(memory: Memory) -> None:
    # A later start would hide the calls before it from the resume's look-up.
    await record(memory)
    last = rows(memory, "SELECT max(seq) FROM entries")[0][0]
    run(memory, "UPDATE runs SET started_seq = ? WHERE run_id = ?", (last, RUN))
    run(memory, "DELETE FROM memos WHERE run_id = ? AND step = 3", (RUN,))
    with pytest.raises(ProvenanceError) as caught:
        await record(memory)
    # Refused where it is first read: the scope check of the run's signed start, or the
    # memo reconciliation, whichever meets the moved row first.
    assert re.search(
        "is not the signed start|run_started entry does not check", caught.value.detail
    )


# -- the other tables derived from the signed entries (runs, redactions) ----------------


async def record_and_forget(memory: Memory) -> None:
    stored = (await record(memory))[0]
    async with memory.run("run-2", SCOPE) as durable:
        await durable.call("memory_forget", {"ids": [stored["id"]]})


async def test_deleted_redactions_fail_verify(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    await record_and_forget(memory)
    await memory.verify()
    assert rows(memory, "SELECT count(*) FROM redactions")[0][0] > 0
    run(memory, "DELETE FROM redactions")
    with pytest.raises(VerificationError, match="the signed entries say by") as caught:
        await memory.verify()
    assert caught.value.step == "redaction"
    capsys.readouterr()
    assert await cli_verify(memory, monkeypatch) == 1
    assert "redaction" in capsys.readouterr().err


async def test_redaction_credited_to_another_entry_fails_verify(memory: Memory) -> None:
    await record_and_forget(memory)
    run(memory, "UPDATE redactions SET by_seq = by_seq - 1")
    with pytest.raises(VerificationError, match="redactions table says"):
        await memory.verify()


async def test_edited_run_start_fails_verify(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await record(memory)
    run(memory, "UPDATE runs SET started_seq = started_seq + 1 WHERE run_id = ?", (RUN,))
    with pytest.raises(VerificationError, match="starts at seq") as caught:
        await memory.verify()
    assert caught.value.step == "runs"
    assert await cli_verify(memory, monkeypatch) == 1


async def test_deleted_runs_row_fails_verify(memory: Memory) -> None:
    await record(memory)
    run(memory, "DELETE FROM runs WHERE run_id = ?", (RUN,))
    with pytest.raises(VerificationError, match="starts at seq None in the runs table"):
        await memory.verify()


# -- signed bytes swapped under their kept hash and signature ---------------------------


def swap_leaf_bytes(memory: Memory, seq: int) -> None:
    """Change one digit of the entry's time: it still decodes, canonical, and its stored
    hash and signature (both kept) are those of the bytes as they were."""
    leaf = bytes(rows(memory, "SELECT leaf FROM entries WHERE seq = ?", (seq,))[0][0])
    at = leaf.index(b'"at":"') + len(b'"at":"2026-')
    swapped = leaf[:at] + (b"0" if leaf[at : at + 1] != b"0" else b"1") + leaf[at + 1 :]
    run(memory, "UPDATE entries SET leaf = ? WHERE seq = ?", (swapped, seq))


async def test_swapped_call_bytes_are_not_restored_as_a_memo(memory: Memory) -> None:
    # The resume puts back a lost memo row from the step's signed call; it used to trust
    # the stored hash the signature covers and restore a row for bytes nobody signed.
    await record(memory)
    seq = rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 3", (RUN,))[0][0]
    run(memory, "DELETE FROM memos WHERE run_id = ? AND step = 3", (RUN,))
    swap_leaf_bytes(memory, seq)
    with pytest.raises(ProvenanceError) as caught:
        async with memory.run(RUN, SCOPE):
            pass
    assert caught.value.seq == seq
    assert "stored hash" in caught.value.detail
    assert rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 3", (RUN,)) == []


@pytest.mark.parametrize("which", ["start", "call"])
async def test_swapped_bytes_are_refused_by_every_reader(memory: Memory, which: str) -> None:
    # The run's signed start (the scope check and the memo look-up read it) and a memo's
    # call (replayed through check_memo): each reader refuses bytes under a kept hash.
    await record(memory)
    if which == "start":
        seq = rows(memory, "SELECT started_seq FROM runs WHERE run_id = ?", (RUN,))[0][0]
    else:
        seq = rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 3", (RUN,))[0][0]
    swap_leaf_bytes(memory, seq)
    with pytest.raises(ProvenanceError) as caught:
        await record(memory)
    assert caught.value.seq == seq
    assert re.search("stored hash|run_started entry does not check", caught.value.detail)
    with pytest.raises(VerificationError, match="stored leaf hash") as audit:
        await memory.verify()
    assert (audit.value.seq, audit.value.step) == (seq, "stored hash")
