"""A belief changed in the words people use is superseded by a signed forget, through JobQueue.

Each case stores the earlier turn, builds its belief, then stores the update
("I gave up running", "since March my manager is Priya", "we cancelled the
trip", "I no longer work at Acme") and builds again: the stale belief is
forgotten by a signed ``memory_forgotten`` entry, the new belief states the
change and cites what it supersedes, the job replays strictly from its run,
and the ledger verifies. Another person's fact never forgets the user's. On
SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.apps.lifecycle import JobOutcome, JobQueue
from memseal.engine import Reach
from memseal.memory import STORE_ENV
from memseal.tools import ToolScope

AGENT = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(AGENT, reach=Reach.subtree(AGENT))
THREAD = ToolScope.placed_at(f"{AGENT}/thread:t1")


@pytest.fixture(autouse=True)
def _store(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url is None:
        monkeypatch.delenv(STORE_ENV, raising=False)
    else:
        monkeypatch.setenv(STORE_ENV, store_url)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


async def _build(memory: memseal.Memory, queue: JobQueue, said: str) -> JobOutcome:
    turns = [{"role": "user", "text": said}, {"role": "assistant", "text": "Noted."}]
    stored = await memory.tools(THREAD).call("memory_store", {"conversation": {"turns": turns}})
    await queue.enqueue("beliefs", thread="t1", source_ids=[stored["id"]])
    (outcome,) = await queue.run_pending()
    assert outcome.state == "done", outcome
    return outcome


async def _held(memory: memseal.Memory) -> list[str]:
    page = await memory.tools(SCOPE).call(
        "memory_list", {"filter": {"tags_any": ["belief"]}, "limit": 50}
    )
    return sorted(item["text"] for item in page["items"])


async def _kinds(memory: memseal.Memory, start: int) -> Counter[str]:
    size = await memory.ledger.size()
    return Counter([(await memory.ledger.read(seq)).entry().kind for seq in range(start, size)])


@pytest.mark.parametrize(
    ("before", "after", "current"),
    [
        ("I took up running.", "I gave up running.", "The user gave up running."),
        (
            "My manager is Dana.",
            "Since March my manager is Priya.",
            "The user's manager is Priya.",
        ),
        ("We booked a trip to Japan.", "We cancelled the trip.", "The user cancelled the trip."),
        ("I work at Acme.", "I no longer work at Acme.", "The user no longer works at Acme."),
        ("I live in Porto.", "We relocated to Lisbon.", "The user lives in Lisbon."),
    ],
)
async def test_an_update_forgets_the_stale_belief_by_a_signed_forget(
    tmp_path: Path, before: str, after: str, current: str
) -> None:
    async with _open(tmp_path / "d") as memory:
        queue = JobQueue(memory, SCOPE)
        first = await _build(memory, queue, before)
        assert len(first.learned) == 1
        start = await memory.ledger.size()
        second = await _build(memory, queue, after)
        assert second.superseded == first.learned
        kinds = await _kinds(memory, start)
        assert kinds["memory_forgotten"] == 1 and kinds["memory_stored"] >= 1
        assert await _held(memory) == [current]
        (item,) = (await memory.engine.get(list(second.learned))).items
        assert item.evidence is not None and f"supersedes {first.learned[0]}" in item.evidence
        (job,) = [j for j in (await queue.status()).done if j.run_id == second.run_id]
        assert await queue.replay_job(job) == second
        await memory.verify(deep=True)


async def test_another_persons_fact_forgets_nothing_of_the_users(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        queue = JobQueue(memory, SCOPE)
        await _build(memory, queue, "I work at Acme.")
        # The measured failure: this sentence gave the user half of it as a belief.
        other = await _build(memory, queue, "My brother Tomas has a new job.")
        assert other.superseded == ()
        both = await _build(memory, queue, "I live in Porto and my wife Ana works at Apple.")
        assert both.superseded == ()
        assert await _held(memory) == [
            "Ana works at Apple.",
            "The user lives in Porto.",
            "The user works at Acme.",
            "Tomas has a new job.",
        ]
        # Tomas's own change supersedes Tomas's belief only.
        moved = await _build(memory, queue, "My brother Tomas joined Globex.")
        assert moved.superseded == other.learned
        assert "The user works at Acme." in await _held(memory)
        await memory.verify(deep=True)


async def test_a_hypothetical_or_a_question_forgets_nothing(tmp_path: Path) -> None:
    async with _open(tmp_path / "d") as memory:
        queue = JobQueue(memory, SCOPE)
        await _build(memory, queue, "I live in Porto.")
        for said in ("If I ever worked abroad, I would live in Tokyo.", "Do I live in Faro?"):
            outcome = await _build(memory, queue, said)
            assert (outcome.learned, outcome.superseded) == ((), ())
        assert await _held(memory) == ["The user lives in Porto."]
