"""context.md: four briefs, learnings newest and most confident first, a token budget."""

from __future__ import annotations

import logging
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memseal.engine import Engine, Learning, Reach
from memseal.tools import DEFAULT_BRIEFS, Brief, ContextSpec, MemoryTools, ToolScope
from memseal.tools.context import CHARS_PER_TOKEN, compile

PLACE = "team:acme/agent:writer"
Clock = Any  # the conftest's clock: a callable with a settable ``now``
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def _fill(engine: Engine, clock: Clock) -> dict[str, str]:
    ids = {}
    texts = {
        "user": ("The user is Ana, a backend engineer who wants fewer pages", 0.9),
        "work": ("Currently migrating the billing service to Postgres", 0.8),
        "pref": ("Prefers short answers and dark mode; always run the tests first", 0.95),
        "event": ("Yesterday the deploy failed and was rolled back", 0.6),
    }
    for day, (key, (text, confidence)) in enumerate(texts.items()):
        clock.now = datetime(2026, 11, 26 + day, 9, 0, tzinfo=UTC)
        stored = await engine.store(
            Learning(text=text, confidence=confidence), namespace=PLACE, tags=[key]
        )
        ids[key] = stored.id
    return ids


def _frontmatter(text: str) -> dict[str, str]:
    head = text.split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.strip().splitlines())


async def test_an_empty_engine_gives_an_empty_document(engine: Engine) -> None:
    assert await compile(engine) == ""
    # Memory outside the reach does not count either.
    await engine.store(Learning(text="elsewhere"), namespace="team:other")
    assert await compile(engine, ContextSpec(reach=Reach.of(PLACE))) == ""


async def test_the_default_document(engine: Engine, clock: Clock) -> None:
    ids = await _fill(engine, clock)
    text = await compile(engine, now=NOW)
    meta = _frontmatter(text)
    assert meta["generated_at"] == "2026-12-01T12:00:00.000000Z"
    assert meta["engine"] == f"memseal hybrid {engine.embedder_id}"
    assert int(meta["tokens"]) == math.ceil(len(text) / CHARS_PER_TOKEN)
    refs = re.findall(r"[0-9a-f]{32}", meta["refs"])
    assert set(refs) == set(ids.values())
    headings = re.findall(r"^## (.*)$", text, re.M)
    assert headings == [b.title for b in DEFAULT_BRIEFS] + ["Learnings"]
    assert len(DEFAULT_BRIEFS) == 4
    assert "[1]" in text
    learnings = text.split("## Learnings\n")[1].strip().splitlines()
    # Newest first: the four were observed on four days.
    assert learnings[0].startswith("- (fact, 0.6) Yesterday the deploy failed")
    assert learnings[-1].startswith("- (fact, 0.9) The user is Ana")
    assert len(text) <= 1_500 * CHARS_PER_TOKEN


async def test_learnings_of_one_day_go_most_confident_first(engine: Engine, clock: Clock) -> None:
    clock.now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    for text, confidence in [("low one", 0.3), ("high one", 0.99), ("mid one", 0.7)]:
        await engine.store(Learning(text=text, confidence=confidence), namespace=PLACE)
    text = await compile(engine, ContextSpec(briefs=()), now=NOW)
    lines = text.split("## Learnings\n")[1].strip().splitlines()
    assert lines == ["- (fact, 0.99) high one", "- (fact, 0.7) mid one", "- (fact, 0.3) low one"]


