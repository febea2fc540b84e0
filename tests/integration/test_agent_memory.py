"""AgentMemory end to end: the four moments over real runs, their quality, and crashes.

* A session (start, turns, compaction, brief) on SQLite and PostgreSQL: every
  moment is recorded, a resumed session gets the same packs, a strict replay
  passes, and the ledger verifies.
* Memory quality: a scripted conversation of forty turns that states facts,
  changes some, and asks about them; the pre-turn context of each question
  must hold the current fact and not the superseded one (recall@5 and the
  stale-fact rate are printed and held to a threshold).
* Kill and resume: the session in a subprocess, SIGKILLed after a pre-turn
  and restarted, gives the same brief and contexts, logs no turn twice, and
  replays strictly.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.apps.lifecycle import AgentMemory, ContextPack, MemoryLayout
from memseal.engine import HashingEmbedder, Reach
from memseal.ledger.errors import InvalidRequest, ReplayDivergence
from memseal.memory import STORE_ENV

LAYOUT = MemoryLayout(tenant="acme")
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
HERE = Path(__file__).parent


@pytest.fixture
async def memory(
    tmp_path: Path, store_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[memseal.Memory]:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)
    async with memseal.open(
        tmp_path / "data", embedder=HashingEmbedder(dim=64), checkpoint_interval=None
    ) as opened:
        yield opened


async def _session(memory: memseal.Memory, mode: str = "resume") -> list[str]:
    seen: list[str] = []
    async with AgentMemory(memory, LAYOUT, agent="helper", thread="t1", mode=mode) as session:
        seen.append((await session.start()).markdown())
        for turn, message in enumerate(
            ["I live in Berlin.", "I moved to Lisbon.", "Where do I live?", "Bye."]
        ):
            pack = await session.pre_turn(message, turn=turn, at=AT)
            seen.append(pack.markdown())
            await session.post_turn(turn=turn, user=message, assistant="Okay.")
        compacted = await session.compact(turn=3, keep=1)
        seen.append(" ".join(compacted.folded))
        seen.append(await session.briefing())
    return seen


async def test_a_session_is_recorded_resumed_and_replayed_strictly(
    memory: memseal.Memory,
) -> None:
    await memory.tools(LAYOUT.brain_writer("handbook")).call(
        "memory_store", {"document": {"text": "Relocation guide: update your address."}}
    )
    first = await _session(memory)
    where = first[3]
    assert "Lisbon" in where and "Berlin" not in where
    assert len(first[-2].split()) == 3  # three turns folded, the newest kept
    # Re-driven from the top: every moment is its memo, nothing is logged again.
    assert await _session(memory) == first
    assert await _session(memory, mode="strict") == first
    thread = await memory.engine.list(
        filter={"kinds": ["conversation"]}, reach=Reach.exact(LAYOUT.thread("helper", "t1"))
    )
    assert len(thread.items) == 4
    summaries = await memory.engine.list(
        filter={"kinds": ["context_summary"]}, reach=Reach.exact(LAYOUT.thread("helper", "t1"))
    )
    assert len(summaries.items) == 1 and "Lisbon" in summaries.items[0].text
    await memory.verify(memory.trust_root)


async def test_a_resumed_session_that_asks_another_message_diverges(
    memory: memseal.Memory,
) -> None:
    async with AgentMemory(memory, LAYOUT, agent="helper", thread="t2") as session:
        await session.pre_turn("I live in Berlin.", turn=0, at=AT)
    async with AgentMemory(memory, LAYOUT, agent="helper", thread="t2") as session:
        with pytest.raises(ReplayDivergence):
            await session.pre_turn("I live in Paris.", turn=0, at=AT)


async def test_bad_moments_are_refused_naming_the_field(memory: memseal.Memory) -> None:
    with pytest.raises(InvalidRequest, match="`agent`"):
        AgentMemory(memory, LAYOUT, agent="a b", thread="t")
    async with AgentMemory(memory, LAYOUT, agent="helper", thread="t3") as session:
        with pytest.raises(InvalidRequest, match="`turn`"):
            await session.pre_turn("hi", turn=-1)
        with pytest.raises(InvalidRequest, match="`message`"):
            await session.pre_turn("  ", turn=0)
        with pytest.raises(InvalidRequest, match="`at`"):
            await session.pre_turn("hi", turn=0, at=datetime(2026, 1, 1))
        with pytest.raises(InvalidRequest, match="a turn needs"):
            await session.post_turn(turn=0)
        with pytest.raises(InvalidRequest, match=r"`messages\[0\]`"):
            await session.post_turn(turn=0, messages=[{"role": "user"}])
        with pytest.raises(InvalidRequest, match="`keep`"):
            await session.compact(turn=0, keep=-1)
        assert (await session.compact(turn=0)).summary_id is None


async def test_pre_turn_reads_the_days_a_message_names(memory: memseal.Memory) -> None:
    async with AgentMemory(memory, LAYOUT, agent="helper", thread="t4") as session:
        await session.post_turn(turn=0, user="On 2026-11-30 we shipped the billing fix.")
        pack = await session.pre_turn("What happened yesterday?", turn=1, at=AT)
        assert "billing fix" in pack.markdown()
    rows = await memory.ledger.store.rows(
        "SELECT seq FROM memos WHERE run_id = ? ORDER BY step", ("helper.t4/thread",)
    )
    bodies = [
        json.loads(bytes((await memory.ledger.read(int(r[0]))).payload or b"{}")) for r in rows
    ]
    sent = [b.get("arguments", {}) for b in bodies]
    assert {"from": "2026-11-30", "to": "2026-11-30"} in [a.get("refers_to") for a in sent]


# -- memory quality ---------------------------------------------------------------------

# (turn text, question?, current word, superseded word)
SCRIPT: list[tuple[str, str | None, str | None]] = [
    ("Hi, my name is Ana.", None, None),
    ("I live in Berlin.", None, None),
    ("I work at Siemens as a backend engineer.", None, None),
    ("My favourite editor is vim.", None, None),
    ("My manager is Tom.", None, None),
    ("The deploy pipeline runs on Tuesdays.", None, None),
    ("My dog is called Rex.", None, None),
    ("Can you help me plan a trip?", None, None),
    ("I like trains more than planes.", None, None),
    ("Where do I live?", "Berlin", None),
    ("What is my name?", "Ana", None),
    ("When does the deploy pipeline run?", "Tuesdays", None),
    ("I moved to Lisbon last month.", None, None),
    ("Let us talk about lunch options.", None, None),
    ("Something light, please.", None, None),
    ("Where do I live now?", "Lisbon", "Berlin"),
    ("I joined Google this week.", None, None),
    ("Who is my manager?", "Tom", None),
    ("Where do I work?", "Google", "Siemens"),
    ("My favourite editor is helix now.", None, None),
    ("Which editor is my favourite?", "helix", "vim"),
    ("My manager is Priya since the reorg.", None, None),
    ("Tell me a joke.", None, None),
    ("That was a good one.", None, None),
    ("Who is my manager now?", "Priya", "Tom"),
    ("What is my dog called?", "Rex", None),
    ("Remind me where I live.", "Lisbon", "Berlin"),
    ("Write a haiku about autumn.", None, None),
    ("Make it shorter.", None, None),
    ("Where do I work these days?", "Google", "Siemens"),
    ("My dog is called Max now; the old one went to my sister.", None, None),
    ("What is my dog called now?", "Max", "Rex"),
    ("Which editor do I like best?", "helix", "vim"),
    ("When does the deploy pipeline run again?", "Tuesdays", None),
    ("I moved again, to Porto.", None, None),
    ("Where am I based?", "Porto", "Lisbon"),
    ("Thanks for the help today.", None, None),
    ("What is my name again?", "Ana", None),
    ("Who manages me?", "Priya", "Tom"),
    ("Bye for now.", None, None),
]


def _quality(questions: list[tuple[ContextPack, str, str | None]], k: int) -> tuple[float, float]:
    hits = stale = 0
    with_stale = 0
    for pack, current, superseded in questions:
        items = [item for section in pack.sections for item in section.items][:k]
        hits += any(current.casefold() in item.text.casefold() for item in items)
        if superseded is not None:
            with_stale += 1
            stale += superseded.casefold() in pack.markdown().casefold()
    return hits / len(questions), stale / max(with_stale, 1)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_memory_quality_of_a_forty_turn_conversation(memory: memseal.Memory) -> None:
    asked: list[tuple[ContextPack, str, str | None]] = []
    assert len(SCRIPT) == 40
    async with AgentMemory(memory, LAYOUT, agent="helper", thread="q") as session:
        for turn, (text, current, superseded) in enumerate(SCRIPT):
            pack = await session.pre_turn(text, turn=turn, at=AT)
            if current is not None:
                asked.append((pack, current, superseded))
            await session.post_turn(turn=turn, user=text, assistant="Okay.")
            if turn % 10 == 9:
                await session.compact(turn=turn, keep=4)
    recall, stale = _quality(asked, k=5)
    print(f"\nmemory quality: {len(asked)} questions, recall@5 {recall:.2f}, stale {stale:.2f}")
    assert recall >= 0.9
    assert stale == 0.0


# -- kill and resume --------------------------------------------------------------------


def _moments(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _shown(moments: list[dict[str, Any]]) -> list[str]:
    """The brief and the contexts a session handed its model, ids left out."""
    return [
        re.sub(r"[0-9a-f]{32}", "<id>", m["value"])
        for m in moments
        if m["moment"] in ("start", "brief", "pre")
    ]


def _script(data: Path, mode: str, out: Path, *pause: int) -> list[str]:
    return [sys.executable, str(HERE / "lifecycle_session.py"), str(data), mode, str(out)] + [
        str(p) for p in pause
    ]


def test_a_session_killed_mid_turn_resumes_identically(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != STORE_ENV}
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    subprocess.run(_script(clean, "resume", tmp_path / "clean.jsonl"), check=True, env=env)
    expected = _moments(tmp_path / "clean.jsonl")
    # Killed after the pre-turn of turn 6, before that turn is logged.
    first = subprocess.Popen(
        _script(killed, "resume", tmp_path / "a.jsonl", 6), stdout=subprocess.PIPE, env=env
    )
    assert first.stdout is not None
    assert first.stdout.readline().strip() == b"PAUSED"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    first.stdout.close()
    subprocess.run(_script(killed, "resume", tmp_path / "b.jsonl"), check=True, env=env)
    before, after = _moments(tmp_path / "a.jsonl"), _moments(tmp_path / "b.jsonl")
    assert after[: len(before)] == before  # the same brief and contexts
    # As an uninterrupted session's (ids are keyed by each folder's own secret).
    assert _shown(after) == _shown(expected)
    # CI: the whole session replays strictly from its memos.
    subprocess.run(_script(killed, "strict", tmp_path / "c.jsonl"), check=True, env=env)
    assert _moments(tmp_path / "c.jsonl") == after
    rows, turns = asyncio.run(_count(killed))
    assert turns == 12  # every turn once
    clean_rows, _ = asyncio.run(_count(clean))
    assert rows == clean_rows  # no call recorded twice: as many as an uninterrupted session


async def _count(data: Path) -> tuple[list[Any], int]:
    """Memo rows per run, and turns logged in the thread; the ledger verified."""
    async with memseal.open(data, embedder=HashingEmbedder(dim=64)) as memory:
        turns = await memory.engine.list(
            filter={"kinds": ["conversation"]},
            reach=Reach.exact(LAYOUT.thread("helper", "t1")),
            limit=50,
        )
        rows = await memory.ledger.store.rows(
            "SELECT run_id, count(*) FROM memos GROUP BY run_id ORDER BY run_id"
        )
        await memory.verify(memory.trust_root)
    return list(rows), len(turns.items)


# -- served: HTTP routes and MCP ----------------------------------------------------------


def test_the_four_moments_over_http(tmp_path: Path) -> None:
    from test_service_support import ServerThread, assert_error

    with ServerThread(tmp_path / "data") as server:
        token = server.token("agent", "team:acme/agent:helper", reach="subtree:team:acme")
        narrow = server.token("agent", "team:acme/agent:other")
        reader = server.token(
            "agent", "team:acme/agent:ro", reach="subtree:team:acme", read_only=True
        )
        with server.client(token) as c:
            r = c.post("/v1/sessions/t1/start", json={})
            assert r.status_code == 200, r.text
            assert r.json()["markdown"] == "" and "# Your memory" in r.json()["brief"]
            for turn, message in enumerate(["I live in Berlin.", "I moved to Lisbon."]):
                r = c.post(
                    "/v1/sessions/t1/pre-turn",
                    json={"message": message, "turn": turn, "at": "2026-12-01T09:00:00Z"},
                )
                assert r.status_code == 200, r.text
                r = c.post(
                    "/v1/sessions/t1/post-turn",
                    json={"turn": turn, "user": message, "assistant": "Okay."},
                )
                assert r.status_code == 200, r.text
                assert len(r.json()["build"]["source_ids"]) == 1
            asked = {"message": "Where do I live?", "turn": 2, "at": "2026-12-01T09:00:00Z"}
            r = c.post("/v1/sessions/t1/pre-turn", json=asked)
            shown = r.json()["markdown"]
            assert "Lisbon" in shown and "Berlin" not in shown
            assert r.json()["pack"]["tokens"] <= r.json()["pack"]["budget_tokens"]
            # The same moment again: the recorded answer, not a new read.
            assert c.post("/v1/sessions/t1/pre-turn", json=asked).json() == r.json()
            again = c.post(
                "/v1/sessions/t1/post-turn",
                json={"turn": 1, "user": "I moved to Lisbon.", "assistant": "Okay."},
            )
            assert again.status_code == 200
            r = c.post("/v1/sessions/t1/compact", json={"turn": 2, "keep": 1})
            assert r.status_code == 200 and len(r.json()["folded"]) == 1
            assert_error(c.post("/v1/sessions/t1/pre-turn", json={"turn": 3}), 400)
            assert_error(
                c.post(
                    "/v1/sessions/t1/pre-turn", json={"message": "x", "turn": 3, "reach": "all"}
                ),
                400,
            )
            assert_error(c.post("/v1/sessions/bad%20name/start", json={}), 400)
        with server.client(narrow) as c:
            r = assert_error(c.post("/v1/sessions/t1/start", json={}), 403)
            assert "`thread` reach" in r["error"]["message"]
        with server.client(reader) as c:
            assert c.post("/v1/sessions/t9/start", json={}).status_code == 200
            assert_error(c.post("/v1/sessions/t9/post-turn", json={"turn": 0, "user": "x"}), 403)
        with server.client(server.admin) as c:
            assert c.post("/v1/sessions/t1/start", json={}).status_code == 403


async def test_the_brief_is_an_mcp_resource_and_session_start_a_prompt(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from test_service_support import ServerThread

    with ServerThread(tmp_path / "data") as server:
        token = server.token("agent", "team:acme/agent:helper", reach="subtree:team:acme")
        with server.client(token) as c:
            c.post("/v1/sessions/t1/post-turn", json={"turn": 0, "user": "My name is Ana."})
        headers = {"Authorization": f"Bearer {token}"}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
            async with Client(transport, mode="legacy") as client:
                listed = await client.list_resources()
                assert [str(r.uri) for r in listed.resources] == ["memory://context"]
                read = await client.read_resource("memory://context")
                text = read.contents[0].text  # type: ignore[union-attr]
                assert "# Your memory" in text and "`memory_store`" in text
                prompts = await client.list_prompts()
                assert [p.name for p in prompts.prompts] == ["session_start"]
                got = await client.get_prompt("session_start", {"thread": "t1"})
                shown = got.messages[0].content.text  # type: ignore[union-attr]
                assert "My name is Ana." in shown and "# Memory at session start" in shown
