"""A session recorded on PostgreSQL replays ranked as PostgreSQL ranked it.

``memseal replay`` re-executes a bundle's calls on a temporary SQLite log. It
used to rank every full-text read there with SQLite's BM25, so an exact or
hybrid fetch recorded on PostgreSQL (``ts_rank``) over close texts replayed in
another order and CI reported a regression that was none. The signed manifest
now states ``ranked_by`` when PostgreSQL ranked the run's reads, and replay
re-ranks with ``ts_rank`` re-computed in Python.
"""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

import memseal
from memseal.engine import HashingEmbedder
from memseal.ledger.errors import VerificationError
from memseal.ledger.note import sign_note
from memseal.replay.bundle import encode_bundle, export_bundle, manifest_text, verify_bundle
from memseal.replay.regress import regress

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:reader")
_WORDS = ["alpha", "beta", "gamma", "delta", "ledger", "store", "memory", "proof"]


@pytest.mark.parametrize("mode", ["exact", "hybrid"])
async def test_a_recorded_session_replays_with_its_stores_ranking(
    tmp_path: Path, store_url: str | None, mode: str
) -> None:
    rnd = random.Random(5)
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        async with m.run("close", SCOPE) as run:
            for _ in range(12):
                text = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(2, 9)))
                await run.call("memory_store", {"learning": {"text": text}})
            for _ in range(8):
                query = " ".join(rnd.sample(_WORDS, rnd.randint(1, 3)))
                await run.call("memory_fetch", {"query": query, "mode": mode, "limit": 20})
        bundle = encode_bundle(await export_bundle(m.ledger, await m.key_history(), "close"))
        vkey = m.vkey
    verified = verify_bundle(bundle, vkey)
    on_postgres = store_url is not None
    assert verified.manifest.ranked_by == ("postgresql" if on_postgres else None)
    report = await regress(verified, embedder=HashingEmbedder())
    assert not report.changed, report.text()
    assert len(report.steps) == 20
    said = any("ts_rank" in note for note in report.notes)
    assert said is on_postgres, report.notes


async def _signed_with(tmp_path: Path, **changes: object) -> tuple[bytes, str]:
    """A bundle whose manifest, changed so, the log's own key signs again."""
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("r", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the ledger store"}})
            await run.call("memory_fetch", {"query": "ledger", "mode": "exact"})
        exported = await export_bundle(m.ledger, await m.key_history(), "r", with_read_proofs=True)
        manifest = verify_bundle(encode_bundle(exported), m.vkey).manifest
        edited = msgspec.structs.replace(manifest, **changes)
        note = sign_note(manifest_text(edited), [m.ledger.signer])
        return encode_bundle(msgspec.structs.replace(exported, manifest=note)), m.vkey


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ("mysql", "ranked_by 'mysql'"),
        # The reads section was ranked by SQLite: a manifest cannot say otherwise.
        ("postgresql", "a reads section ranked by 'sqlite'"),
    ],
)
async def test_a_manifest_naming_another_ranking_fails(
    tmp_path: Path, changed: str, said: str
) -> None:
    data, vkey = await _signed_with(tmp_path, ranked_by=changed)
    with pytest.raises(VerificationError, match=said) as failed:
        verify_bundle(data, vkey)
    assert failed.value.step == "manifest"
