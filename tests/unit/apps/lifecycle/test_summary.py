"""The default compaction summary: the user's statements, each line dated by its turn."""

from __future__ import annotations

from memseal.apps.lifecycle import ExtractiveSummariser, FoldedTurn
from memseal.apps.lifecycle._current import summary_lines


def _turn(seq: int, said: str, day: str = "2026-02-03") -> FoldedTurn:
    return FoldedTurn(
        id=f"{seq:032x}",
        ledger_ref=seq,
        text=f"user: {said}\nassistant: Okay.",
        observed_at=f"{day}T09:00:00Z",
    )


async def test_each_line_carries_its_turns_seq_and_day() -> None:
    summary = await ExtractiveSummariser().summarise(
        None,
        [_turn(7, "I live in Berlin. Where is the station?"), _turn(9, "Can you help me?")],
        1_000,
    )
    assert summary.split("\n") == ["- [#7 2026-02-03] I live in Berlin."]
    assert [(line.seq, line.day, line.text) for line in summary_lines(summary)] == [
        (7, "2026-02-03", "I live in Berlin.")
    ]


async def test_a_newer_line_about_the_same_subject_replaces_the_older() -> None:
    first = await ExtractiveSummariser().summarise(
        None, [_turn(3, "My favourite editor is vim."), _turn(4, "My dog is called Rex.")], 1_000
    )
    summary = await ExtractiveSummariser().summarise(
        first, [_turn(8, "My favourite editor is helix now.", day="2026-03-01")], 1_000
    )
    assert summary.split("\n") == [
        "- [#4 2026-02-03] My dog is called Rex.",
        "- [#8 2026-03-01] My favourite editor is helix now.",
    ]


async def test_an_older_summarys_undated_lines_are_kept_and_still_read() -> None:
    summary = await ExtractiveSummariser().summarise(
        "- I like trains.", [_turn(5, "The deploy runs on Tuesdays.")], 1_000
    )
    assert summary.split("\n") == [
        "- I like trains.",
        "- [#5 2026-02-03] The deploy runs on Tuesdays.",
    ]
    assert summary_lines(summary)[0].seq is None
