"""Bundles with read proofs around an admin's forget: the forget's reason never travels.

A ``memory_forgotten`` entry's payload is the admin's actor and reason. An agent's export
(over real HTTP, real SQLite, real keys) carries the forget as its signed bytes alone, in
the bundle's entries and in its reads section, and is answered 200 where it was 403 (a
forget in reach before the read). The bundle verifies and its reads are still proven. An
export that a forget races (committed between the checkpoint and the scans) starts again
and verifies, where it made a bundle failing on ``redaction``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from test_service_support import ServerThread

import memseal
from memseal.replay.evidence.bundle import (
    decode_bundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)
from memseal.replay.evidence.read_proof import (
    decode_read_proof,
    encode_read_proof,
    prove_read_from_bundle,
    verify_read,
)
from memseal.tools import ToolScope

PLACE = "team:acme/agent:writer"
REASON = "REASON-7f3q: a customer's data protection request"


def _store(client: httpx.Client, path: str, text: str) -> str:
    r = client.post(path, json={"learning": {"text": text}})
    assert r.status_code == 200, r.text
    return str(r.json()["result"]["id"])


def _forget(server: ServerThread, item: str) -> None:
    with server.client(server.admin) as admin:
        r = admin.post(f"/v1/admin/items/{item}/forget", json={"confirm": item, "reason": REASON})
        assert r.status_code == 200, r.text


def _reason_in(data: bytes) -> bool:
    """Whether the forget's reason is in the bundle: in its bytes, or in a payload (which
    the JSON carries as base64)."""
    bundle = decode_bundle(data)
    payloads = [e.payload for e in bundle.entries]
    if bundle.reads is not None:
        payloads += [e.payload for e in bundle.reads.prefix]
    return any(REASON.encode() in p for p in (data, *payloads) if p is not None)


async def _proves_the_list(data: bytes, vkey: str, step: int) -> Any:
    verified = verify_bundle(data, vkey)
    assert verified.bundle.reads is not None
    proof = encode_read_proof(prove_read_from_bundle(verified, step))
    assert REASON.encode() not in proof
    assert all(REASON.encode() not in (e.payload or b"") for e in decode_read_proof(proof).prefix)
    checked = await verify_read(proof, vkey)
    assert checked.how == "byte for byte"
    return checked.result


async def test_an_agents_export_never_carries_the_forget_reason(tmp_path: Path) -> None:
    # The run wrote the item an admin then forgot: the forget is one of the bundle's
    # entries (it says why the run's own texts are gone), once without read proofs too.
    with ServerThread(tmp_path / "svc") as server:
        with server.client(server.token("agent", PLACE)) as agent:
            _store(agent, "/v1/runs/web/tools/memory_store", "the staging database is pg-7")
            gone = _store(agent, "/v1/runs/web/tools/memory_store", "the intern's home address")
            _forget(server, gone)
            r = agent.post("/v1/runs/web/tools/memory_list", json={})
            assert r.status_code == 200, r.text
            full = agent.get("/v1/runs/web/export", params={"with_read_proofs": "true"})
            plain = agent.get("/v1/runs/web/export")
        vkey = server.app.state.service.memory.trust_root
    assert full.status_code == 200 and plain.status_code == 200, (full.text, plain.text)
    for data in (full.content, plain.content):
        assert not _reason_in(data)
        verified = verify_bundle(data, vkey)
        forgets = [e for e in verified.entries.values() if e.kind == "memory_forgotten"]
        assert len(forgets) == 1 and forgets[0].payload_hash is not None
    result = await _proves_the_list(full.content, vkey, 2)
    assert [item["text"] for item in result["items"]] == ["the staging database is pg-7"]


async def test_a_forget_in_reach_before_the_read_exports_for_the_agent(tmp_path: Path) -> None:
    # The forgotten item is not the run's: the forget lies in the reads section's prefix,
    # in the run's reach (it names an item of the agent's place).
    with ServerThread(tmp_path / "svc") as server:
        with server.client(server.token("agent", PLACE)) as agent:
            _store(agent, "/v1/tools/memory_store", "the staging database is pg-7")
            gone = _store(agent, "/v1/tools/memory_store", "the intern's home address")
            _forget(server, gone)
            r = agent.post("/v1/runs/web/tools/memory_list", json={})
            assert r.status_code == 200, r.text
            full = agent.get("/v1/runs/web/export", params={"with_read_proofs": "true"})
            # The read proof from the folder carries the forget alike (it was a 403 too).
            served = agent.get("/v1/runs/web/steps/0/read-proof")
        vkey = server.app.state.service.memory.trust_root
    assert full.status_code == 200, full.text
    assert served.status_code == 200, served.text
    folder_proof = decode_read_proof(served.content)
    assert all(REASON.encode() not in (e.payload or b"") for e in folder_proof.prefix)
    assert (await verify_read(served.content, vkey)).how == "byte for byte"
    reads = decode_bundle(full.content).reads
    assert reads is not None
    verified = verify_bundle(full.content, vkey)
    forgets = [p for p in reads.prefix if verified.prefix[p.seq].kind == "memory_forgotten"]
    assert len(forgets) == 1 and forgets[0].payload is None
    assert not _reason_in(full.content)
    result = await _proves_the_list(full.content, vkey, 0)
    assert [item["text"] for item in result["items"]] == ["the staging database is pg-7"]


async def test_an_export_a_forget_races_starts_again_and_verifies(tmp_path: Path) -> None:
    scope = ToolScope.placed_at(PLACE)
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        _, stored = await m.call(
            "memory_store", {"learning": {"text": "staging runs pg-7"}}, scope=scope
        )
        async with m.run("s", scope) as run:
            found = await run.call("memory_fetch", {"query": "zebra crossing", "mode": "exact"})
        assert found["hits"] == []  # the memory is in the read's reach, in the prefix only
        ledger = m.ledger
        cut = ledger.checkpoint
        sizes: list[int] = []

        async def checkpoint_then_forget() -> str:
            # The real checkpoint, then a real forget committed before the export's scans:
            # it erases a payload below the read, and its entry lies past the checkpoint.
            note = await cut()
            sizes.append(await ledger.size())
            if len(sizes) == 1:
                await m.engine.forget(ids=[stored["id"]], actor="admin", reason=REASON)
            return note

        ledger.checkpoint = checkpoint_then_forget  # type: ignore[method-assign]
        bundle = await export_bundle(ledger, await m.key_history(), "s", with_read_proofs=True)
        vkey = m.vkey
    data = encode_bundle(bundle)
    verified = verify_bundle(data, vkey)
    assert len(sizes) == 2 and sizes[1] > sizes[0]  # started again, against a new checkpoint
    assert any(e.kind == "memory_forgotten" for e in verified.entries.values())
    assert not _reason_in(data)


@pytest.mark.parametrize("with_read_proofs", [False, True])
def test_a_forget_after_the_export_read_a_text_makes_the_route_export_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_read_proofs: bool
) -> None:
    # The other order: the export read the text, then a forget committed before the route
    # answered. The bundle would be consistent with its checkpoint, but privacy wins: the
    # route sees the stored payload changed and makes the bundle again.
    import memseal.replay.evidence.bundle as bundles

    secret = "the intern's home address is 12 Elm Row"
    with ServerThread(tmp_path / "svc") as server:
        memory = server.app.state.service.memory
        real = bundles.export_bundle
        made: list[int] = []
        gone: list[str] = []

        async def export_then_forget(*args: Any, **kwargs: Any) -> Any:
            bundle = await real(*args, **kwargs)
            made.append(len(bundle.entries))
            if len(made) == 1:
                await memory.engine.forget(ids=gone, actor="admin", reason=REASON)
            return bundle

        with server.client(server.token("agent", PLACE)) as agent:
            gone.append(_store(agent, "/v1/runs/web/tools/memory_store", secret))
            r = agent.post("/v1/runs/web/tools/memory_list", json={})
            assert r.status_code == 200 and secret in r.text, r.text
            monkeypatch.setattr(bundles, "export_bundle", export_then_forget)
            params = {"with_read_proofs": "true"} if with_read_proofs else {}
            got = agent.get("/v1/runs/web/export", params=params)
        assert got.status_code == 200, got.text
        assert len(made) == 2 and made[1] > made[0]  # again, now with the forget
        bundle = decode_bundle(got.content)
        payloads = [e.payload for e in bundle.entries]
        if bundle.reads is not None:
            payloads += [e.payload for e in bundle.reads.prefix]
        assert all(secret.encode() not in p for p in (got.content, *payloads) if p is not None)
        verify_bundle(got.content, memory.trust_root)
