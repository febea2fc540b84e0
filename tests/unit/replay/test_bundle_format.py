"""Bundles in-process: the negative vectors, forgets and key rotations, the Replayer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.ledger.errors import InvalidRequest, ReplayDivergence, VerificationError
from memseal.ledger.keys import key_history
from memseal.replay.evidence.bundle import (
    FORMAT,
    decode_bundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)
from memseal.replay.regress.regress import regress
from memseal.replay.regress.replayer import Replayer

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "tests/vectors/bundles"
TRUST = (VECTORS / "trust.vkey").read_text().strip()
EXPECTED: dict[str, Any] = json.loads((VECTORS / "expected.json").read_text())
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "durable_agent", ROOT / "examples/durable_agent.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector_fails_with_its_own_error(name: str) -> None:
    data = (VECTORS / name).read_bytes()
    expected = EXPECTED[name]
    if expected is None:
        assert verify_bundle(data, TRUST).run_id.startswith("nightly-report")
        return
    with pytest.raises(VerificationError) as caught:
        verify_bundle(data, TRUST)
    assert caught.value.step == expected["step"]
    assert caught.value.seq == expected["seq"]


def test_each_negative_vector_has_a_distinct_clear_message() -> None:
    messages = {}
    for name in ("tampered.bundle", "unknown-key.bundle", "truncated.bundle"):
        with pytest.raises(VerificationError) as caught:
            verify_bundle((VECTORS / name).read_bytes(), TRUST)
        messages[name] = str(caught.value)
    assert "payload does not match its hash" in messages["tampered.bundle"]
    assert "not reachable from the trusted key" in messages["unknown-key.bundle"]
    assert "truncated" in messages["truncated.bundle"]


def test_divergent_session_fails_the_replayer_at_the_step() -> None:
    play = _example().play
    replayer = Replayer.load(VECTORS / "divergent.bundle", trust=TRUST)
    with pytest.raises(ReplayDivergence) as caught:
        import asyncio

        asyncio.run(replayer.run(play))
    assert caught.value.step == 3
    assert "deploys" in str(caught.value)


async def test_replayer_returns_the_agents_output_from_memos_only() -> None:
    example = _example()
    replayer = Replayer.load(VECTORS / "good.bundle", trust=TRUST)
    output = await replayer.run(example.play)
    assert "6am" in output["answer"]

    async def stops_early(run: Any) -> None:
        await run.call(*example.SCRIPT[0])

    with pytest.raises(ReplayDivergence, match="never replayed"):
        await replayer.run(stops_early)

    async def goes_on(run: Any) -> None:
        for name, args in [*example.SCRIPT, ("memory_list", {})]:
            await run.call(name, args)

    with pytest.raises(ReplayDivergence, match="past the recorded end"):
        await replayer.run(goes_on)

    async def through_toolset(run: Any) -> str:
        tools = run.toolset()
        text = ""
        for name, args in example.SCRIPT:
            text = await tools.call(name, json.dumps(args))
        return text

    assert "6am" in await replayer.run(through_toolset)


async def test_bundle_with_forget_and_rotation_verifies_and_never_carries_forgotten_text(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path, embedder=None, checkpoint_interval=None) as memory:
        async with memory.run("r", SCOPE) as run:
            kept = await run.call("memory_store", {"learning": {"text": "alpha kept note"}})
            gone = await run.call("memory_store", {"learning": {"text": "beta secret note"}})
            await run.call("memory_fetch", {"query": "note"})
            await memory.rotate_key()
            await run.call("memory_forget", {"ids": [gone["id"]]})
            await run.call("memory_fetch", {"query": "note"})
        bundle = await export_bundle(memory.ledger, key_history(tmp_path), "r")
        root = memory.trust_root
    data = encode_bundle(bundle)
    payloads = [e.payload for e in decode_bundle(data).entries if e.payload is not None]
    leaves = b"".join(e.leaf for e in decode_bundle(data).entries)
    assert not any(b"beta secret" in p for p in payloads)  # the forgotten text is nowhere
    assert any(b"alpha kept" in p for p in payloads)
    assert kept["id"].encode() in leaves and gone["id"].encode() in leaves
    verified = verify_bundle(data, root)
    assert len(verified.calls) == 5
    assert len(verified.keys) == 2  # signed before and after the rotation
    report = await regress(verified)
    assert not report.changed, report.text()
    report = await regress(verified, against=tmp_path)
    assert not report.changed, report.text()
    # The current key alone is not the root of trust: entries before the rotation fail.
    with pytest.raises(VerificationError) as caught:
        verify_bundle(data, memory.vkey)
    assert caught.value.step == "unknown key"


async def test_inclusion_proof_and_checkpoint_are_checked(tmp_path: Path) -> None:
    good = decode_bundle((VECTORS / "good.bundle").read_bytes())
    first = good.entries[0]
    bad_proof = type(first)(
        seq=first.seq,
        leaf=first.leaf,
        sig=first.sig,
        salt=first.salt,
        payload=first.payload,
        proof=(b"\x00" * 32, *first.proof[1:]),
    )
    forged = type(good)(
        **{
            **{f: getattr(good, f) for f in good.__struct_fields__},
            "entries": (bad_proof, *good.entries[1:]),
        }
    )
    with pytest.raises(VerificationError) as caught:
        verify_bundle(forged, TRUST)
    assert caught.value.step == "inclusion"
    note = (
        good.checkpoint.replace("\n11\n", "\n12\n")
        if "\n11\n" in good.checkpoint
        else good.checkpoint + "x"
    )
    other = type(good)(
        **{**{f: getattr(good, f) for f in good.__struct_fields__}, "checkpoint": note}
    )
    with pytest.raises(VerificationError) as caught:
        verify_bundle(other, TRUST)
    assert caught.value.step in ("checkpoint", "inclusion")


def test_format_is_versioned() -> None:
    data = (VECTORS / "good.bundle").read_bytes()
    assert data.startswith(b'{"format":"memseal/bundle@v2",')
    # v2 and v3 are read (v3 adds an optional section); a later one is not.
    assert decode_bundle(data.replace(b"bundle@v2", b"bundle@v3", 1)).format == FORMAT
    with pytest.raises(VerificationError, match="memseal/bundle@v3"):
        decode_bundle(data.replace(b"bundle@v2", b"bundle@v4", 1))
    # The retired v1 (no signed manifest) is refused with the way out, not read as v2.
    with pytest.raises(VerificationError, match="re-export"):
        decode_bundle((VECTORS / "v1.bundle").read_bytes())
    with pytest.raises(VerificationError, match="not a memseal bundle"):
        decode_bundle(b"hello")
    with pytest.raises(InvalidRequest):
        verify_bundle(data, "not a vkey")
