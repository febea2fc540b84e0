"""Misreadings a hostile review found in reading 4, through a real fetch: each one
returned a stale fact as current (the older home first and unmarked) or let a
supposition or someone else's move replace the user's current home."""

from __future__ import annotations

from pathlib import Path

import pytest

import memseal
from memseal.engine import HashingEmbedder
from memseal.engine.aboutness import about
from memseal.engine.currency import following

SCOPE = memseal.ToolScope.placed_at("user:dana")
BERLIN = "I live in Berlin near the old harbour."
LISBON = "I live in Lisbon near the old harbour."


async def _marks(tmp: Path, old: str, new: str, version: int) -> dict[str, tuple[bool, bool]]:
    """text -> (superseded, hypothetical) of an exact fetch under ``version``."""
    async with memseal.open(
        tmp / f"m{version}", embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        tools = m.tools(SCOPE)
        for text in (old, new):
            await tools.call("memory_store", {"learning": {"text": text}})
        with following(version):
            got = await tools.call(
                "memory_fetch", {"query": "where do I live near the old harbour", "mode": "exact"}
            )
    return {
        h["text"]: (h.get("superseded_by") is not None, bool(h.get("hypothetical")))
        for h in got["hits"]
    }


@pytest.mark.parametrize(
    "new",
    [
        "I moved to Lisbon near the old harbour in may.",  # lowercase month = modal
        "I live in Lisbon near the old harbour now, where the rent might be lower.",
    ],
)
async def test_a_current_fact_with_a_modal_clause_replaces_the_old_one(
    tmp_path: Path, new: str
) -> None:
    assert (await _marks(tmp_path, BERLIN, new, 3))[BERLIN] == (True, False)
    assert (await _marks(tmp_path, BERLIN, new, 4))[BERLIN] == (True, False)


async def test_an_opening_if_never_replaces_the_current_fact(tmp_path: Path) -> None:
    new = "If I get the Berlin job, I move to Berlin near the old harbour."
    assert (await _marks(tmp_path, LISBON, new, 3))[LISBON] == (False, False)
    assert (await _marks(tmp_path, LISBON, new, 4))[LISBON] == (False, False)


@pytest.mark.parametrize(
    ("new", "whose"),
    [
        ("Lisbon feels like home now, near the old harbour.", None),  # the user's
        ("Émile moved to Lisbon near the old harbour.", "Émile"),  # someone else's
    ],
)
async def test_whose_move_it_is_decides_what_it_replaces(
    tmp_path: Path, new: str, whose: str | None
) -> None:
    assert about(new, 4).subject == whose
    # Another person's move must not replace the user's home (and the user's must).
    assert (await _marks(tmp_path, BERLIN, new, 4))[BERLIN][0] == (whose is None)
