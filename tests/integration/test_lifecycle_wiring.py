"""The lifecycle's halves wired: MemoryLayout's scopes for Brain and JobQueue, and
AgentMemory queuing its turns' belief builds, once, across a resumed session.

On SQLite and PostgreSQL (the ``store_url`` fixture).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

import memseal
from memseal.apps.lifecycle import AgentMemory, Brain, JobQueue, MemoryLayout
from memseal.engine import HashingEmbedder, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.memory import STORE_ENV

LAYOUT = MemoryLayout(tenant="acme")
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SAID = ["I live in Berlin.", "My favourite editor is vim.", "I moved to Lisbon."]


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


async def _kinds(memory: memseal.Memory, start: int) -> Counter[str]:
    size = await memory.ledger.size()
    return Counter([(await memory.ledger.read(seq)).entry().kind for seq in range(start, size)])


async def _drive(memory: memseal.Memory, queue: JobQueue, mode: str = "resume") -> list[str]:
    jobs: list[str] = []
    async with AgentMemory(
        memory, LAYOUT, agent="helper", thread="t1", jobs=queue, mode=mode
    ) as session:
        assert session.run_ids[-1] == "helper.t1/queue"
        for turn, message in enumerate(SAID):
            await session.pre_turn(message, turn=turn, at=AT)
            built = await session.post_turn(turn=turn, user=message, assistant="Noted.")
            assert built.job is not None
            jobs.append(built.job)
    return jobs


async def test_the_layout_hands_out_a_brain_writer_the_sessions_read(
    memory: memseal.Memory,
) -> None:
    brain = Brain(memory, LAYOUT.brain_writer("handbook"))
    assert brain.source == "team:acme/brain:docs/source:handbook"
    report = await brain.ingest_text(
        "# Relocation\n\nTell HR your new address within a week.", source_id="relocation.md"
    )
    assert report.stored == 1
    async with AgentMemory(memory, LAYOUT, agent="helper", thread="t1") as session:
        pack = await session.pre_turn("I need to change my address", turn=0, at=AT)
    brain_items = [i for s in pack.sections if s.reach == "brain" for i in s.items]
    assert any("new address" in item.text for item in brain_items), pack.markdown()


async def test_a_session_queues_each_turn_once_even_when_resumed(memory: memseal.Memory) -> None:
    queue = JobQueue(memory, LAYOUT.learnings_writer("helper"))
    first = await _drive(memory, queue)
    assert len(set(first)) == 3
    status = await queue.status()
    assert [job.id for job in status.pending] == first
    # The loop re-driven from the top (a restarted host): every turn and job is a memo.
    before = await memory.ledger.size()
    assert await _drive(memory, queue) == first
    kinds = await _kinds(memory, before)
    assert kinds["memory_stored"] == 0 and kinds["memory_tool_call"] == 0, kinds
    assert [job.id for job in (await queue.status()).pending] == first
    assert await _drive(memory, queue, mode="strict") == first

    outcomes = await queue.run_pending()
    assert [o.state for o in outcomes] == ["done"] * 3
    # Lisbon superseded Berlin with a signed forget; the editor stays.
    beliefs = await memory.tools(LAYOUT.learnings_writer("helper")).call(
        "memory_list", {"filter": {"tags_any": ["belief"]}, "limit": 50}
    )
    texts = sorted(item["text"] for item in beliefs["items"])
    assert any("Lisbon" in t for t in texts) and not any("Berlin" in t for t in texts), texts
    assert len(outcomes[2].superseded) == 1
    assert (await queue.status()).pending == ()
    await memory.verify(memory.trust_root)


async def test_a_queue_whose_reach_misses_the_thread_is_refused(memory: memseal.Memory) -> None:
    narrow = LAYOUT.learnings_writer("helper").replace(reach=Reach.exact(LAYOUT.agent("helper")))
    with pytest.raises(InvalidRequest, match="learnings_writer"):
        AgentMemory(memory, LAYOUT, agent="helper", thread="t1", jobs=JobQueue(memory, narrow))
    other = JobQueue(memory, LAYOUT.learnings_writer("other"))
    with pytest.raises(InvalidRequest, match="does not include the thread"):
        AgentMemory(memory, LAYOUT, agent="helper", thread="t1", jobs=other)
    with pytest.raises(InvalidRequest, match="`jobs`"):
        AgentMemory(memory, LAYOUT, agent="helper", thread="t1", jobs="queue")  # type: ignore[arg-type]


def test_the_learnings_writer_reaches_the_agents_threads_only() -> None:
    scope = LAYOUT.learnings_writer("helper")
    assert scope.place == "team:acme/agent:helper" and scope.writes
    assert scope.reach is not None
    assert scope.reach.admits(LAYOUT.thread("helper", "t1"))
    assert not scope.reach.admits(LAYOUT.thread("other", "t1"))
    assert not scope.reach.admits(LAYOUT.brain_root)
    assert msgspec.to_builtins(scope.reach) == msgspec.to_builtins(
        Reach.subtree("team:acme/agent:helper")
    )
