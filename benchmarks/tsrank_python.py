"""Exact reads ranked as PostgreSQL on SQLite (``ts_rank_python``): narrowed vs full scan.

Run: ``.venv/bin/python benchmarks/tsrank_python.py [--items N] [--queries Q]
[--baseline-queries B]`` (defaults 10,000 items, 20 queries, 2 baseline queries).

A read proof of a PostgreSQL read, and an as-of view of a PostgreSQL memory, rank exact
reads on SQLite as ``ts_rank`` would (engine/_ranking.py). On real files in a temporary
folder, ``--items`` learnings of about 200 words from a Zipf-like vocabulary of 5,000
made-up words are stored with ``store_many``; then, over the engine's database, the
same questions (one to three mid-frequency words) are ranked (cap 1,000, where "1 = 1")
by the narrowed ranker, which the engine calls for ``ranks_as="postgresql"``, and by
the full scan it must equal (every item's document built and matched), measured in the
same run on the first ``--baseline-queries`` questions. Prints ms/query of each, the
ratio full / narrowed, how many items each question matched, and checks the two
rankings are equal on the baseline questions.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memseal.cli.engine import open_engine
from memseal.engine import Learning, NewItem
from memseal.engine._ranking import _python_exact_full, _terms, exact

_SYLLABLES = ["ka", "lo", "mi", "ru", "ten", "sa", "vo", "ne", "pi", "dra", "ul", "shi", "bo"]
_CAP = 1_000


def _vocabulary(rng: random.Random, size: int = 5_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


async def _fill(folder: Path, n: int) -> None:
    rng = random.Random(7)
    vocab = _vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    async with open_engine(folder, create=True) as engine:
        for start in range(0, n, 1_000):
            batch = [
                NewItem(
                    content=Learning(text=" ".join(rng.choices(vocab, weights, k=200))),
                    namespace="team:bench/agent:a",
                )
                for _ in range(min(1_000, n - start))
            ]
            await engine.store_many(batch)


def _database(folder: Path) -> Path:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.read_bytes()[:16] == b"SQLite format 3\x00":
            conn = sqlite3.connect(path)
            try:
                if conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'engine_items'"
                ).fetchall():
                    return path
            finally:
                conn.close()
    raise SystemExit("no engine database in the folder")


def _questions(q: int) -> list[str]:
    rng = random.Random(11)
    middle = _vocabulary(random.Random(7))[50:2_000]
    return [" ".join(rng.sample(middle, rng.randint(1, 3))) for _ in range(q)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--baseline-queries", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data"
        start = time.perf_counter()
        asyncio.run(_fill(folder, args.items))
        print(f"fill: {args.items:,} items of 200 words in {time.perf_counter() - start:.1f} s")
        conn = sqlite3.connect(f"file:{_database(folder)}?mode=ro", uri=True)

        def execute(sql: str, params: Any) -> list[tuple[Any, ...]]:
            return conn.execute(sql, list(params)).fetchall()

        asked = _questions(args.queries)
        narrowed, found, results = [], [], []
        for question in asked:
            begin = time.perf_counter()
            ranked = exact(execute, "ts_rank_python", "1 = 1", [], question, _CAP)
            narrowed.append((time.perf_counter() - begin) * 1000)
            found.append(len(ranked))
            results.append(ranked)
        full = []
        for k, question in enumerate(asked[: args.baseline_queries]):
            begin = time.perf_counter()
            ranked = _python_exact_full(execute, "1 = 1", [], _terms(question), _CAP)
            full.append((time.perf_counter() - begin) * 1000)
            print(f"  baseline question {k + 1}: equal to narrowed: {ranked == results[k]}")
        conn.close()
    n50 = statistics.median(narrowed)
    print(
        f"narrowed: {statistics.mean(narrowed):,.1f} ms/query (p50 {n50:,.1f}, max "
        f"{max(narrowed):,.1f}) over {len(asked)} questions; matched {min(found)}-{max(found)}"
        f" items (median {statistics.median(found):.0f})"
    )
    if full:
        same = statistics.mean(narrowed[: len(full)])
        print(
            f"full scan: {statistics.mean(full):,.1f} ms/query over {len(full)} questions "
            f"(narrowed on those: {same:,.1f} ms/query); ratio full / narrowed "
            f"{statistics.mean(full) / same:,.0f}x"
        )


if __name__ == "__main__":
    main()
