"""The read-proof route checks the proof it built before serving it.

A store whose rows no longer match their signed hashes (a payload edited in
the database behind the service's back) must get a named 409, never a proof
that an auditor's ``verify-read`` would then reject, and never a 500.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

from test_service_support import ServerThread, assert_error

from memseal.engine import HashingEmbedder
from memseal.replay.evidence.bundle import decode_bundle, verify_bundle
from memseal.replay.evidence.read_proof import (
    decode_read_proof,
    encode_read_proof,
    prove_read_from_bundle,
    verify_read,
)

PLACE = "team:acme/agent:writer"


def test_a_proof_that_would_not_verify_is_refused_with_a_409_naming_the_check(
    tmp_path: Path,
) -> None:
    with ServerThread(tmp_path / "svc") as server:
        agent = server.client(server.token("agent", PLACE))
        with agent:
            r = agent.post(
                "/v1/runs/web/tools/memory_store",
                json={"learning": {"text": "the staging database is pg-7"}},
            )
            assert r.status_code == 200, r.text
            r = agent.post("/v1/runs/web/tools/memory_fetch", json={"query": "staging database"})
            assert r.status_code == 200, r.text
            good = agent.get("/v1/runs/web/steps/1/read-proof")
            assert good.status_code == 200, good.text
            stored = decode_read_proof(good.content)
            assert any(b"pg-7" in (e.payload or b"") for e in stored.prefix)
            # Same length, still JSON: only the signed payload hash can tell.
            with closing(sqlite3.connect(server.folder / "ledger.db")) as db, db:
                rows = db.execute("SELECT seq, data FROM payloads ORDER BY seq").fetchall()
                seq, data = next((s, bytes(d)) for s, d in rows if b"pg-7" in bytes(d))
                db.execute(
                    "UPDATE payloads SET data = ? WHERE seq = ?",
                    (data.replace(b"pg-7", b"pg-8"), seq),
                )
            bad = agent.get("/v1/runs/web/steps/1/read-proof")
            assert bad.status_code == 409, (bad.status_code, bad.text)
            body = bad.json()
            assert body["error"]["code"] == "read_proof_payload_hash_failed", body
            assert "would not verify" in body["error"]["message"], body
            assert body["seq"] == seq and body["step"] == "payload hash", body
            # An unrelated refusal still has its own status.
            assert_error(agent.get("/v1/runs/web/steps/7/read-proof"), 404)


class _HostEmbedder:
    """An embedder of the host's own, which ``verify_read``'s "auto" cannot rebuild."""

    id = "host-bag-of-words-reversed-v1"
    dim = 32

    def __init__(self) -> None:
        self._inner = HashingEmbedder(dim=self.dim)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [vector[::-1] for vector in self._inner.embed(texts)]


def test_an_honest_semantic_proof_is_served_when_the_service_has_its_own_embedder(
    tmp_path: Path,
) -> None:
    # The self-check re-derives the read with the service's own embedder: with "auto" it
    # would have none for this id, and refuse an honest semantic proof with a 409.
    server = ServerThread(tmp_path / "svc", embedder=_HostEmbedder())
    with server, server.client(server.token("agent", PLACE)) as agent:
        for text in ("the staging database is pg-7", "lunch is at noon", "deploy on fridays"):
            r = agent.post("/v1/runs/sem/tools/memory_store", json={"learning": {"text": text}})
            assert r.status_code == 200, r.text
        r = agent.post(
            "/v1/runs/sem/tools/memory_fetch",
            json={"query": "which database is staging", "mode": "semantic"},
        )
        assert r.status_code == 200, r.text
        assert r.json()["result"]["hits"], r.text
        proof = agent.get("/v1/runs/sem/steps/3/read-proof")
        assert proof.status_code == 200, proof.text
        assert _HostEmbedder.id in decode_read_proof(proof.content).embedders


async def test_a_bundle_exported_over_http_with_read_proofs_proves_its_reads(
    tmp_path: Path,
) -> None:
    with ServerThread(tmp_path / "svc") as server:
        with server.client(server.token("agent", PLACE)) as agent:
            for text in ("the staging database is pg-7", "lunch is at noon"):
                r = agent.post("/v1/runs/web/tools/memory_store", json={"learning": {"text": text}})
                assert r.status_code == 200, r.text
            r = agent.post("/v1/runs/web/tools/memory_list", json={})
            assert r.status_code == 200, r.text
            plain = agent.get("/v1/runs/web/export")
            full = agent.get("/v1/runs/web/export", params={"with_read_proofs": "true"})
            assert_error(agent.get("/v1/runs/web/export?with_read_proofs=maybe"), 400)
        vkey = server.app.state.service.memory.trust_root
    assert plain.status_code == 200 and full.status_code == 200, (plain.text, full.text)
    assert decode_bundle(plain.content).reads is None
    verified = verify_bundle(full.content, vkey)
    assert verified.bundle.reads is not None
    proof = prove_read_from_bundle(verified, 2)
    checked = await verify_read(encode_read_proof(proof), vkey)
    assert {item["text"] for item in checked.result["items"]} == {
        "the staging database is pg-7",
        "lunch is at noon",
    }
