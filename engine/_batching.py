"""Concurrent embeddings share model calls: stores in flight are embedded together.

Each store embeds its text before the writer (DESIGN.md: embedding never runs
inside it). One model call per store wastes most of a call on its fixed cost,
so :class:`Batcher` lets texts that arrive while the model is busy wait for the
next call and go in together. With nothing in flight a call starts at once, so
a lone store waits for nobody; up to ``lanes`` calls run at the same time (the
ONNX session releases the GIL, so they use separate cores).

A batch that fails is not allowed to fail its neighbours: when a call holding
several callers' texts raises, each caller's texts are embedded again alone,
and only the caller whose own texts fail sees the error.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["Batcher", "default_lanes"]

#: Texts per model call at most; the rest wait for the next one.
MAX_BATCH: Final = 512

Vectors = list[list[float]]


def default_lanes() -> int:
    """Model calls at once: one per core the process may use, at most four."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


class Batcher:
    """Runs ``embed`` on batches of the texts callers hand it (one event loop)."""

    def __init__(self, embed: Callable[[list[str]], Vectors], lanes: int | None = None) -> None:
        self._embed = embed
        self._lanes = lanes or default_lanes()
        self._running = 0
        self._pending: list[tuple[list[str], asyncio.Future[Vectors]]] = []
        self._tasks: set[asyncio.Task[None]] = set()  # held, so a drain is never collected

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One vector per text, computed with whatever else is waiting."""
        future: asyncio.Future[Vectors] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), future))
        if self._running < self._lanes:
            self._running += 1
            task = asyncio.get_running_loop().create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._take()
                await self._run(batch)
        finally:
            self._running -= 1

    def _take(self) -> list[tuple[list[str], asyncio.Future[Vectors]]]:
        """The waiting callers whose texts fit one call (always at least one)."""
        taken = [self._pending.pop(0)]
        size = len(taken[0][0])
        while self._pending and size + len(self._pending[0][0]) <= MAX_BATCH:
            size += len(self._pending[0][0])
            taken.append(self._pending.pop(0))
        return taken

    async def _run(self, batch: list[tuple[list[str], asyncio.Future[Vectors]]]) -> None:
        texts = [text for part, _ in batch for text in part]
        try:
            vectors = await asyncio.to_thread(self._embed, texts)
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][1], error=exc)
                return
            for part, future in batch:  # each caller alone: a bad text fails only its own
                await self._run([(part, future)])
            return
        at = 0
        for part, future in batch:
            _settle(future, vectors=vectors[at : at + len(part)])
            at += len(part)


def _settle(
    future: asyncio.Future[Vectors],
    *,
    vectors: Vectors | None = None,
    error: BaseException | None = None,
) -> None:
    if future.done():  # the caller was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert vectors is not None
        future.set_result(vectors)
