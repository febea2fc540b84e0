"""Read proofs on a real data folder: written from Python, the CLI and HTTP, checked offline.

Each proof is verified with nothing but its bytes and the ledger's vkey (no data
folder: the folder is moved away first where it matters), and the read is
re-derived from its entries and compared with what the agent saw.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from read_proof_support import (
    FETCH,
    LIST,
    PLACE,
    RECALL,
    RUN,
    SCOPE,
    SEMANTIC,
    edit,
    prove,
    record,
)
from test_service_support import ServerThread, assert_error

import memseal
from memseal import InvalidRequest, NotFound, ToolScope
from memseal.engine import HashingEmbedder
from memseal.replay.evidence.read_proof import (
    FORMAT,
    ReadProofError,
    decode_read_proof,
    verify_read,
)

MEMSEAL = Path(sys.executable).with_name("memseal")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MEMSEAL), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import asyncio

    return asyncio.run(record(tmp_path_factory.mktemp("rp") / "data"))


@pytest.mark.parametrize(
    ("step", "disclose"), [(FETCH, "all"), (LIST, "reach"), (SEMANTIC, "reach"), (RECALL, "all")]
)
async def test_each_read_re_derives_from_its_proof_alone(
    recorded: Any, step: int, disclose: str
) -> None:
    data = await prove(recorded.folder, step, disclose=disclose)
    proof = decode_read_proof(data)
    assert proof.format == FORMAT and (proof.run_id, proof.step) == (RUN, step)
    verified = await verify_read(data, recorded.vkey)
    assert verified.how == "byte for byte", verified.why
    assert verified.result == recorded.results[step] == verified.derived
    assert (verified.run_id, verified.step) == (RUN, step)
    # Every entry before the read travels (completeness).
    assert [e.seq for e in proof.prefix] == list(range(verified.size))
    texts = b"".join(e.payload or b"" for e in proof.prefix)
    # Texts: those in the run's reach, and others only when asked for.
    assert (b"other team" in texts) == (disclose == "all")
    assert verified.line().startswith(f"ok: step {step} of run 'r1'")


async def test_an_exact_fetch_whose_ranking_needs_withheld_texts_fails_and_says_why(
    recorded: Any,
) -> None:
    # Within the reach only, BM25 statistics lack the other tenant's texts, and here they
    # change the order: the verifier cannot re-derive the read and names what is missing.
    data = await prove(recorded.folder, FETCH)
    assert b"other team" not in data
    with pytest.raises(ReadProofError) as failed:
        await verify_read(data, recorded.vkey)
    assert failed.value.step == "result" and failed.value.field == "result"
    assert "3 stored item(s) outside the read's reach are withheld" in str(failed.value)
    assert "--disclose all" in str(failed.value)


async def test_a_read_whose_order_needs_no_withheld_text_matches_all_but_scores(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        await m.call(
            "memory_store",
            {"learning": {"text": "deploy notes for the other team"}},
            scope=ToolScope.placed_at("team:other/agent:x"),
        )
        async with m.run("s", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the deploy key is in vault"}})
            await run.call("memory_store", {"learning": {"text": "deploy on fridays: never"}})
            recorded = await run.call("memory_fetch", {"query": "deploy key", "mode": "exact"})
        reach, every = await m.prove_read("s", 2), await m.prove_read("s", 2, disclose="all")
        vkey = m.vkey
    partly = await verify_read(reach, vkey)
    assert partly.how == "within tolerance" and partly.derived != recorded
    assert "scores not compared: 1 stored item(s) outside the read's reach" in partly.why
    assert [h["id"] for h in partly.derived["hits"]] == [h["id"] for h in recorded["hits"]]
    assert "scores not compared" in partly.line()
    whole = await verify_read(every, vkey)
    assert whole.how == "byte for byte" and whole.derived == recorded


async def test_list_and_semantic_reads_match_byte_for_byte_within_the_reach(
    recorded: Any,
) -> None:
    for step in (LIST, SEMANTIC):
        verified = await verify_read(await prove(recorded.folder, step), recorded.vkey)
        assert verified.how == "byte for byte", (step, verified.why)
        assert verified.derived == recorded.results[step]
    semantic = await verify_read(await prove(recorded.folder, SEMANTIC), recorded.vkey)
    assert semantic.embedder == HashingEmbedder().id


async def test_a_semantic_read_without_its_embedder_fails_and_says_which(recorded: Any) -> None:
    data = await prove(recorded.folder, SEMANTIC)
    with pytest.raises(ReadProofError) as failed:
        await verify_read(data, recorded.vkey, embedder="none")
    assert failed.value.step == "result" and failed.value.field == "result"
    assert "hashing-v1" in str(failed.value) and "not available here" in str(failed.value)


async def test_writes_failed_calls_and_unknown_steps_are_refused_by_name(
    recorded: Any, tmp_path: Path
) -> None:
    with pytest.raises(InvalidRequest, match="memory_store call: a read proof proves"):
        await prove(recorded.folder, 0)
    with pytest.raises(NotFound, match="no recorded step 99"):
        await prove(recorded.folder, 99)
    async with memseal.open(recorded.folder, embedder=None, checkpoint_interval=None) as m:
        with pytest.raises(NotFound, match="no run 'nope'"):
            await m.prove_read("nope", 0)
        with pytest.raises(InvalidRequest, match="`step`"):
            await m.prove_read(RUN, -1)
        with pytest.raises(InvalidRequest, match="`disclose`"):
            await m.prove_read(RUN, FETCH, disclose="everything")  # type: ignore[arg-type]
    folder = tmp_path / "failed"
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as m:
        async with m.run("bad", SCOPE) as run:
            with pytest.raises(InvalidRequest):
                await run.call("memory_get", {"ids": []})
        with pytest.raises(InvalidRequest, match="failed: it read no memory"):
            await m.prove_read("bad", 0)


async def test_a_read_of_memory_forgotten_since_cannot_be_proven(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("f", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the pager code is 4471"}})
            found = await run.call("memory_fetch", {"query": "pager code"})
            await run.call("memory_forget", {"ids": [found["hits"][0]["id"]]})
        with pytest.raises(InvalidRequest, match="erased"):
            await m.prove_read("f", 1)


async def test_a_proof_verifies_across_a_key_rotation_and_at_a_stored_checkpoint(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        first = m.vkey
        stored = {"learning": {"text": "rotate the keys yearly"}}
        async with m.run("k", SCOPE) as run:
            await run.call("memory_store", stored)
            await run.call("memory_list", {})  # step 1: no checkpoint of its size is stored
            await m.ledger.checkpoint()  # step 2's observed size has one
            await run.call("memory_list", {})
        await m.rotate_key()
        async with m.run("k", SCOPE) as run:  # resumed: steps 0 to 2 replay from their memos
            await run.call("memory_store", stored)
            await run.call("memory_list", {})
            await run.call("memory_list", {})
            await run.call("memory_fetch", {"query": "keys"})  # step 3: after the rotation
        proofs = [await m.prove_read("k", step) for step in (1, 2, 3)]
        sizes = {c.size for c in await m.ledger.checkpoints()}
    found = [decode_read_proof(p) for p in proofs]
    observed = [len(p.prefix) for p in found]
    assert observed[0] not in sizes and observed[1] in sizes  # signed now, and the stored one
    assert any(e.seq >= observed[0] for e in found[0].later if e.payload is None)  # rotation
    for data in proofs:
        verified = await verify_read(data, first)  # the first key, through the hand-over
        assert verified.how == "byte for byte"
        assert len(verified.keys) == 2
    with pytest.raises(ReadProofError) as failed:  # the hand-over left out
        await verify_read(
            edit(proofs[0], later=tuple(e for e in found[0].later if e.payload is not None)),
            first,
        )
    assert failed.value.step in ("unknown key", "checkpoint"), failed.value


async def test_the_cli_round_trip_needs_no_data_folder(recorded: Any, tmp_path: Path) -> None:
    folder = tmp_path / "data"
    shutil.copytree(recorded.folder, folder)
    made = cli(
        "prove-read", "data", "--run", RUN, "--step", str(LIST), "-o", "p.json", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    assert "verify it with: memseal verify-read p.json --trust" in made.stdout
    shutil.rmtree(folder)  # offline: the auditor has the proof and the key, nothing else
    checked = cli("verify-read", "p.json", "--trust", recorded.vkey, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("ok: step 3 of run 'r1' (memory_list")
    assert "byte for byte" in checked.stdout
    # A byte flipped in the file: exit 1, naming the step.
    raw = bytearray((tmp_path / "p.json").read_bytes())
    raw[raw.index(b'"sig":"') + 12] ^= 0x01
    (tmp_path / "q.json").write_bytes(bytes(raw))
    failed = cli("verify-read", "q.json", "--trust", recorded.vkey, cwd=tmp_path)
    assert failed.returncode == 1 and failed.stderr.startswith("FAILED: "), failed.stderr


def test_the_cli_writes_no_proof_that_would_not_verify(recorded: Any, tmp_path: Path) -> None:
    args = ("prove-read", str(recorded.folder), "--run", RUN, "--step", str(FETCH))
    refused = cli(*args, "-o", "p.json", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "not written, the proof would not verify" in refused.stderr
    assert "--disclose all" in refused.stderr and not (tmp_path / "p.json").exists()
    made = cli(*args, "--disclose", "all", "-o", "p.json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    checked = cli("verify-read", "p.json", "--trust", recorded.vkey, cwd=tmp_path)
    assert checked.returncode == 0 and "byte for byte" in checked.stdout, checked.stderr


def test_the_cli_refuses_a_bundle_a_write_and_a_missing_file(recorded: Any, tmp_path: Path) -> None:
    bundle = tmp_path / "run.bundle"
    bundle.write_text("{}")
    refused = cli("prove-read", str(bundle), "--run", RUN, "--step", "2", "-o", "p", cwd=tmp_path)
    assert refused.returncode == 1 and "not a memseal bundle" in refused.stderr
    write = cli(
        "prove-read", str(recorded.folder), "--run", RUN, "--step", "0", "-o", "p", cwd=tmp_path
    )
    assert write.returncode == 2 and "not a write" in write.stderr
    assert not (tmp_path / "p").exists()
    missing = cli("verify-read", "nothing.json", "--trust", recorded.vkey, cwd=tmp_path)
    assert missing.returncode == 2 and "no proof file" in missing.stderr
    bad_key = cli("verify-read", str(bundle), "--trust", "not-a-key", cwd=tmp_path)
    assert bad_key.returncode == 2 and "`trust`" in bad_key.stderr


def test_the_http_route_serves_the_proof_to_the_run_s_owner(tmp_path: Path) -> None:
    with ServerThread(tmp_path / "svc") as server:
        agent = server.client(server.token("agent", PLACE))
        other = server.client(server.token("agent", "team:other/agent:y"))
        with agent, other:
            r = agent.post(
                "/v1/runs/web/tools/memory_store",
                json={"learning": {"text": "the staging database is pg-7"}},
            )
            assert r.status_code == 200, r.text
            r = agent.post("/v1/runs/web/tools/memory_fetch", json={"query": "staging database"})
            assert r.status_code == 200, r.text
            got = agent.get("/v1/runs/web/steps/1/read-proof")
            assert got.status_code == 200, got.text
            assert "web-step1.read-proof" in got.headers["content-disposition"]
            assert_error(other.get("/v1/runs/web/steps/1/read-proof"), 404)
            assert_error(agent.get("/v1/runs/web/steps/0/read-proof"), 400)
            assert_error(agent.get("/v1/runs/web/steps/7/read-proof"), 404)
            for bad in ("x", "-1"):
                body = assert_error(agent.get(f"/v1/runs/web/steps/{bad}/read-proof"), 400)
                assert "step" in body["error"]["message"], body
            body = assert_error(agent.get("/v1/runs/web/steps/1/read-proof?disclose=some"), 400)
            assert "disclose" in body["error"]["message"], body
            # Another tenant's text lands before a later read: disclose=all would carry it.
            r = other.post(
                "/v1/tools/memory_store", json={"learning": {"text": "zsecret payroll numbers"}}
            )
            assert r.status_code == 200, r.text
            r = agent.post("/v1/runs/web/tools/memory_list", json={})
            assert r.status_code == 200, r.text
            body = assert_error(agent.get("/v1/runs/web/steps/2/read-proof?disclose=all"), 403)
            assert "outside your reach" in body["error"]["message"], body
            within = agent.get("/v1/runs/web/steps/2/read-proof")
            assert within.status_code == 200, within.text
            carried = decode_read_proof(within.content).prefix
            assert not any(b"zsecret" in (e.payload or b"") for e in carried)
        vkey = server.app.state.service.memory.trust_root
    import asyncio

    verified = asyncio.run(verify_read(got.content, vkey))
    assert verified.how == "byte for byte" and verified.tool == "memory_fetch"
    assert verified.result["hits"][0]["text"] == "the staging database is pg-7"


async def test_a_page_s_cursor_is_compared_but_for_its_keyed_ref_and_a_later_page_refused(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("p", SCOPE) as run:
            for n in range(3):
                await run.call("memory_store", {"learning": {"text": f"note number {n}"}})
            first = await run.call("memory_list", {"limit": 2})
            assert first["next_cursor"]
            await run.call("memory_list", {"limit": 2, "cursor": first["next_cursor"]})
        proof = await m.prove_read("p", 3)
        with pytest.raises(InvalidRequest, match="continues from a `cursor`"):
            await m.prove_read("p", 4)
        vkey = m.vkey
    verified = await verify_read(proof, vkey)
    assert verified.how == "within tolerance" and "next_cursor's query ref" in verified.why
    assert "every other field byte for byte" in verified.why
    assert verified.result == first
    # The re-derived cursor has another keyed ref, and points at the same page.
    assert verified.derived["next_cursor"] != first["next_cursor"]
    assert {k: v for k, v in verified.derived.items() if k != "next_cursor"} == {
        k: v for k, v in first.items() if k != "next_cursor"
    }


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("memory_get", None),
        ("memory_explore", {"facet": "kind"}),
        ("memory_fetch", {"query": "ledger store", "mode": "exact"}),
    ],
)
async def test_every_read_tool_on_each_store(
    tmp_path: Path, store_url: str | None, tool: str, arguments: dict[str, Any] | None
) -> None:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=None, checkpoint_interval=None
    ) as m:
        async with m.run("each", SCOPE) as run:
            stored = await run.call("memory_store", {"learning": {"text": "the ledger store"}})
            await run.call("memory_store", {"learning": {"text": "a second store note"}})
            asked = {"ids": [stored["id"]]} if arguments is None else arguments
            seen = await run.call(tool, asked)
        proof = await m.prove_read("each", 2)
        vkey = m.vkey
    verified = await verify_read(proof, vkey)
    assert verified.tool == tool and verified.result == seen
    # A PostgreSQL read re-ranks with ts_rank's own arithmetic: scores and all, byte for byte.
    assert verified.how == "byte for byte", verified.why
    assert verified.ranked_by == ("sqlite" if store_url is None else "postgresql")
