"""A session recorded on PostgreSQL replays ranked as PostgreSQL ranked it.

``memseal replay`` re-executes a bundle's calls on a temporary SQLite log. It
used to rank every full-text read there with SQLite's BM25, so an exact or
hybrid fetch recorded on PostgreSQL (``ts_rank``) over close texts replayed in
another order and CI reported a regression that was none. The signed manifest
now states ``ranked_by`` when PostgreSQL ranked the run's reads, and replay
re-ranks with ``ts_rank`` re-computed in Python.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from close_texts import READS, SCOPE, STORES, record_close

import memseal
from memseal.engine import HashingEmbedder
from memseal.ledger.errors import VerificationError
from memseal.ledger.note import sign_note
from memseal.replay.evidence.bundle import (
    encode_bundle,
    export_bundle,
    manifest_text,
    verify_bundle,
)
from memseal.replay.regress._update import local_key, update
from memseal.replay.regress.regress import regress


@pytest.mark.parametrize("mode", ["exact", "hybrid"])
async def test_a_recorded_session_replays_with_its_stores_ranking(
    tmp_path: Path, store_url: str | None, mode: str
) -> None:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=HashingEmbedder(), checkpoint_interval=None
    ) as m:
        async with m.run("close", SCOPE) as run:
            await record_close(run, mode=mode)
        bundle = encode_bundle(await export_bundle(m.ledger, await m.key_history(), "close"))
        vkey = m.vkey
    verified = verify_bundle(bundle, vkey)
    on_postgres = store_url is not None
    assert verified.manifest.ranked_by == ("postgresql" if on_postgres else None)
    report = await regress(verified, embedder=HashingEmbedder())
    assert not report.changed, report.text()
    assert len(report.steps) == STORES + READS
    said = any("ts_rank" in note for note in report.notes)
    assert said is on_postgres, report.notes

    # `replay --update` re-records on SQLite: it must rank as the recording did and say so.
    local_key(tmp_path / "replay-key")
    updated = await update(verified, key_folder=tmp_path / "replay-key", embedder=HashingEmbedder())
    again = verify_bundle(encode_bundle(updated.bundle), updated.vkey)
    assert again.manifest.ranked_by == verified.manifest.ranked_by
    recorded = [c.result for c in verified.calls if c.call.tool == "memory_fetch"]
    redone = [c.result for c in again.calls if c.call.tool == "memory_fetch"]
    # Its writes made new ids (no --against), so the orders are compared by score.
    assert [[h["score"] for h in r["hits"]] for r in redone] == [
        [h["score"] for h in r["hits"]] for r in recorded
    ]
    assert not (await regress(again, embedder=HashingEmbedder())).changed


async def _signed_with(
    tmp_path: Path, *, reads_ranked_by: str | None = None, **changes: object
) -> tuple[bytes, str]:
    """A bundle whose manifest, changed so, the log's own key signs again (and whose
    reads section, with ``reads_ranked_by``, names that ranking in both places)."""
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("r", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the ledger store"}})
            await run.call("memory_fetch", {"query": "ledger", "mode": "exact"})
        exported = await export_bundle(m.ledger, await m.key_history(), "r", with_read_proofs=True)
        manifest = verify_bundle(encode_bundle(exported), m.vkey).manifest
        if reads_ranked_by is not None:
            assert manifest.reads is not None and exported.reads is not None
            stated = msgspec.structs.replace(manifest.reads, ranked_by=reads_ranked_by)
            changes["reads"] = stated
            section = msgspec.structs.replace(exported.reads, ranked_by=reads_ranked_by)
            exported = msgspec.structs.replace(exported, reads=section)
        edited = msgspec.structs.replace(manifest, **changes)
        note = sign_note(manifest_text(edited), [m.ledger.signer])
        return encode_bundle(msgspec.structs.replace(exported, manifest=note)), m.vkey


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ("mysql", "ranked_by 'mysql'"),
        # The reads section was ranked by SQLite: a manifest cannot say otherwise.
        ("postgresql", "a reads section ranked by 'sqlite'"),
        # Replay would hand the section's own value to the engine: refused before.
        ("reads:mysql", "a reads section ranked by 'mysql'"),
    ],
)
async def test_a_manifest_naming_another_ranking_fails(
    tmp_path: Path, changed: str, said: str
) -> None:
    if changed.startswith("reads:"):
        data, vkey = await _signed_with(tmp_path, reads_ranked_by=changed[len("reads:") :])
    else:
        data, vkey = await _signed_with(tmp_path, ranked_by=changed)
    with pytest.raises(VerificationError, match=said) as failed:
        verify_bundle(data, vkey)
    assert failed.value.step == "manifest"
