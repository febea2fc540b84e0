"""The currency rule through every read: newer facts above the ones they replace.

On each store, in exact, semantic and hybrid fetch and in recall, a newer memory
about the same subject outranks the older one, which stays, marked ``superseded_by``;
a host that turns the rule off gets the old order. Each read proves byte for byte
(``verify_read``) and a bundle of the run replays unchanged; a read recorded with the
rule off (as every read before it) re-derives without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from bundle_support import run_bundle

import memseal
from memseal.engine import HashingEmbedder
from memseal.engine.currency import VERSION, following
from memseal.replay.evidence.read_proof import verify_read
from memseal.replay.regress.regress import regress

SCOPE = memseal.ToolScope.placed_at("user:dana")
OLD = "My team lead at the office is Priya."
NEW = "Since March my team lead at the office is Daniel."
OTHER = "My brother Tomas leads the bakery team."
MAYBE = "If I ever changed teams I would ask Priya to lead the office."
READS: list[tuple[str, dict[str, Any]]] = [
    ("memory_fetch", {"query": "Priya team lead", "mode": mode})
    for mode in ("exact", "semantic", "hybrid")
] + [("memory_recall", {"question": "Who is Priya, my team lead?"})]


async def _record(folder: Path, store_url: str | None, currency: bool) -> tuple[list[Any], Any]:
    async with memseal.open(
        folder,
        store=store_url,
        embedder=HashingEmbedder(),
        checkpoint_interval=None,
        currency=currency,
    ) as m:
        async with m.run("r", SCOPE) as run:
            ids = {}
            for text in (OLD, OTHER, MAYBE, NEW):  # observed in this order, by the clock
                stored = await run.call("memory_store", {"learning": {"text": text}})
                ids[text] = stored["id"]
            seen = [await run.call(name, args) for name, args in READS]
        proofs = [await m.prove_read("r", 4 + k) for k in range(len(READS))]
        bundle = await run_bundle(m, "r")
        return [seen, proofs, ids, m.vkey], bundle


@pytest.mark.parametrize("currency", [True, False])
async def test_newer_facts_outrank_older_ones_and_every_read_proves(
    tmp_path: Path, store_url: str | None, currency: bool
) -> None:
    (seen, proofs, ids, vkey), bundle = await _record(tmp_path / "d", store_url, currency)
    for (name, _), result in zip(READS, seen, strict=True):
        if name == "memory_recall":
            cited = [c["id"] for c in result["citations"]]
            assert (cited.index(ids[NEW]) < cited.index(ids[OLD])) is currency
            continue
        hits = {h["id"]: (k, h) for k, h in enumerate(result["hits"])}
        new_at, _ = hits[ids[NEW]]
        old_at, old = hits[ids[OLD]]
        assert (new_at < old_at) is currency, result
        if currency:
            assert old["superseded_by"] == ids[NEW]
            assert hits[ids[OTHER]][1]["subject"] == "Tomas"
            assert hits[ids[MAYBE]][1]["hypothetical"] is True
        else:
            assert not any(
                {"superseded_by", "subject", "hypothetical"} & set(h) for h in result["hits"]
            )
    # The read proofs re-derive the reads as they ran, rule or none, byte for byte.
    for k, proof in enumerate(proofs):
        verified = await verify_read(proof, vkey)
        assert verified.result == seen[k]
        assert verified.how == "byte for byte", verified.why
    # Each read's signed call names the rule it followed; a write, or the rule off, none.
    calls = {c.call.step: c.call for c in bundle.calls}
    assert calls[0].currency is msgspec.UNSET
    for k in range(len(READS)):
        assert calls[4 + k].currency == (VERSION if currency else msgspec.UNSET)
    report = await regress(bundle, embedder=HashingEmbedder())
    assert not report.changed, report.text()


async def test_a_bad_setting_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(memseal.InvalidRequest, match="`currency`"):
        async with memseal.open(tmp_path / "d", embedder=None, currency="on"):  # type: ignore[arg-type]
            pass
    assert not (tmp_path / "d").exists()


# Read 1 as another person's fact (a relation qualified before its name), the current
# version as the user's own; a hedge read 1 as a supposition.
QUALIFIED = "My boss over at the warehouse is Ngozi."
HEDGED = "We rent a flat in Dundee now, I suppose."
# A question logged as a memory: from version 3 it goes after what states something.
ASKED = "Is the warehouse in Dundee near the flat in Dundee?"
# From version 3 (reading 3), a sentence opened by someone's name is theirs.
NAMED = "Bartek has a boat near Dundee."


@pytest.mark.parametrize("version", [1, 2, VERSION])
async def test_a_read_recorded_under_an_earlier_version_proves_as_it_ran(
    tmp_path: Path, store_url: str | None, version: int
) -> None:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        async with m.run("r", SCOPE) as run:
            for text in (QUALIFIED, HEDGED, ASKED, NAMED):
                await run.call("memory_store", {"learning": {"text": text}})
            with following(version):
                seen = await run.call("memory_fetch", {"query": "boss warehouse flat Dundee"})
        proof = await m.prove_read("r", 4)
        bundle = await run_bundle(m, "r")
        vkey = m.vkey
    marks = {h["text"]: (h.get("subject"), h.get("hypothetical")) for h in seen["hits"]}
    expected: dict[str, tuple[str | None, bool | None]] = {
        QUALIFIED: (None, None),
        HEDGED: (None, None),
        ASKED: (None, None),
    }
    if version == 1:
        expected |= {QUALIFIED: ("someone", None), HEDGED: (None, True)}
    expected[NAMED] = ("Bartek" if version >= 3 else None, None)
    assert marks == expected
    texts = [h["text"] for h in seen["hits"]]
    assert (texts[0] == ASKED) is (version < 3) and (texts[-1] == ASKED) is (version >= 3)
    assert bundle.calls[4].call.currency == version
    # Re-derived under the version the call signed, whatever this memseal's current one.
    verified = await verify_read(proof, vkey)
    assert verified.result == seen and verified.how == "byte for byte", verified.why
    report = await regress(bundle, embedder=HashingEmbedder())
    assert not report.changed, report.text()
