"""Durable runs on a real data folder: memos checked against signed entries.

Tamper cases each end in exactly ``memory memo missing matching signed
provenance``, and ``revalidate=True`` recovers from them with a new signed
entry. Forgotten texts replay as markers and are gone from the files.
Every test runs on each store (the folder's SQLite file, and PostgreSQL when
the test server is there); the tampering goes straight to the store's tables.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal import ProvenanceError, ReplayDivergence, ToolScope
from memseal.memory import Memory
from memseal.replay.runs.calls import decode_tool_call

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
MESSAGE = "memory memo missing matching signed provenance"
STORE = {"learning": {"text": "the deploy key lives in vault path ops/deploy"}}
FETCH = {"query": "deploy key"}


@pytest.fixture
async def memory(tmp_path: Path, store_url: str | None) -> AsyncIterator[Memory]:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=None, checkpoint_interval=None
    ) as opened:
        yield opened


async def record(memory: Memory, run_id: str = "run-1") -> list[Any]:
    async with memory.run(run_id, SCOPE) as run:
        return [await run.call("memory_store", STORE), await run.call("memory_fetch", FETCH)]


class _Postgres:
    """A PostgreSQL connection in the store's schema that takes SQLite's ``?`` placeholders."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(statement.replace("?", "%s"), params)


@contextlib.contextmanager
def db(memory: Memory) -> Iterator[Any]:
    """A connection of its own to the store's tables, behind the memory's back."""
    store: Any = memory.ledger.store
    if store.dialect == "sqlite":
        with contextlib.closing(
            sqlite3.connect(memory.folder / "ledger.db", isolation_level=None)
        ) as conn:
            yield conn
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        yield _Postgres(conn)


def memo_seq(memory: Memory, run_id: str, step: int) -> int:
    with db(memory) as conn:
        return int(
            conn.execute(
                "SELECT seq FROM memos WHERE run_id = ? AND step = ?", (run_id, step)
            ).fetchone()[0]
        )


async def replay_step_1(memory: Memory, *, revalidate: bool = False) -> Any:
    async with memory.run("run-1", SCOPE) as run:
        await run.call("memory_store", STORE)
        return await run.call("memory_fetch", FETCH, revalidate=revalidate)


async def test_a_resumed_run_gets_its_recorded_results_and_writes_nothing(memory: Memory) -> None:
    first = await record(memory)
    size = await memory.ledger.size()
    again = await record(memory)
    assert again == first
    assert await memory.ledger.size() == size  # replayed: no entry, no write
    summary = await memory.ledger.verify()
    assert summary.size == size


def _tamper_memo_seq(memory: Memory) -> None:
    with db(memory) as conn:
        conn.execute("UPDATE memos SET seq = seq - 1 WHERE run_id = 'run-1' AND step = 1")


def _tamper_memo_key(memory: Memory) -> None:
    with db(memory) as conn:
        conn.execute("UPDATE memos SET memo_key = 'ab' || substr(memo_key, 3) WHERE step = 1")


