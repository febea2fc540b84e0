"""briefing(scope): what memory holds, the tools offered, the trust floor; within budget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memseal.apps.lifecycle import MemoryLayout, PackItem, SectionSpec, briefing, count_tokens, fit
from memseal.engine import Engine
from memseal.ledger.errors import InvalidRequest
from memseal.tools import MemoryTools, ToolScope
from memseal.tools.specs import spec_for

LAYOUT = MemoryLayout(tenant="acme", default_trust="verified")


class _Tools:
    def __init__(self, tools: MemoryTools) -> None:
        self.tools = tools

    def specs(self) -> Any:
        return self.tools.specs()

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Any:
        return await self.tools.call(name, dict(arguments or {}))


async def test_the_brief_is_derived_from_the_scope_and_the_data(engine: Engine) -> None:
    scope = LAYOUT.agent_writer("w")
    for text in ("likes tea", "works late"):
        await engine.store({"learning": {"text": text}}, namespace=scope.place, trust="verified")
    text = await briefing(_Tools(MemoryTools(engine, scope)), scope)
    assert "It holds 2 memories in your reach: 2 fact." in text
    assert "`verified` and above" in text and "as low as `unverified`" in text
    assert "`memory_store`: Remember something." in text
    assert "kept as `unverified`" in text
    reader = LAYOUT.brain_reader()
    text = await briefing(_Tools(MemoryTools(engine, reader)), reader)
    assert "It holds nothing yet." in text and "read-only" in text
    assert "memory_store" not in text
    frozen = scope.replace(frozen=True)
    assert "Writes are frozen" in await briefing(_Tools(MemoryTools(engine, frozen)), frozen)
    only = scope.replace(allowlist=("memory_fetch",))
    text = await briefing(_Tools(MemoryTools(engine, only)), only)
    assert "not listed to you" in text and "`memory_fetch`" in text
    with pytest.raises(InvalidRequest, match="`budget_tokens`"):
        await briefing(_Tools(MemoryTools(engine, scope)), scope, budget_tokens=5)


@settings(max_examples=25)
@given(
    budget=st.integers(min_value=80, max_value=900),
    lines=st.lists(st.text(min_size=1, max_size=200), max_size=12),
)
async def test_no_brief_is_ever_over_its_budget(budget: int, lines: list[str]) -> None:
    scope = ToolScope.placed_at("team:acme/agent:w")
    pack = fit(
        "Memory",
        (SectionSpec(reach="own", title="Own"),),
        [[_pack_item(n, t) for n, t in enumerate(lines)]],
        budget,
    )
    text = await briefing(_Static(), scope, pack=pack, budget_tokens=budget)
    assert count_tokens(text) <= budget


def _pack_item(n: int, text: str) -> PackItem:
    return PackItem(
        id=f"{n:032x}", kind="fact", text=text, trust="unverified", observed_at="", ledger_ref=n
    )


class _Static:
    """A scope's specs and a fixed explore count (the property varies the pack, not the data)."""

    def specs(self) -> Any:
        return [spec_for(n) for n in ("memory_recall", "memory_fetch", "memory_explore")]

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Any:
        return {"total": 3, "buckets": [{"value": "fact", "count": 3}], "more_buckets": False}