async def test_the_budget_trims_learnings_first_then_the_last_briefs(
    engine: Engine, clock: Clock
) -> None:
    await _fill(engine, clock)
    for i in range(30):
        clock.now = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=i)
        await engine.store(Learning(text=f"filler learning number {i} " * 3), namespace=PLACE)
    full = await compile(engine, ContextSpec(budget_tokens=100_000), now=NOW)
    lines_full = full.split("## Learnings\n")[1].strip().splitlines()
    assert len(lines_full) == 34

    for budget in (700, 450, 250, 120, 60):
        text = await compile(engine, ContextSpec(budget_tokens=budget), now=NOW)
        assert len(text) <= budget * CHARS_PER_TOKEN, budget
        headings = re.findall(r"^## (.*)$", text, re.M)
        if "Learnings" in headings:
            assert headings[:-1] == [b.title for b in DEFAULT_BRIEFS]  # briefs all kept
            kept = text.split("## Learnings\n")[1].strip().splitlines()
            assert kept == lines_full[: len(kept)]  # trimmed from the end
        elif text:
            titles = [b.title for b in DEFAULT_BRIEFS]
            assert headings == titles[: len(headings)]  # the last briefs went first
        meta = _frontmatter(text) if text else {}
        if text:
            assert int(meta["tokens"]) == math.ceil(len(text) / CHARS_PER_TOKEN)
    assert await compile(engine, ContextSpec(budget_tokens=10), now=NOW) == ""


async def test_a_failing_brief_is_skipped_and_logged(
    engine: Engine, clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await _fill(engine, clock)
    recall = engine.recall

    async def flaky(question: str, **kwargs: Any) -> Any:
        if "worked on" in question:
            raise RuntimeError("answerer down")
        return await recall(question, **kwargs)

    monkeypatch.setattr(engine, "recall", flaky)
    with caplog.at_level(logging.WARNING, logger="memseal.tools.context"):
        text = await compile(engine, now=NOW)
    assert "## Active work" not in text and "## About the user" in text
    assert any("Active work" in r.getMessage() for r in caplog.records)


async def test_compiling_for_tools_respects_their_scope(engine: Engine, clock: Clock) -> None:
    mine = (await engine.store(Learning(text="my own note"), namespace=PLACE)).id
    team = (await engine.store(Learning(text="the team note"), namespace="team:acme")).id
    other = (
        await engine.store(Learning(text="a sibling note"), namespace="team:acme/agent:other")
    ).id
    checked = (await engine.store(Learning(text="a checked note"), namespace=PLACE)).id
    await engine.promote(checked, actor="host", reason="ok")
    tools = MemoryTools(engine, ToolScope.placed_at(PLACE))
    text = await compile(tools, now=NOW)
    assert mine in text and team in text and checked in text and other not in text
    assert "sibling" not in text
    strict = tools.with_scope(ToolScope.placed_at(PLACE, default_trust="verified"))
    only = await compile(strict, ContextSpec(briefs=(Brief(title="All", question="note"),)))
    assert checked in only and mine not in only


async def test_context_md_is_the_context_md_preset_of_a_context_pack(
    engine: Engine, clock: Clock
) -> None:
    from memseal.tools.context import CONTEXT_MD, context_pack

    ids = await _fill(engine, clock)
    document = await context_pack(engine, now=NOW)
    pack = document.pack
    text = document.markdown()
    assert text == await compile(engine, now=NOW)
    assert (pack.preset, pack.title, pack.budget_tokens) == (CONTEXT_MD, "Memory context", 1_500)
    meta = _frontmatter(text)
    # The pack's count and citations are the document's own.
    assert pack.tokens == int(meta["tokens"]) and pack.dropped == 0
    assert list(dict.fromkeys(pack.ids)) == re.findall(r"[0-9a-f]{32}", meta["refs"])
    *briefs, learnings = pack.sections
    assert [s.title for s in briefs] == [b.title for b in DEFAULT_BRIEFS]
    assert all(s.answer and s.cites and not s.items for s in briefs)
    assert learnings.title == "Learnings" and learnings.answer is None
    assert {i.id for i in learnings.items} == set(ids.values())
    assert all(i.trust == "unverified" for i in learnings.items)
    # The pack's own forms: markdown citing ids and trust, and JSON.
    assert f"[{ids['user']}]" in pack.markdown() and "; unverified)" in pack.markdown()
    assert b'"preset":"context_md"' in pack.to_json()
    # Under a small budget the pack says how much it left out, and an empty one is empty.
    small = (await context_pack(engine, ContextSpec(budget_tokens=250), now=NOW)).pack
    assert small.dropped > 0 and small.tokens <= 250
    nothing = await context_pack(engine, ContextSpec(budget_tokens=10), now=NOW)
    assert nothing.pack.sections == () and nothing.markdown() == ""
