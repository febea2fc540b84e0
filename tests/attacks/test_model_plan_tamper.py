"""An attacker who repoints the memo of a failed attempt's recorded model plan: the retry
reads the plan from the earlier run's signed entry only, so it refuses the repointed memo
(the attempt fails naming the provenance), never writes what the memo now points at, and
never asks the model again in the round. On each store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from attack_db import rows, run

from memseal.apps.lifecycle import JobQueue, ModelExtractor, RetryPolicy
from memseal.engine import Reach
from memseal.ledger.errors import StorageError
from memseal.memory import Memory
from memseal.tools import ToolScope

AGENT = "team:acme/agent:writer"
SCOPE = ToolScope.placed_at(AGENT, reach=Reach.subtree(AGENT))
THREAD = ToolScope.placed_at(f"{AGENT}/thread:t1")


class OneAnswerModel:
    """A fake model that counts its calls; every answer is one belief about the turn."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, prompt: str) -> str:
        self.calls += 1
        turn = msgspec.json.decode(prompt.split("\n\n", 1)[1].splitlines()[0])["item"]
        beliefs = [{"text": f"The user climbs (answer {self.calls}).", "sources": [turn]}]
        return msgspec.json.encode({"beliefs": beliefs}).decode()


class FailingOnce:
    """The memory, but a job's first belief write fails before it reaches the ledger."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.failed = False

    def tools(self, scope: ToolScope | None = None, **options: Any) -> Any:
        return _Tools(self, self.memory.tools(scope, **options))


class _Tools:
    def __init__(self, owner: FailingOnce, inner: Any) -> None:
        self.owner, self.inner = owner, inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Any
    ) -> Any:
        if not self.owner.failed and str(options.get("key") or "").startswith("learn:"):
            self.owner.failed = True
            raise StorageError("the store is down for a moment")
        return await self.inner.call(name, arguments, **options)

    async def close(self, *, check: bool = True) -> None:
        await self.inner.close(check=check)


async def test_a_repointed_plan_memo_fails_the_retry_and_the_model_is_not_asked(
    memory: Memory,
) -> None:
    turns = [{"role": "user", "text": "I am into climbing."}]
    turn = (await memory.tools(THREAD).call("memory_store", {"conversation": {"turns": turns}}))[
        "id"
    ]
    model = OneAnswerModel()
    retry = RetryPolicy(max_attempts=3, base_seconds=0, max_seconds=0)
    queue = JobQueue(FailingOnce(memory), SCOPE, extractor=ModelExtractor(model), retry=retry)  # type: ignore[arg-type]
    job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
    (failed,) = await queue.run_pending()
    assert failed.state == "failed" and model.calls == 1
    first = f"job-{job.id}"
    # The plan's step now points at the run's first call (the read of the turns).
    (read,) = rows(memory, "SELECT seq FROM memos WHERE run_id = ? AND step = 0", (first,))
    run(memory, "UPDATE memos SET seq = ? WHERE run_id = ? AND step = 1", (read[0], first))
    (refused,) = await queue.run_pending()
    assert refused.state == "failed" and refused.attempt == 2, refused
    assert "provenance" in (refused.error or ""), refused.error
    assert model.calls == 1  # never asked again for the round
    page = await memory.tools(SCOPE).call(
        "memory_list", {"filter": {"tags_any": ["belief"]}, "limit": 50}
    )
    assert page["items"] == []  # nothing written from a plan that does not check
