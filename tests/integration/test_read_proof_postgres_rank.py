"""Reads recorded on PostgreSQL prove byte for byte: a proof re-ranks them with ts_rank.

Before engine/_tsrank.py a proof re-ranked every full-text read with SQLite's
BM25, which orders close texts otherwise than ``ts_rank``: most exact and
hybrid fetches over texts of repeated words failed ``verify_read``, naming the
hit that moved. Here a run on each store fetches such texts in both modes,
and every step's proof must verify byte for byte, scores included. On SQLite
the same run is the control.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from close_texts import READS, SCOPE, STORES, WORDS, record_close

import memseal
from memseal.engine import HashingEmbedder
from memseal.replay.evidence.read_proof import verify_read


@pytest.mark.parametrize("mode", ["exact", "hybrid"])
async def test_every_fetch_of_close_texts_proves_byte_for_byte(
    tmp_path: Path, store_url: str | None, mode: str
) -> None:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        async with m.run("close", SCOPE) as run:
            _, seen = await record_close(run, mode=mode)
        proofs = [await m.prove_read("close", STORES + k) for k in range(READS)]
        vkey = m.vkey
    assert sum(len(r["hits"]) for r in seen) > 16  # the reads ranked many close hits
    ranker = "sqlite" if store_url is None else "postgresql"
    for k, proof in enumerate(proofs):
        verified = await verify_read(proof, vkey)
        assert verified.result == seen[k]
        assert (verified.how, verified.ranked_by) == ("byte for byte", ranker), verified.why


async def test_a_proof_naming_an_unknown_ranker_is_refused(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("r", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the ledger store"}})
            await run.call("memory_fetch", {"query": "ledger", "mode": "exact"})
        proof = await m.prove_read("r", 1)
        vkey = m.vkey
    forged = proof.replace(b'"ranked_by":"sqlite"', b'"ranked_by":"mysql"')
    assert forged != proof
    with pytest.raises(memseal.VerificationError, match="ranked_by"):
        await verify_read(forged, vkey)


async def test_a_view_as_of_now_ranks_full_text_as_the_live_store(
    tmp_path: Path, store_url: str | None
) -> None:
    # A view is rebuilt on SQLite: of a PostgreSQL memory it must still rank with ts_rank,
    # or "what the memory held" would come back in another order than the agent saw it.
    rnd = random.Random(9)
    async with memseal.open(tmp_path / "d", store=store_url, embedder=None) as m:
        for _ in range(12):
            text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 9)))
            await m.call("memory_store", {"learning": {"text": text}}, scope=SCOPE)
        size = (await m.ledger.head()).size
        view = (await m.as_of(size)).tools(SCOPE)
        for _ in range(6):
            asked = {"query": " ".join(rnd.sample(WORDS, 2)), "mode": "exact", "limit": 20}
            _, live = await m.call("memory_fetch", asked, scope=SCOPE)
            past = await view.call("memory_fetch", asked)
            assert [h["id"] for h in past["hits"]] == [h["id"] for h in live["hits"]]
            assert [h["score"] for h in past["hits"]] == [h["score"] for h in live["hits"]]
