"""cosignature/v1 (c2sp.org/tlog-cosignature) and the add-checkpoint body (c2sp.org/tlog-witness),
checked against the specs' examples and a real public witness's cosignature, byte for byte."""

from __future__ import annotations

import base64
import hashlib
import struct
from pathlib import Path

import pytest

from memseal.ledger.checkpoint import Checkpoint, format_checkpoint
from memseal.ledger.cosignature import (
    ALG_COSIGNATURE_V1,
    Cosigner,
    check_cosignatures,
    cosignature_message,
    cosigner_key_id,
    format_cosigner_vkey,
    parse_cosigner_vkey,
    require_cosignatures,
)
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.merkle import EMPTY_ROOT
from memseal.ledger.note import NoteSigner, key_id, sign_note, split_note
from memseal.witness.protocol import format_add_checkpoint, parse_add_checkpoint

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "cosignature"
SPEC_BODY = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
REAL_NOW = 1779573024.0  # the real cosignature's own time: the future check stays quiet


def _vector(name: str) -> str:
    return (VECTORS / name).read_text(encoding="utf-8")


def _witness(name: str = "witness.example/w1", seed: bytes = b"w" * 32) -> Cosigner:
    return Cosigner(NoteSigner.from_seed(name, seed))


def _log() -> NoteSigner:
    return NoteSigner.from_seed("log.example/one", b"l" * 32)


def _checkpoint(size: int = 3, root: bytes = b"r" * 32) -> str:
    return format_checkpoint(Checkpoint(origin="log.example/one", size=size, root=root))


# -- the specs' examples ------------------------------------------------------------


def test_signed_message_is_the_spec_example_byte_for_byte() -> None:
    expected = _vector("c2sp-tlog-cosignature-example-signed-message.txt").encode()
    assert cosignature_message(SPEC_BODY, 1679315147) == expected


def test_spec_example_line_frames_key_id_timestamp_and_signature() -> None:
    note = _vector("c2sp-tlog-cosignature-example-checkpoint.txt")
    text, signatures = split_note(note)
    assert text == SPEC_BODY
    witness = signatures[1]
    assert witness.name == "witness.example.com/w1"
    blob = witness.key_id + witness.signature
    assert len(blob) == 76
    # The timestamp is the one the spec's signed-message example shows.
    assert struct.unpack(">Q", blob[4:12])[0] == 1679315147


def test_spec_example_response_lines_are_cosignature_v1_blobs() -> None:
    response = _vector("c2sp-tlog-witness-example-add-checkpoint-response.txt")
    _, signatures = split_note(SPEC_BODY + "\n" + response)
    assert [s.name for s in signatures] == ["witness.example/w1"] * 2 + ["witness.example/w2"]
    assert all(len(s.key_id + s.signature) == 76 for s in signatures)


def test_spec_example_add_checkpoint_request_parses_and_formats_back() -> None:
    body = _vector("c2sp-tlog-witness-example-add-checkpoint-request.txt")
    request = parse_add_checkpoint(body.encode())
    assert request.old_size == 20852014
    assert len(request.proof) == 4
    assert request.proof[0] == base64.b64decode("PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=")
    assert split_note(request.note)[0] == SPEC_BODY
    assert format_add_checkpoint(request.old_size, request.proof, request.note) == body


def test_real_public_witness_cosignature_verifies() -> None:
    """remora.n621.de's cosignature, made by another implementation, checks out here."""
    note = _vector("real-witness-remora-cosigned-checkpoint.txt")
    key = parse_cosigner_vkey(_vector("real-witness-remora.vkey"))
    assert key.key_id.hex() == "da77ade7"
    checkpoint, found = check_cosignatures(note, [key], now=lambda: REAL_NOW)
    assert checkpoint.size == 1432088532
    assert [(c.witness.name, c.timestamp) for c in found] == [("remora.n621.de", 1779573024)]
    # The other witnesses' lines are unknown keys: ignored, not counted.
    assert len(require_cosignatures(note, [key], 1, now=lambda: REAL_NOW)) == 1


def test_real_cosignature_fails_once_the_checkpoint_changes() -> None:
    note = _vector("real-witness-remora-cosigned-checkpoint.txt")
    key = parse_cosigner_vkey(_vector("real-witness-remora.vkey"))
    with pytest.raises(VerificationError, match="invalid cosignature by witness remora"):
        check_cosignatures(note.replace("1432088532", "1432088533"), [key], now=lambda: REAL_NOW)


# -- keys -------------------------------------------------------------------------


def test_key_id_uses_algorithm_byte_0x04() -> None:
    witness = _witness()
    public = witness.key.public_key
    digest = hashlib.sha256(b"witness.example/w1\n\x04" + public).digest()[:4]
    assert cosigner_key_id("witness.example/w1", public) == digest
    # The same key as a note signer (0x01) has another id: no line passes as the other.
    assert key_id("witness.example/w1", public) != digest


