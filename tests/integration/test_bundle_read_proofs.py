"""Read proofs from a session bundle (``export --with-read-proofs``), with no data folder.

The session of read_proof_support is exported with the reads section; each of its reads is
proven from the bundle alone, and the proof is the one the data folder makes, entry for
entry. Tampering with an entry of the section, or leaving one out, fails the bundle (and
so prove-read), naming the seq. A bundle of the v2 format (tests/vectors/bundles/v2.bundle,
made before v3) still verifies and replays; prove-read says it lacks the section.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from read_proof_support import (
    FETCH,
    LIST,
    RECALL,
    RUN,
    SCOPE,
    SEEN_WRITE,
    SEMANTIC,
    prove,
    record,
)

import memseal
from memseal import InvalidRequest
from memseal.engine import HashingEmbedder
from memseal.ledger.errors import VerificationError
from memseal.replay.evidence.bundle import (
    Bundle,
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
from memseal.replay.regress.regress import regress

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests/vectors/bundles"
MEMSEAL = Path(sys.executable).with_name("memseal")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MEMSEAL), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


async def _export(folder: Path, *, with_read_proofs: bool) -> bytes:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None, create=False) as m:
        bundle = await export_bundle(
            m.ledger,
            await m.key_history(),
            RUN,
            embedders=await m.engine.embedders(),
            with_read_proofs=with_read_proofs,
        )
    return encode_bundle(bundle)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return asyncio.run(record(tmp_path_factory.mktemp("brp") / "data"))


@pytest.fixture(scope="module")
def bundled(recorded: Any) -> bytes:
    return asyncio.run(_export(recorded.folder, with_read_proofs=True))


def _reads(data: bytes) -> Any:
    reads = decode_bundle(data).reads
    assert reads is not None
    return reads


def _edit_prefix(data: bytes, change: Any) -> bytes:
    """The bundle with its reads section's prefix replaced by ``change(prefix)``, re-encoded
    canonically (the manifest stays as signed)."""
    bundle = decode_bundle(data)
    assert bundle.reads is not None
    reads = msgspec.structs.replace(bundle.reads, prefix=tuple(change(bundle.reads.prefix)))
    return encode_bundle(msgspec.structs.replace(bundle, reads=reads))


@pytest.mark.parametrize("step", [FETCH, LIST, SEMANTIC, RECALL])
async def test_each_read_is_proven_from_the_bundle_as_from_the_folder(
    recorded: Any, bundled: bytes, step: int
) -> None:
    verified = verify_bundle(bundled, recorded.vkey)
    proof = prove_read_from_bundle(verified, step)
    from_folder = decode_read_proof(await prove(recorded.folder, step))
    # The same entries, texts and audit paths, and the same signed checkpoint at the size
    # the read observed; only the later checkpoint differs (the bundle's, not one cut now).
    assert proof.prefix == from_folder.prefix
    assert proof.checkpoint == from_folder.checkpoint
    assert proof.latest == verified.bundle.checkpoint
    if step == FETCH:
        # BM25 statistics span the other tenant's texts, which neither proof carries: both
        # fail alike, saying so (the folder can --disclose all; the bundle never has them).
        for data in (encode_read_proof(proof), encode_read_proof(from_folder)):
            with pytest.raises(VerificationError, match="outside the read's reach are withheld"):
                await verify_read(data, recorded.vkey)
    else:
        checked = await verify_read(encode_read_proof(proof), recorded.vkey)
        alike = await verify_read(encode_read_proof(from_folder), recorded.vkey)
        assert checked.result == recorded.results[step]
        assert (checked.how, checked.derived) == (alike.how, alike.derived)
    # Within the reach only, as from the folder: the other tenant's texts never travel.
    assert b"other team" not in encode_read_proof(proof)


async def test_the_reads_section_is_opt_in_and_its_size_is_the_prefix(
    recorded: Any, bundled: bytes
) -> None:
    plain = await _export(recorded.folder, with_read_proofs=False)
    assert decode_bundle(plain).reads is None
    assert plain.startswith(b'{"format":"memseal/bundle@v3",')
    reads = _reads(bundled)
    verified = verify_bundle(bundled, recorded.vkey)
    # Every entry below the last read is in entries or the prefix, once.
    last = max(c.call.observed_size for c in verified.calls if c.call.tool != "memory_store")
    held = sorted([e.seq for e in verified.bundle.entries if e.seq < last] + list(verified.prefix))
    assert held == list(range(last))
    assert len(reads.checkpoints) == 4  # one per size the four reads observed
    assert b"other team" not in bundled  # out of the run's reach: headers only
    with pytest.raises(InvalidRequest, match="--with-read-proofs"):
        prove_read_from_bundle(verify_bundle(plain, recorded.vkey), FETCH)


async def test_a_changed_prefix_entry_fails_naming_its_seq(recorded: Any, bundled: bytes) -> None:
    reads = _reads(bundled)
    first = reads.prefix[0]
    flipped = bytearray(first.leaf)
    flipped[-3] ^= 1
    changed = _edit_prefix(
        bundled,
        lambda prefix: [msgspec.structs.replace(first, leaf=bytes(flipped)), *prefix[1:]],
    )
    with pytest.raises(VerificationError) as failed:
        verify_bundle(changed, recorded.vkey)
    assert failed.value.seq == first.seq
    assert failed.value.step in ("format", "signature")


async def test_a_prefix_entry_left_out_fails_naming_its_seq(recorded: Any, bundled: bytes) -> None:
    reads = _reads(bundled)
    dropped = reads.prefix[1].seq
    cut = _edit_prefix(bundled, lambda prefix: [e for e in prefix if e.seq != dropped])
    with pytest.raises(VerificationError) as failed:
        verify_bundle(cut, recorded.vkey)
    assert failed.value.step == "completeness"


def _seen_write_bundle_and_seq(data: bytes) -> tuple[Bundle, int]:
    bundle = decode_bundle(data)
    for item in bundle.entries:
        if item.payload is not None and SEEN_WRITE.encode() in item.payload:
            return bundle, item.seq
    raise AssertionError("the write the fetch saw is not in the bundle")


async def test_the_write_a_read_saw_cannot_be_dropped(recorded: Any, bundled: bytes) -> None:
    # The fetch cites the second agent's write, so it is one of the bundle's entries: cut
    # from them and moved nowhere, the leaf is missing below the read and the roots fail.
    bundle, seen = _seen_write_bundle_and_seq(bundled)
    cut = msgspec.structs.replace(bundle, entries=tuple(e for e in bundle.entries if e.seq != seen))
    with pytest.raises(VerificationError) as failed:
        verify_bundle(encode_bundle(cut), recorded.vkey)
    assert failed.value.step == "completeness" and failed.value.seq == seen


async def _uncited(folder: Path) -> tuple[bytes, str]:
    """A run whose read cites nothing: the memory in its reach is in the prefix only."""
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as m:
        await m.call("memory_store", {"learning": {"text": "staging runs pg-7"}}, scope=SCOPE)
        async with m.run("s", SCOPE) as run:
            found = await run.call("memory_fetch", {"query": "zebra crossing", "mode": "exact"})
        assert found["hits"] == []
        bundle = await export_bundle(m.ledger, await m.key_history(), "s", with_read_proofs=True)
        return encode_bundle(bundle), m.vkey


async def test_a_payload_dropped_from_the_reach_fails(tmp_path: Path) -> None:
    data, vkey = await _uncited(tmp_path / "d")
    verified = verify_bundle(data, vkey)
    shown = next(e for e in _reads(data).prefix if e.payload is not None)
    assert verified.prefix[shown.seq].kind == "memory_stored"
    # The uncited memory travels with its text (it was in the read's reach), and the read
    # re-derives from the bundle alone.
    checked = await verify_read(encode_read_proof(prove_read_from_bundle(verified, 0)), vkey)
    assert checked.how == "byte for byte" and checked.reach == 1
    hidden = _edit_prefix(
        data,
        lambda prefix: [
            msgspec.structs.replace(e, payload=None, salt=None) if e.seq == shown.seq else e
            for e in prefix
        ],
    )
    with pytest.raises(VerificationError) as failed:
        verify_bundle(hidden, vkey)
    assert failed.value.step == "redaction" and failed.value.seq == shown.seq


async def test_a_payload_cut_to_an_empty_residue_in_the_reach_fails(tmp_path: Path) -> None:
    # A residue (the form a forget leaves) in place of the text, with no signed forget
    # behind it: its texts are gone as surely as a dropped payload's.
    data, vkey = await _uncited(tmp_path / "d")
    shown = next(e for e in _reads(data).prefix if e.payload is not None)
    residue = _edit_prefix(
        data,
        lambda prefix: [
            msgspec.structs.replace(e, payload=b'{"texts":{}}', salt=b"")
            if e.seq == shown.seq
            else e
            for e in prefix
        ],
    )
    with pytest.raises(VerificationError) as failed:
        verify_bundle(residue, vkey)
    assert failed.value.step == "redaction" and failed.value.seq == shown.seq


def test_the_cli_proves_a_read_from_a_bundle(recorded: Any, tmp_path: Path) -> None:
    exported = cli(
        "export",
        "--data",
        str(recorded.folder),
        "--run",
        RUN,
        "--with-read-proofs",
        "-o",
        "run.bundle",
        cwd=tmp_path,
    )
    assert exported.returncode == 0, exported.stderr
    assert "for read proofs" in exported.stdout
    verified = cli("verify", "run.bundle", "--trust", recorded.vkey, cwd=tmp_path)
    assert verified.returncode == 0 and "read proofs: " in verified.stdout, verified.stderr
    args = ("prove-read", "run.bundle", "--run", RUN, "--step", str(LIST))
    made = cli(*args, "--trust", recorded.vkey, "-o", "p.json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    checked = cli("verify-read", "p.json", "--trust", recorded.vkey, cwd=tmp_path)
    assert checked.returncode == 0 and "byte for byte" in checked.stdout, checked.stderr
    # A changed bundle: prove-read refuses it (1), naming the check, and writes nothing.
    data = (tmp_path / "run.bundle").read_bytes()
    first = _reads(data).prefix[0]
    flipped = bytearray(first.sig)
    flipped[0] ^= 1
    tampered = _edit_prefix(
        data, lambda prefix: [msgspec.structs.replace(first, sig=bytes(flipped)), *prefix[1:]]
    )
    (tmp_path / "bad.bundle").write_bytes(tampered)
    refused = cli("prove-read", "bad.bundle", "--run", RUN, "--step", "3", "-o", "q", cwd=tmp_path)
    assert refused.returncode == 1 and "signature" in refused.stderr
    assert not (tmp_path / "q").exists()
    # A bundle without the section: usage (2), saying how to export one.
    plain = cli(
        "export", "--data", str(recorded.folder), "--run", RUN, "-o", "plain.bundle", cwd=tmp_path
    )
    assert plain.returncode == 0, plain.stderr
    lacking = cli(
        "prove-read", "plain.bundle", "--run", RUN, "--step", "3", "-o", "q", cwd=tmp_path
    )
    assert lacking.returncode == 2 and "--with-read-proofs" in lacking.stderr


async def test_a_v2_bundle_still_verifies_and_replays() -> None:
    data = (VECTORS / "v2.bundle").read_bytes()
    assert data.startswith(b'{"format":"memseal/bundle@v2",')
    vkey = (VECTORS / "v2.vkey").read_text().strip()
    verified = verify_bundle(data, vkey)
    assert verified.bundle.reads is None and len(verified.calls) == 7
    assert encode_bundle(verified.bundle) == data  # read in its own canonical bytes
    report = await regress(verified, embedder=HashingEmbedder())
    assert not report.changed, report.text()
    with pytest.raises(InvalidRequest, match="--with-read-proofs"):
        prove_read_from_bundle(verified, 3)


def test_a_v2_bundle_with_a_reads_section_is_refused(bundled: bytes) -> None:
    # The section came with v3: under the old name it is an edit, refused before any check.
    renamed = bundled.replace(b"memseal/bundle@v3", b"memseal/bundle@v2", 1)
    with pytest.raises(VerificationError, match="no `reads` section") as failed:
        decode_bundle(renamed)
    assert failed.value.step == "format"


def test_a_v2_bundle_replays_and_updates_from_the_cli(tmp_path: Path) -> None:
    old = tmp_path / "v2.bundle"
    old.write_bytes((VECTORS / "v2.bundle").read_bytes())
    vkey = (VECTORS / "v2.vkey").read_text().strip()
    replayed = cli("replay", str(old), "--trust", vkey, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    # Re-recorded under the local replay key, it comes out as a v3 bundle that verifies.
    updated = cli("replay", str(old), "--trust", vkey, "--update", "-o", "new.bundle", cwd=tmp_path)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    new = (tmp_path / "new.bundle").read_bytes()
    assert new.startswith(b'{"format":"memseal/bundle@v3",')
    local = decode_bundle(new).keys[0]
    assert verify_bundle(new, local).bundle.reads is None
