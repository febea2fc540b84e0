"""The currency rule's versions: a read recorded under one re-derives under it, whatever
the version new reads follow (each version's reading of a text is frozen with it)."""

from __future__ import annotations

from pathlib import Path

import msgspec

import memseal
from memseal.engine import HashingEmbedder
from memseal.engine.aboutness import About, about
from memseal.engine.currency import RULES, VERSION, Candidate, current_first, following, in_force
from memseal.replay.evidence.read_proof import verify_read

SCOPE = memseal.ToolScope.placed_at("user:dana")
# Read 3 as the speaker's (a name before a verb that is no auxiliary), read 4 as Kofi's.
KOFI = "Kofi works at the harbour cafe by the old mill."
MINE = "I work at the harbour cafe by the old mill now."
# Read 3 as a supposition, read 4 as a fact (a real conditional).
FERRY = "I cycle to the harbour cafe if the ferry is late."


def _cand(seq: int, text: str, day: int) -> Candidate:
    return Candidate(
        seq=seq, id=f"id{seq}", observed_at=f"2026-03-{day:02d}T00:00:00.000000Z", text=text
    )


def test_version_4_reads_with_reading_4_and_version_3_as_before() -> None:
    assert VERSION == 4 and RULES[3].reading == 3
    # Version 4 is version 3 read with reading 4, nothing else.
    assert msgspec.structs.replace(RULES[3], version=4, reading=4) == RULES[4]
    with following(3):
        assert in_force(True) == RULES[3]
    cands = {1: _cand(1, KOFI, 1), 2: _cand(2, MINE, 2)}
    ranked = [(1, 0.9), (2, 0.8)]
    # Version 3 read Kofi's job as the user's, so the user's newer job replaced it.
    assert current_first(ranked, cands, RULES[3]) == ([(2, 0.8), (1, 0.9)], {1: "id2"})
    assert current_first(ranked, cands, RULES[4]) == (ranked, {})


async def test_a_read_recorded_under_version_3_proves_as_it_ran(tmp_path: Path) -> None:
    async with memseal.open(
        tmp_path / "d", embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        async with m.run("r", SCOPE) as run:
            for text in (KOFI, FERRY, MINE):
                await run.call("memory_store", {"learning": {"text": text}})
            with following(3):
                before = await run.call("memory_fetch", {"query": "harbour cafe old mill"})
            now = await run.call("memory_fetch", {"query": "harbour cafe old mill"})
        proofs = [await m.prove_read("r", step) for step in (3, 4)]
        vkey = m.vkey
    for seen, reading in ((before, 3), (now, 4)):
        marks = {h["text"]: (h.get("subject"), h.get("hypothetical")) for h in seen["hits"]}
        for text in (KOFI, FERRY, MINE):
            read = about(text, reading)
            assert marks[text] == (read.subject, read.hypothetical or None), (reading, text)
    assert about(KOFI, 3) == About() and about(FERRY, 3) == About(hypothetical=True)
    assert about(KOFI, 4) == About(subject="Kofi") and about(FERRY, 4) == About()
    # Version 3 read Kofi's job as the user's: the user's newer one replaced it.
    assert [h.get("superseded_by") is not None for h in before["hits"] if h["text"] == KOFI] == [
        True
    ]
    assert not any("superseded_by" in h for h in now["hits"] if h["text"] == KOFI)
    # Each re-derived under the version its call signed, whatever this memseal's current one.
    for proof, seen in zip(proofs, (before, now), strict=True):
        verified = await verify_read(proof, vkey)
        assert verified.result == seen and verified.how == "byte for byte", verified.why
