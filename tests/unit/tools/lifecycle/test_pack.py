"""Holistic recall: merge, dedupe, supersede, rank, and a budget that always holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.engine import Engine, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.tools import MemoryTools
from memseal.tools.lifecycle import (
    PRE_TURN,
    ContextPack,
    MemoryLayout,
    PackItem,
    PackPreset,
    SectionSpec,
    count_tokens,
    fit,
    holistic_recall,
)
from memseal.tools.lifecycle.pack import expand, superseded_ids

LAYOUT = MemoryLayout(tenant="acme")


def _item(n: int, text: str, kind: str = "fact", seq: int | None = None) -> PackItem:
    return PackItem(
        id=f"{n:032x}",
        kind=kind,
        text=text,
        trust="unverified",
        observed_at="2026-12-01T00:00:00.000000Z",
        ledger_ref=n if seq is None else seq,
        as_of=n if seq is None else seq,
    )


SPECS = (
    SectionSpec(reach="thread", title="Thread", weight=2),
    SectionSpec(reach="own", title="Own"),
    SectionSpec(reach="brain", title="Brain", weight=0.5),
)
texts = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=300)


@given(
    found=st.lists(st.lists(texts, max_size=8), min_size=3, max_size=3),
    budget=st.integers(min_value=0, max_value=400),
)
def test_no_pack_is_ever_over_its_budget(found: list[list[str]], budget: int) -> None:
    numbered = iter(range(1, 10_000))
    items = [[_item(next(numbered), text) for text in section] for section in found]
    pack = fit("Memory", SPECS, items, budget)
    assert pack.tokens == count_tokens(pack.markdown()) <= budget
    # The JSON form says the same.
    again = msgspec.json.decode(pack.to_json(), type=ContextPack)
    assert again == pack
    cited = pack.ids
    assert len(cited) == len(set(cited))
    assert pack.dropped + len(cited) + len(pack.superseded) <= sum(map(len, items))


def test_duplicates_are_merged_and_the_best_placed_section_keeps_them() -> None:
    same = _item(1, "The deploy runs on Tuesdays")
    twin = _item(2, "the deploy  runs on tuesdays")
    pack = fit("Memory", SPECS, [[same], [same, twin], []], 1_000)
    assert [s.title for s in pack.sections] == ["Thread"]
    assert pack.ids == (same.id,)
    text = pack.markdown()
    assert f"[{same.id}]" in text and "unverified" in text


def test_a_newer_statement_supersedes_the_older_one() -> None:
    old = _item(1, "user: I live in Berlin.\nassistant: Noted.", kind="conversation")
    asked = _item(2, "user: Where do I live?\nassistant: Berlin.", kind="conversation")
    new = _item(3, "user: I moved to Lisbon last month.\nassistant: Nice.", kind="conversation")
    other = _item(4, "My favourite colour is green", kind="fact")
    assert superseded_ids([old, asked, new, other]) == {old.id}
    pack = fit("Memory", SPECS, [[old, asked, new], [other], []], 1_000)
    assert old.id in pack.superseded and old.id not in pack.ids
    assert new.id in pack.ids and asked.id in pack.ids
    # A summary keeps its lines but those a newer statement replaced.
    summary = PackItem(
        id="f" * 32,
        kind="context_summary",
        text="- I live in Berlin.\n- My dog is Rex.",
        trust="unverified",
        observed_at="",
        ledger_ref=9,
        as_of=2,
    )
    pack = fit("Memory", SPECS, [[summary, new], [], []], 1_000)
    shown = pack.markdown()
    assert "Berlin" not in shown and "Rex" in shown and "Lisbon" in shown


def test_a_question_about_a_subject_also_searches_the_words_that_state_it() -> None:
    assert "moved" in expand("Where do I live now?")
    assert "joined" in expand("Who is my employer?")
    assert expand("What is the deploy day?") == "What is the deploy day?"


class _Recorded:
    """Real tools over a real engine, called as a run calls them (the key is noted)."""

    def __init__(self, tools: MemoryTools) -> None:
        self.tools = tools
        self.keys: list[str | None] = []

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Any:
        self.keys.append(key)
        return await self.tools.call(name, dict(arguments or {}))


async def test_holistic_recall_reads_each_reach_through_its_own_scope(engine: Engine) -> None:
    await engine.store(
        {"learning": {"text": "Ana prefers short answers"}}, namespace=LAYOUT.agent("w")
    )
    await engine.store({"learning": {"text": "Team deploys on Tuesdays"}}, namespace=LAYOUT.team)
    await engine.store(
        {"document": {"text": "Deploy checklist: run the tests before deploys"}},
        namespace=LAYOUT.brain_source("handbook"),
    )
    await engine.store(
        {"learning": {"text": "Other agent's secret about deploys"}}, namespace=LAYOUT.agent("x")
    )
    await engine.store(
        {"conversation": {"turns": [{"role": "user", "text": "when do we deploy?"}]}},
        namespace=LAYOUT.thread("w", "t1"),
    )
    node = LAYOUT.agent("w")
    readers = {
        "own": _Recorded(MemoryTools(engine, LAYOUT.reader(node, Reach.exact(node)))),
        "team": _Recorded(
            MemoryTools(engine, LAYOUT.reader(LAYOUT.team, Reach.exact(LAYOUT.team)))
        ),
        "brain": _Recorded(MemoryTools(engine, LAYOUT.brain_reader())),
        "thread": _Recorded(MemoryTools(engine, LAYOUT.thread_writer("w", "t1"))),
    }
    pack = await holistic_recall(readers, PRE_TURN, query="deploy answers", key="pre/0")
    text = pack.markdown()
    assert "Tuesdays" in text and "checklist" in text and "when do we deploy" in text
    assert "short answers" in text
    assert "secret" not in text  # a sibling agent is in no reach the host gave
    assert {s.reach for s in pack.sections} == {"own", "team", "brain", "thread"}
    assert readers["thread"].keys[0] == "pre/0/0"
    assert pack.tokens <= PRE_TURN.budget_tokens
    small = await holistic_recall(readers, PRE_TURN, query="deploy", budget_tokens=40)
    assert small.tokens == count_tokens(small.markdown()) <= 40
    with pytest.raises(InvalidRequest, match="reads `thread`, not given"):
        await holistic_recall({"own": readers["own"]}, PRE_TURN.with_budget(10), query="x")


SECTION = SectionSpec(reach="own", title="x")


def test_bad_presets_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="`reach`"):
        SectionSpec(reach="elsewhere", title="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="`limit`"):
        SectionSpec(reach="own", title="x", limit=0)
    with pytest.raises(InvalidRequest, match="`kinds`"):
        SectionSpec(reach="own", title="x", kinds=("memo",))
    with pytest.raises(InvalidRequest, match="`budget_tokens`"):
        PackPreset(
            name="p", title="t", sections=(SectionSpec(reach="own", title="x"),), budget_tokens=-1
        )
