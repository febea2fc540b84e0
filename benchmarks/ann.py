"""Semantic search through the HNSW index, beside the exact scan, in the same run.

Run: ``.venv/bin/python benchmarks/ann.py [--n 1000000] [--quick]``

On a real SQLite data folder (WAL, synchronous=FULL) holding ``--n`` memories
whose vectors are synthetic (384 dimensions, clustered around 1,000 centres, as
real embeddings cluster by topic): each memory's text names its vector, and a
table embedder hands that vector out, so the store, the vector cache and the
ranking are memseal's own and only the model is left out. It prints:

* the store rate (``store_many``, signed entries with their vectors);
* the data folder's size on disk (the index adds nothing there);
* the index build from the vector cache (items/s, with progress), and the
  index's memory (the graph and its float32 vectors; it is never written to disk);
* semantic fetch p50/p95 (limit 10, query vectors cached) through the index
  and by the exact scan (``ann=None``) over the same folder, and the ratio;
* recall@10 of the index's answers against the exact scan's;
* hybrid fetch p50/p95 through the index, beside exact (BM25) fetch p50/p95.

``--quick`` uses 30k memories (a smoke run of a minute or so).

``--real`` stores the synthetic texts of ``benchmarks/engine.py`` (8 to 24 words
from a Zipf-like vocabulary) embedded by the default embedder (all-MiniLM-L6-v2
int8), and asks that benchmark's questions, so recall is measured on real
embeddings (the fill embeds every text: about ten minutes at 10^5).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import memseal
from memseal.engine import Embedder, Learning, NewItem
from memseal.engine.embedders import MiniLMEmbedder

DIM = 384
CENTRES = 1_000


class TableEmbedder:
    """Hands out the synthetic vector a text names (``v<index>``); a question's text
    ``q<index>`` names a perturbed copy of a stored vector."""

    def __init__(self, vectors: Any, questions: Any) -> None:
        self._vectors = vectors
        self._questions = questions

    @property
    def id(self) -> str:
        return f"synthetic-table-{DIM}"

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            word = text.split()[-1]
            table = self._questions if word.startswith("q") else self._vectors
            out.append(table[int(word[1:])].tolist())
        return out


def synthetic(n: int, asked: int, seed: int = 5) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CENTRES, DIM)).astype("<f4")
    vectors = centres[rng.integers(0, CENTRES, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(
        "<f4"
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    picked = vectors[rng.integers(0, n, asked)]
    questions = picked + 0.05 * rng.standard_normal((asked, DIM)).astype("<f4")
    questions /= np.linalg.norm(questions, axis=1, keepdims=True)
    return vectors.astype("<f4"), questions.astype("<f4")


async def timed(calls: list[Callable[[], Awaitable[object]]]) -> tuple[float, float]:
    samples = []
    for call in calls:
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(int(len(samples) * 0.95) - 1, 0)]


def line(label: str, value: str) -> None:
    print(f"  {label:<52} {value}", flush=True)


def progress(done: int, total: int) -> None:
    print(f"\r  building the index: {done:,} / {total:,}", end="", file=sys.stderr, flush=True)
    if done >= total:
        print(file=sys.stderr)


def table_texts(n: int) -> list[str]:
    words = ["alpha", "budget", "cache", "deploy", "lisbon", "release", "invoice", "auth"]
    rng = random.Random(3)
    return [f"{rng.choice(words)} {rng.choice(words)} v{i}" for i in range(n)]


async def fill(folder: Path, corpus: Sequence[str], embedder: Embedder) -> None:
    n = len(corpus)
    async with memseal.open(folder, embedder=embedder, ann=None) as memory:
        start = time.perf_counter()
        for base in range(0, n, 2_000):
            batch = [
                NewItem(
                    content=Learning(text=corpus[i]),
                    namespace=f"team:acme/agent:a{i % 8}",
                )
                for i in range(base, min(base + 2_000, n))
            ]
            await memory.engine.store_many(batch)
            if base % 50_000 == 0:
                print(f"\r  storing: {base:,} / {n:,}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        seconds = time.perf_counter() - start
        line("store (store_many, with vectors)", f"{n / seconds:,.0f} stores/s ({seconds:.0f} s)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="memories (default 10^6)")
    parser.add_argument("--quick", action="store_true", help="30k memories")
    parser.add_argument("--asked", type=int, default=200, help="questions per figure")
    parser.add_argument(
        "--real", action="store_true", help="engine.py's texts, the default embedder"
    )
    parser.add_argument(
        "--folder", help="keep the data folder here (a second run with the same options reuses it)"
    )
    args = parser.parse_args()
    n = 30_000 if args.quick else args.n
    embedder: Embedder
    if args.real:
        sys.path.insert(0, str(Path(__file__).parent))
        import engine as texts_of  # benchmarks/engine.py: its corpus and questions

        embedder = MiniLMEmbedder()
        corpus, asked = texts_of.texts(n), texts_of.queries(args.asked)
        print(f"{n:,} memories, embedder {embedder.id}, {args.asked} questions")
    else:
        vectors, questions = synthetic(n, args.asked)
        embedder = TableEmbedder(vectors, questions)
        corpus, asked = table_texts(n), [f"question q{i}" for i in range(args.asked)]
        print(f"{n:,} memories, {DIM} dimensions (synthetic), {args.asked} questions")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.folder) if args.folder else Path(tmp) / "data"
        if not (folder / "ledger.db").exists():
            await fill(folder, corpus, embedder)
        on_disk = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        line("data folder on disk (log, projections, vectors)", f"{on_disk / 2**20:,.0f} MiB")
        start = time.perf_counter()
        async with memseal.open(folder, embedder=embedder, progress=progress) as memory:
            engine = memory.engine
            seconds = time.perf_counter() - start
            size = engine.ann_size or 0
            line("open + index build", f"{size / seconds:,.0f} items/s ({seconds:.0f} s)")
            assert engine._vectors is not None and engine._vectors.ann is not None
            line("index memory", f"{engine._vectors.ann.memory / 2**20:,.0f} MiB (disk: none)")
            answers: dict[str, list[list[str]]] = {}

            async def ask(mode: str, into: str) -> tuple[float, float]:
                got: list[list[str]] = []

                async def one(q: str) -> None:
                    fetched = await engine.fetch(q, mode=mode, limit=10)  # type: ignore[arg-type]
                    got.append([h.item.id for h in fetched.hits])

                result = await timed([lambda q=q: one(q) for q in asked])
                answers[into] = got
                return result

            await ask("semantic", "warm")
            ann50, ann95 = await ask("semantic", "ann")
            hyb50, hyb95 = await ask("hybrid", "hybrid")
            ex50, ex95 = await ask("exact", "exact")
        async with memseal.open(folder, embedder=embedder, ann=None) as memory:
            engine = memory.engine
            await engine.fetch(asked[0], mode="semantic", limit=10)  # vectors resident
            got: list[list[str]] = []

            async def scan(q: str) -> None:
                fetched = await engine.fetch(q, mode="semantic", limit=10)
                got.append([h.item.id for h in fetched.hits])

            scan50, scan95 = await timed([lambda q=q: scan(q) for q in asked])
    found = sum(len(set(a) & set(b)) for a, b in zip(answers["ann"], got, strict=True))
    recall = found / max(sum(len(b) for b in got), 1)
    line("semantic fetch p50 / p95, through the index", f"{ann50:.2f} / {ann95:.2f} ms")
    line("semantic fetch p50 / p95, exact scan", f"{scan50:.2f} / {scan95:.2f} ms")
    line("ratio index / scan (p95)", f"{ann95 / scan95:.3f}")
    line("recall@10 of the index against the scan", f"{recall:.3f}")
    line("hybrid fetch p50 / p95, through the index", f"{hyb50:.2f} / {hyb95:.2f} ms")
    line("exact (BM25) fetch p50 / p95", f"{ex50:.2f} / {ex95:.2f} ms")
    line("ratio hybrid / exact (p95)", f"{hyb95 / ex95:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