def _tamper_payload(memory: Memory) -> None:
    seq = memo_seq(memory, "run-1", 1)
    with db(memory) as conn:
        data = bytearray(
            conn.execute("SELECT data FROM payloads WHERE seq = ?", (seq,)).fetchone()[0]
        )
        data[len(data) // 2] ^= 0x01
        conn.execute("UPDATE payloads SET data = ? WHERE seq = ?", (bytes(data), seq))


def _tamper_signature(memory: Memory) -> None:
    seq = memo_seq(memory, "run-1", 1)
    with db(memory) as conn:
        sig = bytearray(conn.execute("SELECT sig FROM entries WHERE seq = ?", (seq,)).fetchone()[0])
        sig[5] ^= 0x80
        conn.execute("UPDATE entries SET sig = ? WHERE seq = ?", (bytes(sig), seq))


def _point_at_another_run(memory: Memory) -> None:
    other = memo_seq(memory, "run-2", 1)
    with db(memory) as conn:
        conn.execute("UPDATE memos SET seq = ? WHERE run_id = 'run-1' AND step = 1", (other,))


def _memo_at_a_plain_entry(memory: Memory) -> None:
    with db(memory) as conn:
        conn.execute("UPDATE memos SET seq = 0 WHERE run_id = 'run-1' AND step = 1")


@pytest.mark.parametrize(
    "tamper",
    [
        _tamper_memo_seq,
        _tamper_memo_key,
        _tamper_payload,
        _tamper_signature,
        _point_at_another_run,
        _memo_at_a_plain_entry,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
async def test_a_tampered_memo_fails_loudly_and_revalidate_recovers(
    memory: Memory, tamper: Any
) -> None:
    first = await record(memory)
    await record(memory, "run-2")
    tamper(memory)
    with pytest.raises(ProvenanceError) as caught:
        await replay_step_1(memory)
    assert str(caught.value) == MESSAGE
    size = await memory.ledger.size()
    fresh = await replay_step_1(memory, revalidate=True)
    assert fresh["hits"][0]["text"] == first[1]["hits"][0]["text"]
    assert await memory.ledger.size() == size + 1  # one new signed entry...
    record_ = await memory.ledger.read(memo_seq(memory, "run-1", 1))
    call = decode_tool_call(bytes(record_.entry().body))
    assert call.supersedes is not None  # ...that supersedes the old one
    assert await replay_step_1(memory) == fresh  # and the memo now replays it


async def test_a_different_call_at_a_recorded_step_diverges(memory: Memory) -> None:
    await record(memory)
    async with memory.run("run-1", SCOPE) as run:
        await run.call("memory_store", STORE)
        with pytest.raises(ReplayDivergence) as caught:
            await run.call("memory_fetch", {"query": "vault"})
    error = caught.value
    assert error.run_id == "run-1" and error.step == 1
    assert error.diff == ("arguments.query: 'deploy key' -> 'vault'",)
    assert error.recorded == {"tool": "memory_fetch", "arguments": FETCH}


async def test_a_forked_run_goes_live_from_the_divergence(memory: Memory) -> None:
    await record(memory)
    async with memory.run("run-1", SCOPE, fork=True) as run:
        await run.call("memory_store", STORE)
        live = await run.call("memory_fetch", {"query": "vault"})
    assert live["hits"]
    kinds = [r.entry().kind async for r in memory.ledger.scan()]
    assert "run_forked" in kinds


async def test_strict_fails_past_the_end_and_on_unconsumed_steps(memory: Memory) -> None:
    await record(memory)
    run = memory.run("run-1", SCOPE, mode="strict")
    await run.call("memory_store", STORE)
    with pytest.raises(ReplayDivergence, match="never replayed"):
        await run.close()
    async with memory.run("run-1", SCOPE, mode="strict") as run:
        await run.call("memory_store", STORE)
        await run.call("memory_fetch", FETCH)
        with pytest.raises(ReplayDivergence, match="past the recorded end"):
            await run.call("memory_list", {})


async def test_revalidate_mode_reports_what_changed(memory: Memory) -> None:
    await record(memory)
    await memory.tools(SCOPE).call(
        "memory_store", {"learning": {"text": "a second deploy key lives in ops/deploy-b"}}
    )
    async with memory.run("run-1", SCOPE, mode="revalidate") as run:
        await run.call("memory_store", STORE)
        await run.call("memory_fetch", FETCH)
    # The store now finds its memory already there; the fetch finds a second hit.
    assert [c.step for c in run.changes] == [0, 1]
    assert run.changes[0].diff == ("replayed: False -> True",)
    assert any(line.startswith("hits") for line in run.changes[1].diff)


async def test_bad_input_appends_only_an_error_flagged_entry(memory: Memory) -> None:
    before = await memory.engine.state_hash()
    size = await memory.ledger.size()
    async with memory.run("run-bad", SCOPE) as run:
        with pytest.raises(memseal.InvalidRequest, match="memory_list"):
            await run.call("memory_list", {"limit": 500, "namespace": "team:other"})
    assert await memory.engine.state_hash() == before
    entries = [r.entry() async for r in memory.ledger.scan(size)]
    assert [e.kind for e in entries] == ["run_started", "memory_tool_call"]
    assert decode_tool_call(bytes(entries[1].body)).error is True
    # ...and replays as the same error, without another entry.
    async with memory.run("run-bad", SCOPE) as run:
        with pytest.raises(memseal.InvalidRequest, match="memory_list"):
            await run.call("memory_list", {"limit": 500, "namespace": "team:other"})
    assert await memory.ledger.size() == size + 2


async def test_junk_arguments_are_recorded_so_the_run_resumes_past_them(memory: Memory) -> None:
    async with memory.run("run-junk", SCOPE) as run:
        with pytest.raises(memseal.InvalidRequest):
            await run.call("memory_list", "{not json")
        listed = await run.call("memory_list", {})
    size = await memory.ledger.size()
    async with memory.run("run-junk", SCOPE, mode="strict") as run:
        with pytest.raises(memseal.InvalidRequest):
            await run.call("memory_list", "{not json")
        assert await run.call("memory_list", {}) == listed
    assert await memory.ledger.size() == size


async def test_unknown_modes_and_bad_run_ids_are_refused(memory: Memory) -> None:
    with pytest.raises(memseal.InvalidRequest, match="mode"):
        memory.run("r", SCOPE, mode="replay")
    with pytest.raises(memseal.InvalidRequest, match="run_id"):
        memory.run("", SCOPE)


async def test_a_call_outside_a_run_gets_a_fresh_run_id(memory: Memory) -> None:
    size = await memory.ledger.size()
    run_id, result = await memory.call("memory_store", STORE, scope=SCOPE)
    assert run_id.startswith("run-") and result["replayed"] is False
    # Started, recorded and released in one go: its entries, and no lease left behind.
    kinds = [r.entry().kind async for r in memory.ledger.scan(size)]
    assert kinds == ["run_started", "memory_stored", "memory_tool_call"]
    with db(memory) as conn:
        holder = conn.execute("SELECT holder FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    assert holder == (None,)
    async with memory.run(run_id, SCOPE, mode="strict") as replayed:  # and it replays
        assert await replayed.call("memory_store", STORE) == result
    again_id, again = await memory.call("memory_store", STORE, scope=SCOPE)
    assert again_id != run_id and again["replayed"] is True


async def test_a_forgotten_text_replays_as_a_marker_and_leaves_the_files(
    memory: Memory,
) -> None:
    stored, fetched = await record(memory)
    assert fetched["hits"][0]["text"] == STORE["learning"]["text"]
    forget = await memory.tools(SCOPE).call("memory_forget", {"ids": [stored["id"]]})
    assert forget == {"forgotten": [stored["id"]], "skipped": []}
    await memory.engine.scrub()
    replayed = await record(memory)
    hit = replayed[1]["hits"][0]
    assert set(hit["text"]) == {"forgotten_at"}
    assert isinstance(hit["text"]["forgotten_at"], int)
    assert replayed[0] == stored  # the store's own result holds no text
    await memory.ledger.verify()
    secret = b"vault path ops/deploy"
    for path in memory.folder.rglob("*"):
        if path.is_file():
            assert secret not in path.read_bytes(), path


async def test_explicit_steps_are_served_at_their_position(memory: Memory) -> None:
    async with memory.run("run-steps", SCOPE) as run:
        # A step beyond the next one would leave a gap: refused, naming the step expected.
        with pytest.raises(memseal.Conflict, match="the next step is 0"):
            await run.call_at(1, "memory_list", {})
        first = await run.call_at(0, "memory_store", STORE)
        second = await run.call_at(1, "memory_list", {})
        third = await run.call("memory_list", {})  # numbered after the highest explicit step
    async with memory.run("run-steps", SCOPE, mode="strict") as replayed:
        assert await replayed.call("memory_store", STORE) == first
        assert await replayed.call("memory_list", {}) == second
        assert await replayed.call("memory_list", {}) == third
    with pytest.raises(memseal.InvalidRequest, match="step"):
        memory.run("run-x", SCOPE).call_at(-1, "memory_list", {})
