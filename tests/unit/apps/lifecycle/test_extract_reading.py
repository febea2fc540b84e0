"""The rule extractor reads with the sentence reading its recorded jobs were read with.

A belief job is replayed by re-running the rules, so a newer engine reading (which reads
some sentences otherwise) must not change what the extractor draws from the same turns.
"""

from __future__ import annotations

import pytest

from memseal.apps.lifecycle import Belief, RuleExtractor, SourceTurn, _extract
from memseal.engine.aboutness import READING, Sentence, sentences


async def _read(said: str) -> list[Belief]:
    return list(await RuleExtractor().extract([SourceTurn(item="t0", role="user", text=said)]))


@pytest.mark.parametrize(
    ("said", "texts"),
    [
        # Reading 3 reads the opening "if" as a condition: nothing is stated.
        ("If you ask me, I live in Porto.", []),
        ("I moved in with my wife Naledi in Melville.", []),
    ],
)
async def test_the_extractor_reads_with_reading_3(said: str, texts: list[str]) -> None:
    assert [b.text for b in await _read(said)] == texts


async def test_the_extractor_asks_for_reading_3(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever the engine's current reading reads, the rules read with reading 3.
    asked: list[int] = []

    def spy(text: str, reading: int = READING) -> tuple[Sentence, ...]:
        asked.append(reading)
        return sentences(text, reading)

    monkeypatch.setattr(_extract, "sentences", spy)
    await _read("If you ask me, I live in Porto. I moved in with my wife Naledi in Melville.")
    assert asked and set(asked) == {3}
