"""A model plugged into the belief builds, over a real memory: a scripted fake model whose
every answer differs, so only the recorded plan can make a job replay the same. Its plan is
a signed entry; a job resumed after a crash writes what it planned, not what the model says
now; a strict replay never asks the model; a reply that is not the beliefs JSON fails the
attempt, naming why. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest

import memseal
from memseal.apps.lifecycle import JobQueue, ModelExtractor, RetryPolicy
from memseal.engine import Reach
from memseal.ledger.errors import StorageError
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


class ScriptedModel:
    """A fake model: each call answers the next reply of its script (``{turn}`` is the id
    of the first turn it was shown), so two calls never answer alike."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    async def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        turn = msgspec.json.decode(prompt.split("\n\n", 1)[1].splitlines()[0])["item"]
        return self.replies[len(self.prompts) - 1].replace("{turn}", turn)


def _reply(*texts: str) -> str:
    beliefs = [{"text": t, "confidence": 0.7, "sources": ["{turn}"]} for t in texts]
    return msgspec.json.encode({"beliefs": beliefs}).decode()


class Crash(BaseException):
    """The process dying mid-build (not an error the queue handles)."""


class CrashingMemory:
    """The memory, but the first belief write of a job raises :class:`Crash` after it
    commits: what a SIGKILL right after that write leaves in the ledger."""

    def __init__(self, memory: memseal.Memory) -> None:
        self.memory = memory

    def tools(self, scope: ToolScope | None = None, **options: Any) -> Any:
        return _CrashingTools(self.memory.tools(scope, **options))


class _CrashingTools:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Any
    ) -> Any:
        result = await self.inner.call(name, arguments, **options)
        if str(options.get("key") or "").startswith("learn:"):
            raise Crash
        return result

    async def close(self, *, check: bool = True) -> None:
        await self.inner.close(check=check)


class FailingOnceMemory:
    """The memory, but a job's first belief write fails (a StorageError, what a store down
    for a moment gives) before it reaches the ledger: an attempt that fails after its
    model answered and its plan was recorded."""

    def __init__(self, memory: memseal.Memory) -> None:
        self.memory = memory
        self.failed = False

    def tools(self, scope: ToolScope | None = None, **options: Any) -> Any:
        return _FailingOnceTools(self, self.memory.tools(scope, **options))


class _FailingOnceTools:
    def __init__(self, owner: FailingOnceMemory, inner: Any) -> None:
        self.owner = owner
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # what the run holds, as the real tools say it

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Any
    ) -> Any:
        if not self.owner.failed and str(options.get("key") or "").startswith("learn:"):
            self.owner.failed = True
            raise StorageError("the store is down for a moment")
        return await self.inner.call(name, arguments, **options)

    async def close(self, *, check: bool = True) -> None:
        await self.inner.close(check=check)


def _open(folder: Path) -> Any:
    return memseal.open(folder, embedder=None, checkpoint_interval=None)


async def _turn(memory: memseal.Memory, said: str) -> str:
    turns = [{"role": "user", "text": said}, {"role": "assistant", "text": "Noted."}]
    stored = await memory.tools(THREAD).call("memory_store", {"conversation": {"turns": turns}})
    return str(stored["id"])


async def _tagged(memory: memseal.Memory, tag: str) -> list[dict[str, Any]]:
    page = await memory.tools(SCOPE).call(
        "memory_list", {"filter": {"tags_any": [tag]}, "limit": 50}
    )
    return list(page["items"])


async def _kinds_since(memory: memseal.Memory, start: int) -> Counter[str]:
    size = await memory.ledger.size()
    return Counter([(await memory.ledger.read(seq)).entry().kind for seq in range(start, size)])


async def test_a_model_plan_is_signed_and_replays_strictly_without_the_model(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "Tea, always tea, in the mornings.")
        model = ScriptedModel(_reply("The user drinks tea in the mornings."), _reply("never"))
        queue = JobQueue(memory, SCOPE, extractor=ModelExtractor(model))
        job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        before = await memory.ledger.size()
        (done,) = await queue.run_pending()
        assert done.state == "done" and len(model.prompts) == 1
        assert "Tea, always tea" in model.prompts[0] and turn in model.prompts[0]
        (belief,) = await _tagged(memory, "belief")
        assert belief["text"] == "The user drinks tea in the mornings."
        assert belief["confidence"] == 0.7 and f"turn:{turn}" in belief["meta"]["tags"]
        # The plan: a signed scratch learning of the job's run, the model's beliefs as JSON.
        (plan,) = await _tagged(memory, "memseal-job-plan")
        decoded = msgspec.json.decode(plan["text"])
        assert decoded["job"] == job.id
        assert [b["text"] for b in decoded["beliefs"]] == [belief["text"]]
        assert (await _kinds_since(memory, before))["memory_stored"] == 3  # plan, belief, done
        # CI: the job's run strictly, from its memos; the model is never asked.
        size = await memory.ledger.size()
        (finished,) = (await queue.status()).done
        assert await queue.replay_job(finished) == done
        assert len(model.prompts) == 1
        size_after_status = await memory.ledger.size()
        replayed_again = await queue.replay_job(finished)
        assert replayed_again == done and await memory.ledger.size() == size_after_status
        assert size_after_status > size  # only the status reads were recorded
        await memory.verify(deep=True)