def test_vkey_round_trips_with_type_0x04() -> None:
    witness = _witness()
    text = witness.vkey
    assert base64.b64decode(text.split("+", 2)[2])[0] == ALG_COSIGNATURE_V1
    assert parse_cosigner_vkey(text) == witness.key
    assert format_cosigner_vkey(witness.name, witness.key.public_key) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (NoteSigner.from_seed("w", b"w" * 32).verifier.text, "type 0x01 is not cosignature/v1"),
        ("w+00000000+BA==", "32 bytes"),
        ("w+zz000000+BA==", "8 lowercase hex"),
        ("just-a-name", "name\\+keyid\\+keydata"),
    ],
)
def test_vkey_refuses_what_is_not_a_witness_key(text: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_cosigner_vkey(text)


def test_vkey_with_a_wrong_key_id_is_refused() -> None:
    name, _, data = _witness().vkey.split("+", 2)
    with pytest.raises(InvalidRequest, match="key id does not match"):
        parse_cosigner_vkey(f"{name}+00000000+{data}")


# -- signing and checking ------------------------------------------------------------


def test_cosign_line_verifies_and_carries_its_time() -> None:
    witness = _witness()
    body = _checkpoint()
    line = witness.cosign(body, 1_700_000_000)
    assert line.startswith("\u2014 witness.example/w1 ") and line.endswith("\n")
    _, found = check_cosignatures(body + "\n" + line, [witness.key], now=lambda: 1.8e9)
    assert [c.timestamp for c in found] == [1_700_000_000]


def test_cosignature_covers_extension_lines() -> None:
    witness = _witness()
    body = format_checkpoint(
        Checkpoint(origin="log.example/one", size=1, root=b"r" * 32, extensions=("ext",))
    )
    line = witness.cosign(body, 1_700_000_000)
    changed = body.replace("ext", "exu") + "\n" + line
    with pytest.raises(VerificationError, match="invalid cosignature"):
        check_cosignatures(changed, [witness.key], now=lambda: 1.8e9)


def test_a_changed_timestamp_fails() -> None:
    witness = _witness()
    body = _checkpoint()
    line = witness.cosign(body, 1_700_000_000)
    name, blob64 = line.removeprefix("\u2014 ").split(" ")
    blob = bytearray(base64.b64decode(blob64))
    blob[11] ^= 1
    forged = f"\u2014 {name} {base64.b64encode(bytes(blob)).decode()}\n"
    with pytest.raises(VerificationError, match="invalid cosignature"):
        check_cosignatures(body + "\n" + forged, [witness.key], now=lambda: 1.8e9)


def test_future_timestamp_is_refused() -> None:
    witness = _witness()
    body = _checkpoint()
    line = witness.cosign(body, 2_000_000_000)
    with pytest.raises(VerificationError, match="in the future"):
        check_cosignatures(body + "\n" + line, [witness.key], now=lambda: 1.9e9)


def test_zero_timestamp_is_never_made() -> None:
    with pytest.raises(InvalidRequest, match="timestamp"):
        _witness().cosign(_checkpoint(), 0)


def test_two_lines_by_one_witness_are_refused() -> None:
    witness = _witness()
    body = _checkpoint()
    note = body + "\n" + witness.cosign(body, 1_700_000_000) + witness.cosign(body, 1_700_000_001)
    with pytest.raises(VerificationError, match="two cosignatures"):
        check_cosignatures(note, [witness.key], now=lambda: 1.8e9)


def test_quorum_counts_distinct_public_keys() -> None:
    one, two = _witness("w/one", b"1" * 32), _witness("w/two", b"2" * 32)
    body = _checkpoint()
    note = body + "\n" + one.cosign(body, 1_700_000_000) + two.cosign(body, 1_700_000_000)
    assert len(require_cosignatures(note, [one.key, two.key], 2, now=lambda: 1.8e9)) == 2
    # The same key trusted under a second name is still one witness.
    alias = Cosigner(NoteSigner.from_seed("w/alias", b"1" * 32))
    alias_note = body + "\n" + one.cosign(body, 1) + alias.cosign(body, 1)
    with pytest.raises(InvalidRequest, match="at least 2 trusted witness keys"):
        require_cosignatures(alias_note, [one.key, alias.key], 2, now=lambda: 1.8e9)


def test_quorum_not_met_is_a_verification_error() -> None:
    one, two = _witness("w/one", b"1" * 32), _witness("w/two", b"2" * 32)
    body = _checkpoint()
    note = body + "\n" + one.cosign(body, 1_700_000_000)
    with pytest.raises(VerificationError, match=r"carries 1 valid cosignature\(s\).*2 required"):
        require_cosignatures(note, [one.key, two.key], 2, now=lambda: 1.8e9)


def test_log_signature_is_not_a_cosignature() -> None:
    """A checkpoint signed by the log alone, with the witness's seed reused, counts zero."""
    seed = b"s" * 32
    log = NoteSigner.from_seed("same/name", seed)
    witness = Cosigner(NoteSigner.from_seed("same/name", seed))
    note = sign_note(_checkpoint(), [log])
    _, found = check_cosignatures(note, [witness.key], now=lambda: 1.8e9)
    assert found == ()


def test_empty_tree_root_is_rfc6962() -> None:
    assert hashlib.sha256(b"").digest() == EMPTY_ROOT


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"old 01\n\nx", "leading zeros"),
        (b"new 1\n\nx", "`old <size>`"),
        (b"old 1\nnot-base64\n\nx", "proof line 1"),
        (b"old 1\n" + b"".join([b"A" * 43 + b"=\n"] * 64) + b"\nx", "more than 63"),
        (b"old 1\n", "no empty line"),
        (b"old 1\n\n\xff", "UTF-8"),
    ],
)
def test_add_checkpoint_request_refuses_malformed_bodies(body: bytes, message: str) -> None:
    from memseal.witness.protocol import WitnessRefusal

    with pytest.raises(WitnessRefusal, match=message) as caught:
        parse_add_checkpoint(body)
    assert caught.value.status == 400
