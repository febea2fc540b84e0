"""What one job's run does: read its source turns, draw beliefs, store them, supersede.

:class:`~.jobs.JobQueue` keeps the queue's books (which jobs are pending, failed or
done, their markers, the attempt a run is) and opens the run; :class:`BeliefBuild`
is the work inside that run, every step a recorded call: ``memory_get`` of the
source turns, the extractor's beliefs (or, for a model, the plan its run or an
earlier attempt recorded: see :mod:`._model_extract`), then for each belief a
keyed ``memory_store`` (``learn:<digest>``) and a keyed ``memory_forget``
(``supersede:<id>``) of each belief it supersedes on the same subject. The keys
make a run killed halfway and resumed write nothing twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from memseal.engine.items import MAX_TAGS
from memseal.ledger.errors import InvalidRequest, MemsealError, StorageError
from memseal.memory import Memory, RecordedTools
from memseal.tools.scope import ToolScope

from ._extract import Belief, Extractor, SourceTurn, parse_turns
from ._job_records import SOURCE_TAG, JobInfo, digest, tag
from ._model_extract import is_deterministic, planned, recorded_plan

__all__ = ["BELIEF_TAG", "Attempt", "BeliefBuild", "list_all"]

BELIEF_TAG: Final = "belief"
_LIST_LIMIT: Final = 50


@dataclass(slots=True)
class Attempt:
    """What one attempt did that its failure marker must say: whether its run recorded a
    model's plan (the next attempt then reuses it)."""

    planned: bool = False


class BeliefBuild:
    """The belief build a job's run does, for the learnings writer ``scope`` (where
    beliefs are stored, and whose earlier runs a model's plan is read back from)."""

    def __init__(self, memory: Memory, scope: ToolScope, extractor: Extractor) -> None:
        self._memory = memory
        self._scope = scope
        self._extractor = extractor

    async def _extract(self, job: JobInfo, turns: Sequence[SourceTurn]) -> list[Belief]:
        try:
            return list(await self._extractor.extract(turns))
        except MemsealError:
            raise
        except Exception as exc:
            raise StorageError(
                f"job {job.id}: extractor {type(self._extractor).__name__} failed: {exc}"
            ) from exc

    async def _beliefs(
        self,
        tools: RecordedTools,
        job: JobInfo,
        turns: Sequence[SourceTurn],
        mode: str,
        run_id: str,
        notes: Attempt,
    ) -> list[Belief]:
        """What the job writes: the extractor's beliefs, or for an extractor that is not
        deterministic (a model) the plan its run recorded, else the plan an earlier
        attempt of the round recorded (see :mod:`._model_extract`)."""
        if is_deterministic(self._extractor):
            return await self._extract(job, turns)

        async def earlier() -> list[Belief] | None:
            return await self._earlier_plan(job, run_id)

        beliefs = await planned(
            tools, job.id, lambda: self._extract(job, turns), mode, earlier=earlier
        )
        notes.planned = True
        return beliefs

    async def _earlier_plan(self, job: JobInfo, run_id: str) -> list[Belief] | None:
        """The plan the round's latest planned attempt recorded (its failure marker names
        the run), read from that run's signed entry, strictly: nothing live, nothing
        written. None when no attempt of the round recorded one."""
        if job.plan_run is None or job.plan_run == run_id:
            return None
        earlier = self._memory.tools(self._scope, run_id=job.plan_run, mode="strict")
        try:
            return await recorded_plan(earlier, job.id)
        finally:
            # Its other steps are not replayed: only the plan is read from it.
            with contextlib.suppress(MemsealError):
                await earlier.close(check=False)

    async def build(
        self,
        tools: RecordedTools,
        job: JobInfo,
        mode: str,
        run_id: str,
        notes: Attempt,
    ) -> tuple[list[str], list[str]]:
        """Build ``job``'s beliefs in its run ``tools`` (opened in ``mode`` as ``run_id``);
        returns the ids it stored and the ids it superseded."""
        got = await tools.call("memory_get", {"ids": list(job.source_ids)})
        missing = [*got.get("missing", ()), *got.get("filtered", ())]
        if missing:
            raise InvalidRequest(
                f"job {job.id}: source turns not in reach or gone: {', '.join(missing[:5])}"
            )
        turns: list[SourceTurn] = []
        for item in got.get("items", ()):
            text = item.get("text")
            at = (item.get("meta") or {}).get("observed_at")
            if isinstance(text, str):
                # The turn's time: the days it names are read from when it was said.
                turns.extend(parse_turns(item["id"], text, at if isinstance(at, str) else None))
        beliefs = await self._beliefs(tools, job, turns, mode, run_id, notes)
        learned: list[str] = []
        superseded: list[str] = []
        for belief in beliefs:
            if not isinstance(belief, Belief):
                raise StorageError(f"job {job.id}: the extractor returned a non-Belief")
            old: list[str] = []
            if belief.subject is not None:
                held = await list_all(tools, tag(BELIEF_TAG, belief.subject))
                # A forgotten text comes back from a memo as a marker, never equal to it.
                old = [item["id"] for item in held if item.get("text") != belief.text]
            stored = await tools.call(
                "memory_store",
                self._store_args(belief, job, old),
                key=f"learn:{digest(belief.text)}",
            )
            learned.append(stored["id"])
            for item in old:
                if item == stored["id"]:
                    continue
                result = await tools.call("memory_forget", {"ids": [item]}, key=f"supersede:{item}")
                superseded.extend(result.get("forgotten", ()))
        return learned, superseded

    def _store_args(self, belief: Belief, job: JobInfo, old: Sequence[str]) -> dict[str, Any]:
        sources = belief.sources or job.source_ids
        evidence = f"from turns {', '.join(sources)} of thread {job.thread} (job {job.id})"
        if old:
            evidence += f"; supersedes {', '.join(old)}"
        tags = [BELIEF_TAG, tag("thread", job.thread)]
        if belief.subject is not None:
            tags.append(tag(BELIEF_TAG, belief.subject))
        if belief.preference:
            tags.append("preference")
        tags += [tag(SOURCE_TAG, source) for source in sources]
        return {
            "learning": {
                "text": belief.text,
                "learning_kind": belief.kind,
                "confidence": belief.confidence,
                "evidence": evidence[:4_000],
            },
            "tags": list(dict.fromkeys(tags))[:MAX_TAGS],
        }


async def list_all(tools: RecordedTools, *labels: str) -> list[dict[str, Any]]:
    """Every item carrying one of the tags ``labels`` in reach, newest first (recorded
    pages)."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        arguments: dict[str, Any] = {"filter": {"tags_any": list(labels)}, "limit": _LIST_LIMIT}
        if cursor is not None:
            arguments["cursor"] = cursor
        page = await tools.call("memory_list", arguments)
        items.extend(item for item in page.get("items", ()) if isinstance(item, dict))
        cursor = page.get("next_cursor")
        if not isinstance(cursor, str):
            return items