async def test_a_job_resumed_after_a_crash_writes_its_plan_not_the_models_new_answer(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I am into climbing and chess.")
        model = ScriptedModel(
            _reply("The user climbs.", "The user plays chess."),
            _reply("The user sails."),  # what the model says after the crash
        )
        await JobQueue(memory, SCOPE).enqueue("beliefs", thread="t1", source_ids=[turn])
        crashing = JobQueue(CrashingMemory(memory), SCOPE, extractor=ModelExtractor(model))  # type: ignore[arg-type]
        with pytest.raises(Crash):
            await crashing.run_pending()
        assert [b["text"] for b in await _tagged(memory, "belief")] == ["The user climbs."]
        queue = JobQueue(memory, SCOPE, extractor=ModelExtractor(model))
        (done,) = await queue.run_pending()
        assert done.state == "done" and len(model.prompts) == 1  # its run holds the plan
        texts = sorted(b["text"] for b in await _tagged(memory, "belief"))
        assert texts == ["The user climbs.", "The user plays chess."]  # the plan, once each
        assert len(await _tagged(memory, "memseal-job-plan")) == 1
        (finished,) = (await queue.status()).done
        assert await queue.replay_job(finished) == done
        await memory.verify(deep=True)


async def test_a_retry_after_the_model_answered_reuses_the_signed_plan_and_never_asks_again(
    tmp_path: Path,
) -> None:
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I am into climbing and chess.")
        model = ScriptedModel(
            _reply("The user climbs.", "The user plays chess."),
            _reply("The user sails."),  # what the model would say on the retry
        )
        failing = FailingOnceMemory(memory)
        retry = RetryPolicy(max_attempts=3, base_seconds=0, max_seconds=0)
        queue = JobQueue(failing, SCOPE, extractor=ModelExtractor(model), retry=retry)  # type: ignore[arg-type]
        job = await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        (failed,) = await queue.run_pending()
        assert failed.state == "failed" and "down for a moment" in (failed.error or "")
        assert len(model.prompts) == 1 and await _tagged(memory, "belief") == []
        # The failure marker says the attempt's run holds a plan; the retry is told where.
        (pending,) = (await queue.status()).pending
        assert (pending.run_id, pending.plan_run) == (f"job-{job.id}.0.2", f"job-{job.id}")
        (done,) = await queue.run_pending()
        assert (done.state, done.attempt, done.run_id) == ("done", 2, pending.run_id)
        assert len(model.prompts) == 1  # the round asked the model once
        texts = sorted(b["text"] for b in await _tagged(memory, "belief"))
        assert texts == ["The user climbs.", "The user plays chess."]
        assert len(await _tagged(memory, "memseal-job-plan")) == 1  # one plan, both runs
        # The retry recorded the plan in its own run: it replays strictly, model-free.
        (finished,) = (await queue.status()).done
        assert finished.run_id == done.run_id
        assert await queue.replay_job(finished) == done and len(model.prompts) == 1
        await memory.verify(deep=True)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("I think the user likes tea.", "not the beliefs JSON"),
        ('{"beliefs": [{"text": "x", "sources": ["elsewhere"]}]}', "not shown"),
        ('{"beliefs": [{"text": "x", "colour": "red"}]}', "not the beliefs JSON"),
        ('{"beliefs": [{"text": "x", "confidence": 7}]}', "bad confidence"),
        ('{"beliefs": [{"text": "x", "kind": "rumour"}]}', "not the beliefs JSON"),
    ],
)
async def test_a_reply_that_is_not_the_beliefs_json_fails_the_attempt_and_writes_none(
    tmp_path: Path, reply: str, error: str
) -> None:
    async with _open(tmp_path / "d") as memory:
        turn = await _turn(memory, "I like tea.")
        extractor = ModelExtractor(ScriptedModel(reply))
        queue = JobQueue(memory, SCOPE, extractor=extractor, retry=RetryPolicy(max_attempts=1))
        await queue.enqueue("beliefs", thread="t1", source_ids=[turn])
        (outcome,) = await queue.run_pending()
        assert outcome.state == "failed" and error in (outcome.error or ""), outcome.error
        assert await _tagged(memory, "belief") == []
        assert await _tagged(memory, "memseal-job-plan") == []
        (failed,) = (await queue.status()).failed
        assert error in (failed.last_error or "")


def test_a_model_extractor_needs_a_model() -> None:
    with pytest.raises(memseal.InvalidRequest, match="`model`"):
        ModelExtractor(object())  # type: ignore[arg-type]
    with pytest.raises(memseal.InvalidRequest, match="`instructions`"):
        ModelExtractor(ScriptedModel(), instructions=" ")
