"""context.md, byte for byte: the documents today's contract gives for one fixed memory.

The goldens were written by the context.md compiler before it became a preset of
:class:`~memseal.apps.lifecycle.ContextPack`; the ids (keyed by each engine's
secret) are put back in by name. A change of one byte here is a change of contract.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memseal.engine import Engine, Learning
from memseal.tools import Brief, ContextSpec, MemoryTools, ToolScope
from memseal.tools.context import compile

PLACE = "team:acme/agent:writer"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GOLDEN = Path(__file__).with_name("context_golden.json")
BUDGETS = (100_000, 1_500, 700, 450, 250, 120, 60, 10)


async def _fill(engine: Engine, clock: Any) -> dict[str, str]:
    ids: dict[str, str] = {}
    texts = {
        "user": ("The user is Ana, a backend engineer who wants fewer pages", 0.9),
        "work": ("Currently migrating the billing service to Postgres", 0.8),
        "pref": ("Prefers short answers and dark mode; always run the tests first", 0.95),
        "event": ("Yesterday the deploy failed and was rolled back", 0.6),
        "team": ("The team deploys on Tuesdays after the review", None),
    }
    for day, (key, (text, confidence)) in enumerate(texts.items()):
        clock.now = datetime(2026, 11, 26 + day, 9, 0, tzinfo=UTC)
        place = "team:acme" if key == "team" else PLACE
        learning = (
            Learning(text=text)
            if confidence is None
            else Learning(text=text, confidence=confidence)
        )
        ids[key] = (await engine.store(learning, namespace=place, tags=[key])).id
    for i in range(12):
        clock.now = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=i)
        stored = await engine.store(
            Learning(text=f"filler learning number {i} " * 3), namespace=PLACE
        )
        ids[f"filler{i}"] = stored.id
    return ids


def _named(text: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        text = text.replace(value, f"<{name}>")
    return text


async def _documents(engine: Engine, clock: Any) -> dict[str, str]:
    ids = await _fill(engine, clock)
    out: dict[str, str] = {}
    for budget in BUDGETS:
        out[f"engine/{budget}"] = await compile(engine, ContextSpec(budget_tokens=budget), now=NOW)
    tools = MemoryTools(engine, ToolScope.placed_at(PLACE))
    out["tools/default"] = await compile(tools, now=NOW)
    briefs = (Brief(title="Deploys", question="When does the team deploy?", limit=2),)
    out["tools/one-brief"] = await compile(
        tools, ContextSpec(briefs=briefs, learnings=3, title="Brief"), now=NOW
    )
    out["engine/no-briefs"] = await compile(engine, ContextSpec(briefs=()), now=NOW)
    out["engine/no-learnings"] = await compile(engine, ContextSpec(learnings=0), now=NOW)
    return {key: _named(text, ids) for key, text in out.items()}


async def test_context_md_is_byte_for_byte_the_golden(engine: Engine, clock: Any) -> None:
    documents = await _documents(engine, clock)
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert documents.keys() == golden.keys()
    for key, text in documents.items():
        assert text == golden[key], key
