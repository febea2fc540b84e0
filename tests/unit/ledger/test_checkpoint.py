"""Checkpoint bodies and tlog proofs, checked against the C2SP examples."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.ledger.checkpoint import (
    MAX_PROOF_HASHES,
    MAX_TREE_SIZE,
    TLOG_PROOF_HEADER,
    Checkpoint,
    TlogProof,
    format_checkpoint,
    format_tlog_proof,
    parse_checkpoint,
    parse_tlog_proof,
)
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.note import NoteSigner, open_note, sign_note, split_note

# The example in c2sp.org/tlog-checkpoint.
C2SP_BODY = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
C2SP_CHECKPOINT = (
    C2SP_BODY + "\n— example.com/behind-the-sofa "
    "Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)
ROOT = base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")

# The proof lines of the example in c2sp.org/tlog-proof (its checkpoint's
# signatures are elided there, so a real signed checkpoint stands in).
C2SP_PROOF_HEAD = (
    "c2sp.org/tlog-proof@v1\n"
    "extra YWdlLXYxLjIuMS1kYXJ3aW4tYXJtNjQudGFyLmd6kYXJ3aW4tYXJ\n"
    "index 73894\n"
    "gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=\n"
    "B95lDa8R83lS8n0eG+o0buTxRKQTYFi//1U8anccXmA=\n"
    "EKNzoDWG8LGC0Yp9o+sv3qllpMP9uHQ9B20KNL+Q1zs=\n"
    "RoopEkOdqkYqMB4MJXrbt/hMjOxsVn0IrWjpz1ZMMes=\n"
    "AHCioX9nLjsrse6YhjRRmk1WUEirVOLLRoOQ6vfO5vk=\n"
)

LOG = NoteSigner.from_seed("example.com/fancylog", bytes(range(32)))
WITNESS = NoteSigner.from_seed("witness1.example", bytes(range(32, 64)))
FANCY = Checkpoint(
    origin="example.com/fancylog",
    size=109482,
    root=base64.b64decode("sFodV/vSp5O8n9a8QpW6PRY97tfOSW5bsc2Xl/EQi08="),
)
SIGNED = sign_note(format_checkpoint(FANCY), [LOG, WITNESS])
H = bytes(range(32))


# Checkpoints ------------------------------------------------------------------------------------


def test_c2sp_checkpoint_known_answer() -> None:
    cp = parse_checkpoint(C2SP_BODY)
    assert cp == Checkpoint(origin="example.com/behind-the-sofa", size=20852163, root=ROOT)
    assert format_checkpoint(cp) == C2SP_BODY
    text, signatures = split_note(C2SP_CHECKPOINT)
    assert parse_checkpoint(text) == cp
    assert signatures[0].name == cp.origin


def test_extension_lines_round_trip() -> None:
    cp = Checkpoint(origin="o", size=0, root=bytes(32), extensions=("a b", "— c"))
    text = format_checkpoint(cp)
    assert text == "o\n0\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\na b\n— c\n"
    assert parse_checkpoint(text) == cp


def test_signed_checkpoint_opens_and_parses() -> None:
    note = open_note(SIGNED, [LOG.verifier])
    assert parse_checkpoint(note.text) == FANCY
    assert note.unverified == (("witness1.example", WITNESS.key_id),)


def test_size_bounds() -> None:
    top = C2SP_BODY.replace("20852163", str(MAX_TREE_SIZE))
    assert parse_checkpoint(top).size == 2**63 - 1
    with pytest.raises(InvalidRequest, match="2\\^63-1"):
        parse_checkpoint(C2SP_BODY.replace("20852163", str(MAX_TREE_SIZE + 1)))
    assert parse_checkpoint(C2SP_BODY.replace("20852163", "0")).size == 0


@pytest.mark.parametrize(
    "size", ["020852163", "00", "01", "", "-1", "+1", " 1", "1 ", "1_000", "١٢", "0x10", "1e3"]
)
def test_size_must_be_plain_decimal(size: str) -> None:
    with pytest.raises(InvalidRequest, match="checkpoint size"):
        parse_checkpoint(C2SP_BODY.replace("20852163", size))


@pytest.mark.parametrize(
    "root",
    [
        "",
        base64.b64encode(bytes(31)).decode(),
        base64.b64encode(bytes(33)).decode(),
        "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I",  # padding dropped
        "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2J=",  # non-zero padding bits
        "CsUYapGGPo4dkMgIAUqom_Xajj7h2fB2MPA3j2jxq2I=",  # URL-safe alphabet
        "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I= ",
        ROOT.hex(),
    ],
)
def test_root_must_be_32_bytes_of_base64(root: str) -> None:
    with pytest.raises(InvalidRequest, match="root hash"):
        parse_checkpoint(C2SP_BODY.replace("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=", root))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "end with a newline"),
        (C2SP_BODY[:-1], "end with a newline"),
        ("example.com/behind-the-sofa\n20852163\n", "origin, size and root"),
        ("example.com/behind-the-sofa\n", "origin, size and root"),
        ("\n", "origin, size and root"),
        ("\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "origin is empty"),
        (C2SP_BODY + "\n", "extension line is empty"),
        (C2SP_BODY + "ext\n\n", "extension line is empty"),
        (C2SP_BODY + "ext\tx\n", "U\\+0009"),
        ("ex\rample\n" + C2SP_BODY.split("\n", 1)[1], "U\\+000D"),
        (C2SP_BODY.replace("\n", "\r\n"), "U\\+000D"),
        (C2SP_BODY.replace("20852163", "20852163\r"), "checkpoint size"),
    ],
)
def test_malformed_checkpoint(text: str, match: str) -> None:
    with pytest.raises(InvalidRequest, match=match):
        parse_checkpoint(text)


def test_checkpoint_refuses_bad_fields() -> None:
    with pytest.raises(InvalidRequest, match="32 bytes"):
        Checkpoint(origin="o", size=1, root=bytes(31))
    with pytest.raises(InvalidRequest, match="size"):
        Checkpoint(origin="o", size=-1, root=bytes(32))
    with pytest.raises(InvalidRequest, match="size"):
        Checkpoint(origin="o", size=True, root=bytes(32))
    with pytest.raises(InvalidRequest, match="size"):
        Checkpoint(origin="o", size=MAX_TREE_SIZE + 1, root=bytes(32))
    with pytest.raises(InvalidRequest, match="origin"):
        Checkpoint(origin="", size=1, root=bytes(32))
    with pytest.raises(InvalidRequest, match="origin"):
        Checkpoint(origin="a\nb", size=1, root=bytes(32))
    with pytest.raises(InvalidRequest, match="extension"):
        Checkpoint(origin="o", size=1, root=bytes(32), extensions=("",))
    with pytest.raises(InvalidRequest, match="extension"):
        Checkpoint(origin="o", size=1, root=bytes(32), extensions=("a\nb",))


# Tlog proofs ------------------------------------------------------------------------------------


def test_c2sp_proof_lines_known_answer() -> None:
    proof = parse_tlog_proof(C2SP_PROOF_HEAD + "\n" + SIGNED)
    assert proof.index == 73894
    assert proof.extra is not None
    assert proof.extra.startswith(b"age-v1.2.1-darwin-arm64.tar.gz")
    assert len(proof.hashes) == 5
    assert proof.hashes[0] == base64.b64decode("gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=")
    assert proof.checkpoint == SIGNED
    assert format_tlog_proof(proof) == C2SP_PROOF_HEAD + "\n" + SIGNED


def test_tlog_proof_exact_layout() -> None:
    proof = TlogProof(index=0, hashes=(), checkpoint=SIGNED)
    assert format_tlog_proof(proof) == f"{TLOG_PROOF_HEADER}\nindex 0\n\n{SIGNED}"
    assert parse_tlog_proof(format_tlog_proof(proof)) == proof
    with_extra = TlogProof(index=7, hashes=(H, H), checkpoint=SIGNED, extra=b"hi")
    h64 = base64.b64encode(H).decode()
    expected = f"{TLOG_PROOF_HEADER}\nextra aGk=\nindex 7\n{h64}\n{h64}\n\n{SIGNED}"
    assert format_tlog_proof(with_extra) == expected
    assert parse_tlog_proof(expected) == with_extra


def test_empty_extra_is_distinct_from_none() -> None:
    proof = TlogProof(index=1, hashes=(H,), checkpoint=SIGNED, extra=b"")
    text = format_tlog_proof(proof)
    assert "\nextra \n" in text
    assert parse_tlog_proof(text) == proof


def test_proof_checkpoint_verifies_after_parsing() -> None:
    proof = parse_tlog_proof(format_tlog_proof(TlogProof(index=3, hashes=(H,), checkpoint=SIGNED)))
    note = open_note(proof.checkpoint, [LOG.verifier, WITNESS.verifier])
    assert parse_checkpoint(note.text) == FANCY
    assert len(note.verified) == 2


GOOD = f"{TLOG_PROOF_HEADER}\nextra aGk=\nindex 7\n{base64.b64encode(H).decode()}\n\n{SIGNED}"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no empty line"),
        (GOOD.replace("\n\n", "\n", 1), "hash 2 must be base64"),
        (GOOD.replace("\n", "\r\n"), "no empty line"),
        (GOOD.replace(TLOG_PROOF_HEADER, "c2sp.org/tlog-proof@v2"), "must start with"),
        (GOOD.replace(TLOG_PROOF_HEADER + "\n", ""), "must start with"),
        ("\n" + GOOD, "must start with"),
        (GOOD.replace("extra aGk=", "extra aGk"), "extra is not valid base64"),
        (GOOD.replace("extra aGk=", "extra aGl="), "extra is not valid base64"),
        (GOOD.replace("extra aGk=", "extra  aGk="), "extra is not valid base64"),
        (GOOD.replace("extra aGk=", "extra"), "no index line"),
        (GOOD.replace("extra aGk=", "Extra aGk="), "no index line"),
        (GOOD.replace("extra aGk=\nindex 7", "index 7\nextra aGk="), "hash 1"),
        (GOOD.replace("extra aGk=\nindex 7\n", ""), "no index line"),
        (f"{TLOG_PROOF_HEADER}\n\n{SIGNED}", "no index line"),
        (GOOD.replace("index 7", "index 07"), "index must be a decimal"),
        (GOOD.replace("index 7", "index -7"), "index must be a decimal"),
        (GOOD.replace("index 7", "index  7"), "index must be a decimal"),
        (GOOD.replace("index 7", "index"), "no index line"),
        (GOOD.replace("index 7", "index 7 "), "index must be a decimal"),
        (GOOD.replace("index 7", f"index {MAX_TREE_SIZE + 1}"), "larger than"),
        (GOOD.replace(base64.b64encode(H).decode(), base64.b64encode(H[:31]).decode()), "hash 1"),
        (GOOD.replace(base64.b64encode(H).decode(), base64.b64encode(H).decode()[:-1]), "hash 1"),
        (GOOD.replace(base64.b64encode(H).decode(), H.hex()), "hash 1"),
        (GOOD.replace("\n\n" + SIGNED, ""), "no empty line"),
        (GOOD.replace(SIGNED, ""), "checkpoint"),
        (GOOD.replace(SIGNED, format_checkpoint(FANCY)), "checkpoint: note has no blank line"),
        (GOOD.replace(SIGNED, SIGNED[:-1]), "checkpoint"),
        (GOOD + "trailing\n", "checkpoint: note signature line 3"),
        (GOOD + "\n", "ends with an empty line.*extra trailing newline"),
        (GOOD + "\n\n", "ends with an empty line"),
        (GOOD.replace("109482", "0109482"), "checkpoint: checkpoint size"),
        (GOOD.replace("EQi08=", "EQi08"), "checkpoint: checkpoint root"),
        (GOOD.replace("example.com/fancylog\n1", "1"), "checkpoint: checkpoint needs origin"),
    ],
)
def test_malformed_tlog_proof(text: str, match: str) -> None:
    with pytest.raises(InvalidRequest, match=match):
        parse_tlog_proof(text)


def test_tlog_proof_hash_limit() -> None:
    most = TlogProof(index=5, hashes=(H,) * MAX_PROOF_HASHES, checkpoint=SIGNED)
    assert parse_tlog_proof(format_tlog_proof(most)) == most
    too_many = format_tlog_proof(most).replace("\n\n", f"\n{base64.b64encode(H).decode()}\n\n", 1)
    with pytest.raises(InvalidRequest, match="more than 63 hashes"):
        parse_tlog_proof(too_many)
    with pytest.raises(InvalidRequest, match="more than 63 hashes"):
        TlogProof(index=5, hashes=(H,) * (MAX_PROOF_HASHES + 1), checkpoint=SIGNED)


def test_tlog_proof_refuses_bad_fields() -> None:
    with pytest.raises(InvalidRequest, match="index"):
        TlogProof(index=-1, hashes=(), checkpoint=SIGNED)
    with pytest.raises(InvalidRequest, match="hash 2 must be 32 bytes"):
        TlogProof(index=0, hashes=(H, H[:16]), checkpoint=SIGNED)
    with pytest.raises(InvalidRequest, match="checkpoint"):
        TlogProof(index=0, hashes=(), checkpoint=format_checkpoint(FANCY))
    with pytest.raises(InvalidRequest, match="checkpoint"):
        TlogProof(index=0, hashes=(), checkpoint=sign_note("not\na checkpoint\n", [LOG]))


# Properties -------------------------------------------------------------------------------------

LINE = st.text(st.characters(codec="utf-8", min_codepoint=0x20), min_size=1, max_size=60)
HASH = st.binary(min_size=32, max_size=32)
COUNT = st.integers(min_value=0, max_value=MAX_TREE_SIZE)


@given(origin=LINE, size=COUNT, root=HASH, extensions=st.lists(LINE, max_size=4).map(tuple))
def test_checkpoint_round_trips(
    origin: str, size: int, root: bytes, extensions: tuple[str, ...]
) -> None:
    cp = Checkpoint(origin=origin, size=size, root=root, extensions=extensions)
    text = format_checkpoint(cp)
    assert parse_checkpoint(text) == cp
    signed = sign_note(text, [LOG])
    assert parse_checkpoint(open_note(signed, [LOG.verifier]).text) == cp


@given(
    cp=st.builds(Checkpoint, origin=LINE, size=COUNT, root=HASH),
    index=COUNT,
    hashes=st.lists(HASH, max_size=MAX_PROOF_HASHES).map(tuple),
    extra=st.none() | st.binary(max_size=100),
)
def test_tlog_proof_round_trips(
    cp: Checkpoint, index: int, hashes: tuple[bytes, ...], extra: bytes | None
) -> None:
    proof = TlogProof(
        index=index, hashes=hashes, checkpoint=sign_note(format_checkpoint(cp), [LOG]), extra=extra
    )
    text = format_tlog_proof(proof)
    assert parse_tlog_proof(text) == proof
    assert text.endswith(proof.checkpoint)
